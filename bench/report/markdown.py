"""A run's report as Markdown: verdicts with counterexamples, metrics, the fault
timeline, and the seed with the command that replays the run."""

from __future__ import annotations

from typing import Any

from bench.checks import Verdict, as_expected
from bench.substrates import substrate


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.1f}"
    return "–" if v is None else str(v)


def render(summary: dict[str, Any], verdicts: list[Verdict], metrics: dict[str, Any],
           faults: list[dict[str, Any]]) -> str:
    out = [f"# {summary['scenario']} — {summary['variant']} (seed {summary['seed']})", "",
           f"- topology: `{summary['topology']}`, mode `{summary['mode']}`",
           (f"- simulated {summary['simulated_s']:.1f} s in {summary['wall_s']:.2f} s wall "
            f"({summary['sim_s_per_wall_s']:.1f} simulated s per wall s)"
            if not substrate(summary["mode"]).wall_clock
            else f"- {substrate(summary['mode']).label(summary)}: "
                 f"{summary['simulated_s']:.1f} s of run time"),
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
            f"| outcomes | {', '.join(f'{k} {n}' for k, n in metrics['outcomes'].items())} |",
            f"| latency p50 / p90 / p99 / max (ms) | {_fmt(lat['p50'])} / {_fmt(lat['p90'])} / "
            f"{_fmt(lat['p99'])} / {_fmt(lat['max'])} |",
            f"| throughput (completed/s) | {_fmt(metrics['throughput_per_s'])} |",
            f"| messages per task | {_fmt(metrics['messages_per_task'])} |",
            f"| duplicates delivered / executed | {metrics['duplicates_delivered']} / "
            f"{metrics['duplicates_executed']} |",
            f"| inbound drops | {', '.join(f'{k} {n}' for k, n in metrics['inbound_drops'].items()) or 'none'} |"]
    relay = metrics.get("relay")
    if relay:
        el, ttft = relay["event_latency_ms"], relay["time_to_first_token_ms"]
        out += [f"| relay frames / deliveries / gaps / duplicates dropped | {relay['frames']} / "
                f"{relay['deliveries']} / {relay['gaps']} / {relay['duplicates_dropped']} |",
                f"| relay event latency p50 / p99 (ms) | {_fmt(el['p50'])} / {_fmt(el['p99'])} |",
                f"| time to first token p50 / p99 (ms) | {_fmt(ttft['p50'])} / {_fmt(ttft['p99'])} |"]
    gates = metrics.get("gates")
    if gates:
        rt, think = gates["round_trip_ms"], gates["think_ms"]
        out += [f"| gates opened / by people / by timeout / extra clicks / rehydrated | "
                f"{gates['opened']} / {gates['decided_by_human']} / {gates['decided_by_timeout']} / "
                f"{gates['already_decided']} / {gates['rehydrated']} |",
                f"| gate round trip without think time p50 / p99 (ms) | {_fmt(rt['p50'])} / "
                f"{_fmt(rt['p99'])} |",
                f"| human think time p50 / p99 (ms) | {_fmt(think['p50'])} / {_fmt(think['p99'])} |"]
    if faults:
        out += ["", "## Faults", "", "| # | fault | start seq | fired |", "|---|---|---|---|"]
        out += [f"| {f['index']} | {f['kind']} | {f['seq']} | {f['fired']} |" for f in faults]
    situations = summary.get("situations")
    if situations is not None:
        out += ["", "## Situations reached", "",
                ", ".join(f"{name} ×{n}" for name, n in situations.items()) or
                "none of the catalogued situations (`bench/checks/coverage.py`)"]
    return "\n".join(out) + "\n"
