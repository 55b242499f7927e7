"""A run's report as Markdown: verdicts with counterexamples, metrics, the fault
timeline, and the seed with the command that replays the run."""

from __future__ import annotations

from typing import Any

from bench.checks import Verdict, as_expected
from bench.metrics import Metrics
from bench.report import text
from bench.report.summary import Summary


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return "–" if v is None else str(v)


def _per_task(value: float | None) -> str:
    """Two decimals, as the messages plot's title and report.html say it."""
    return "–" if value is None else f"{value:.2f}"


def _at(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.1f} s"


def render(summary: Summary, verdicts: list[Verdict], metrics: Metrics,
           faults: list[dict[str, Any]]) -> str:
    out = [f"# {summary['scenario']} — {summary['variant']} (seed {summary['seed']})", "",
           f"- topology: `{summary['topology']}`, mode `{summary['mode']}`",
           f"- {text.clock(summary)}",
           f"- replay: `{summary['replay']}`", "", "## Verdicts", "",
           "| checker | verdict | expected | counts |", "|---|---|---|---|"]
    for v in verdicts:
        counts = ", ".join(f"{k} {n}" for k, n in v.counts.items() if n)
        mark = "" if as_expected(v.value.value, summary["expect"].get(v.name, "true")) else " ⚠"
        out.append(f"| {v.name} | **{v.value.value.upper()}**{mark} | "
                   f"{summary['expect'].get(v.name, 'true')} | {counts} |")
    for v in verdicts:
        if v.counterexamples or v.note:
            out += ["", f"### {v.name}: {v.value.value}", ""]
            if v.note:
                out.append(f"_{v.note.strip()}_")
            for rule_id, found in v.rules.items():
                cases = [c for c in v.counterexamples if c.get("rule") == rule_id]
                if not found["violations"] and not found["unknown"]:
                    continue
                out.append(f"- **{rule_id}**: {found['violations']} violation(s)"
                           + (f", {found['unknown']} undecided" if found["unknown"] else ""))
                out += [f"  - seq {', '.join(map(str, c['seq']))}: {c['why']}" for c in cases]
    lat = metrics["latency_ms"]
    out += ["", "## Metrics", "", "| metric | value |", "|---|---|",
            f"| requests | {metrics['requests']} |",
            f"| outcomes | {text.outcomes(metrics)} |",
            f"| latency (ms) | {text.latency(lat)} |",
            f"| throughput (completed/s) | {_fmt(metrics['throughput_per_s'])} |",
            f"| messages per task | {_per_task(metrics['messages_per_task'])} |",
            f"| duplicates | {text.duplicates(metrics)} |",
            f"| inbound drops | {', '.join(f'{k} {n}' for k, n in metrics['inbound_drops'].items()) or 'none'} |"]
    relay = metrics["relay"]
    if relay:
        out.append(f"| relay | {text.relay(relay)} |")
    gates = metrics["gates"]
    if gates:
        out.append(f"| gates | {text.gates(gates)} |")
    directory = metrics["directory"]
    if directory and directory["full_after_ms"]["p50"] is not None:
        out.append(f"| directory | {text.directory(directory)} |")
    for o in metrics["broker_outages"] or []:
        out.append(f"| broker | {text.broker_outage(o)} |")
    for w in metrics["wills_after_silence"] or []:
        out.append(f"| broker keepalive | {text.will_after_silence(w)} |")
    if faults:
        out += ["", "## Faults", "", "Seconds since the workload started (once every node was "
                "up), the clock a scenario's `at_s` counts on.", "",
                "| # | fault | scheduled at | journaled at | fired | history seq |",
                "|---|---|---|---|---|---|"]
        out += [f"| {f['index']} | {f['kind']} | {_at(f.get('at_s'))} | "
                f"{_at(f.get('journaled_s'))} | {f['fired']} | {f['seq']} |" for f in faults]
    situations = summary.get("situations")
    if situations is not None:
        out += ["", "## Situations reached", "",
                ", ".join(f"{name} ×{n}" for name, n in situations.items()) or
                "none of the catalogued situations (docs/reference/situations.md lists them)"]
    return "\n".join(out) + "\n"
