"""`python -m bench.tools.attack_table`: which attacks succeed, per admission mode and signature
version. Measured by the auth_admission checker on simulated runs of scenarios/attacks.toml,
tampering.toml, replay_stale.toml and replay_expired.toml (their own seeds), not written by
hand. Prints a Markdown table (the one in docs/identity.md)."""

from __future__ import annotations

import re
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.core.auth import AuthMode, SignatureVersion
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.tools import Parser
from bench.variants import REFERENCE

ATTACKS = [("forged_sender:unsigned", "forged, unsigned"),
           ("forged_sender:flat_token", "forged with the leaked flat token"),
           ("forged_sender:other_agent_key", "forged with another agent's key"),
           ("replay:fresh", "captured and replayed within seconds"),
           ("replay:stale", "replayed after the timestamp window (6 min)"),
           ("replay:expired", "replayed after the ledger's 24 h TTL (25 h)"),
           ("tamper_payload", "payload altered in flight"),
           ("tamper_routing", "toAgentId altered in flight"),
           ("tamper_headers", "replyNodeId altered in flight")]
SCENARIO_FILES = ("attacks", "tampering", "replay_stale", "replay_expired")


def measure(seed: int | None = None) -> dict[tuple[str, str], dict[str, tuple[int, int, int]]]:
    """(mode, version) -> attack -> (sent, admitted, executed)."""
    out: dict[tuple[str, str], dict[str, tuple[int, int, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SCENARIO_FILES:
            base = load_scenario(SCENARIOS / f"{name}.toml", seed=seed)
            for mode in AuthMode:
                for version in SignatureVersion:
                    scenario = replace(base, auth=replace(base.auth, mode=mode, signature=version))
                    run = run_scenario(scenario, REFERENCE,
                                       Path(tmp) / f"{name}-{mode.value}-{version.value}", mode="sim")
                    verdict = next(v for v in run.verdicts if v.name == "auth_admission")
                    if verdict.value.value != "true":
                        raise SystemExit(f"auth_admission is {verdict.value.value} for the "
                                         f"reference on {name} in {mode.value} mode, signature "
                                         f"v{version.value}")
                    counts = verdict.counts
                    prefix = f"{mode.value}/v{version.value} "
                    col = out.setdefault((mode.value, version.value), {})
                    for a, _label in ATTACKS:
                        sent = counts.get(f"{prefix}{a} sent", 0)
                        if sent:
                            col[a] = (sent, counts.get(f"{prefix}{a} admitted", 0),
                                      counts.get(f"{prefix}{a} executed", 0))
    return out


def table(results: dict[tuple[str, str], dict[str, tuple[int, int, int]]]) -> str:
    columns = sorted(results)
    head = "| attack | " + " | ".join(f"{m} v{v}" for m, v in columns) + " |"
    lines = [head, "|---|" + "---|" * len(columns)]
    for key, label in ATTACKS:
        cells = []
        for col in columns:
            sent, admitted, executed = results[col].get(key, (0, 0, 0))
            cells.append("–" if not sent else
                         f"**{executed}/{sent} executed**" if executed else
                         f"{admitted}/{sent} got in, none executed" if admitted else
                         f"0/{sent} got in")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = Parser(description=__doc__)
    parser.add_argument("--seed", type=int, help="the scenario's seed by default")
    parser.add_argument("--check-readme", type=Path, metavar="FILE",
                        help="exit 1 if the table in FILE (docs/identity.md, between the "
                             "attack-table markers) differs")
    args = parser.parse_args()
    text = table(measure(args.seed))
    if args.check_readme:
        found = re.search(r"<!-- attack-table -->\n(.*?)\n<!-- /attack-table -->",
                          args.check_readme.read_text(), re.S)
        if found is None or found.group(1).strip() != text.strip():
            raise SystemExit(f"the attack table in {args.check_readme} differs from the measured "
                             "one:\n" + text)
    print(text)


if __name__ == "__main__":
    main()
