"""How well a simulation predicted the live runs of a matrix (the fidelity matrix,
`scenarios/fidelity.matrix.toml`): for every scenario run both ways, the simulation with a
broker's model against the live run on that broker, live inproc nodes against one OS
process per node, and the docker run against both (a matrix with `modes = ["docker"]`,
`scenarios/docker.matrix.toml`). Per pair: do the verdicts agree, are the outcome counts
identical, and how far apart are the p99 latencies of completed requests (second / first).

The targets are issue 15's: identical verdicts wherever a verdict is judged, identical
outcome counts sim vs Mosquitto on at least 95 % of scenarios, p99 within x1.5 on at least
90 %, and inproc = process outcome counts on the restart scenarios.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report.compare import ratio
from bench.substrates import substrate
from bench.substrates.descriptor import COMPARED

P99_WITHIN = 1.5


@dataclass(frozen=True)
class Pair:
    scenario: str
    kind: str             # "sim vs live, amqtt", "inproc vs process, mosquitto"
    a: dict[str, Any]     # the cell record the other is held against (the prediction)
    b: dict[str, Any]
    #: checker -> why the simulation does not show this broker's verdict (the scenario's
    #: [unmodelled.<broker>]): such a difference is declared, not counted
    declared: dict[str, str] = field(default_factory=dict)

    def _differ(self) -> list[str]:
        va, vb = self.a["verdicts"], self.b["verdicts"]
        return [k for k in va if k in vb and va[k] != vb[k] and "unknown" not in (va[k], vb[k])]

    @property
    def verdicts_differ(self) -> list[str]:
        """Verdicts that differ where both sides judged (UNKNOWN on either side is not a
        disagreement about the system, but about what was exercised: counted apart), and
        that the scenario does not declare out of the model's reach."""
        return [k for k in self._differ() if k not in self.declared]

    @property
    def declared_differ(self) -> list[str]:
        return [k for k in self._differ() if k in self.declared]

    @property
    def unknown_differ(self) -> list[str]:
        va, vb = self.a["verdicts"], self.b["verdicts"]
        return [k for k in va if k in vb and va[k] != vb[k] and "unknown" in (va[k], vb[k])]

    @property
    def outcome_diff(self) -> dict[str, int]:
        oa = self.a["metrics"].get("outcomes") or {}
        ob = self.b["metrics"].get("outcomes") or {}
        return {k: ob.get(k, 0) - oa.get(k, 0) for k in sorted(set(oa) | set(ob))
                if ob.get(k, 0) != oa.get(k, 0)}

    @property
    def p99_ratio(self) -> float | None:
        return ratio((self.a["metrics"].get("latency_ms") or {}).get("p99"),
                     (self.b["metrics"].get("latency_ms") or {}).get("p99"))

    @property
    def p99_close(self) -> bool:
        r = self.p99_ratio
        return r is None or 1 / P99_WITHIN <= r <= P99_WITHIN


def _either(record: dict[str, Any]) -> dict[str, str]:
    """The verdicts a cell's scenario takes either way on its broker: declared, not counted."""
    return {k: "the scenario expects either verdict on this broker (timing)"
            for k, w in (record.get("expect") or {}).items() if w == "either"}


def pairs(records: list[dict[str, Any]]) -> list[Pair]:
    """The cells of one scenario, variant, topology, seed, broker and MQTT version on two places the
    substrates compare (`bench.substrates.descriptor.COMPARED`), in a stable order."""
    by_place: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in records:
        c = r["cell"]
        place = substrate(c["mode"]).place(c["broker"], c.get("nodes", "inproc"))
        # of two cells in one place (live inproc and live process on one broker are two
        # places; nothing else is), the later one stands
        by_place[(c["scenario"], c["variant"], c["topology"], c["seed"], c["broker"],
                  c.get("mqtt", ""), place)] = r
    out: list[tuple[tuple[str, ...], Pair]] = []
    for key in {k[:6] for k in by_place}:
        scenario, variant = key[0], key[1]
        # a seeded defect is a row of its own (it is meant to differ from the reference)
        label = scenario if variant == "reference" else f"{scenario} · {variant}"
        for compared in COMPARED:
            a = next((by_place[(*key, p)] for p in compared.model if (*key, p) in by_place),
                     None)
            b = next((by_place[(*key, p)] for p in compared.real if (*key, p) in by_place),
                     None)
            if a is None or b is None:
                continue
            declared = (_either(b) if compared.timing_declared else {}) \
                | dict(a.get("unmodelled") or {})
            cell = b["cell"]
            # rows grouped by the cell that is compared with a model, as that cell sorts
            order = tuple(map(str, (*key[:4], cell["mode"], key[4], cell.get("nodes", ""),
                                    key[5])))
            version = f", MQTT {key[5]}" if key[5] else ""
            out.append((order, Pair(label, f"{compared.name}, {key[4]}{version}", a, b,
                                    declared)))
    return [p for _, p in sorted(out, key=lambda o: o[0])]


def _share(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "0/0"


def summary(ps: list[Pair]) -> list[str]:
    """One line per comparison kind: how many pairs meet each target."""
    lines = []
    for kind in sorted({p.kind for p in ps}):
        group = [p for p in ps if p.kind == kind]
        same_v = sum(not p.verdicts_differ for p in group)
        same_o = sum(not p.outcome_diff for p in group)
        close = sum(p.p99_close for p in group)
        lines.append(f"{kind}: verdicts agree {_share(same_v, len(group))}; outcome counts "
                     f"identical {_share(same_o, len(group))}; p99 within x{P99_WITHIN:g} "
                     f"{_share(close, len(group))}")
    return lines


def table(ps: list[Pair]) -> list[str]:
    """A Markdown table: one row per pair."""
    rows = ["| scenario | compared | verdicts | outcome counts (2nd - 1st) | p99 ratio |",
            "|---|---|---|---|---|"]
    for p in ps:
        verdicts = ("differ: " + ", ".join(p.verdicts_differ) if p.verdicts_differ else "agree") \
            + "".join(f" (declared: {k} — {p.declared[k]})" for k in p.declared_differ) \
            + (f" (unknown on one side: {', '.join(p.unknown_differ)})" if p.unknown_differ else "")
        diff = ", ".join(f"{k} {n:+d}" for k, n in p.outcome_diff.items()) or "identical"
        ratio = p.p99_ratio
        shown = "–" if ratio is None else f"x{ratio:.2f}" + ("" if p.p99_close else " **far**")
        rows.append(f"| {p.scenario} | {p.kind} | {verdicts} | {diff} | {shown} |")
    return rows


def _cell(p: Pair) -> str:
    """One comparison in a few characters: = for agreement, else what differs."""
    verdicts = "=" if not p.verdicts_differ else "≠ " + ", ".join(p.verdicts_differ)
    if p.declared_differ:
        verdicts += "*"
    outcomes = "=" if not p.outcome_diff else \
        " ".join(f"{k.lower().replace('_', ' ')} {n:+d}" for k, n in p.outcome_diff.items())
    ratio = p.p99_ratio
    p99 = "–" if ratio is None else f"x{ratio:.2f}" + ("" if p.p99_close else " (far)")
    return f"{verdicts} / {outcomes} / {p99}"


def wide_table(ps: list[Pair]) -> list[str]:
    """One row per scenario, one column per comparison: verdicts / outcome counts / p99
    ratio, "=" where they agree; * where a verdict difference is declared (listed below)."""
    kinds = sorted({p.kind for p in ps})
    rows = ["| scenario | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    by = {(p.scenario, p.kind): p for p in ps}
    notes = []
    for scenario in sorted({p.scenario for p in ps}):
        cells = [_cell(by[(scenario, k)]) if (scenario, k) in by else "" for k in kinds]
        rows.append(f"| {scenario} | " + " | ".join(cells) + " |")
        notes += [f"- {scenario}, {p.kind}: {k} differs, declared: {p.declared[k]}"
                  for k in sorted({p.kind for p in ps}) for p in [by.get((scenario, k))]
                  if p is not None for k in p.declared_differ]
    return rows + ([""] + notes if notes else [])


def render(folder: Path) -> str | None:
    """The fidelity report of a matrix folder, or None if it has no pair to compare."""
    records = json.loads((folder / "matrix.json").read_text())["records"]
    ps = pairs(records)
    if not ps:
        return None
    return "\n".join(["## Fidelity: the simulation against the live and docker runs", "", *summary(ps), "",
                      "Each cell: verdicts / outcome counts (second minus first) / p99 of "
                      "completed requests, second over first.", "", *wide_table(ps)])
