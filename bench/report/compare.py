"""`a2a-bench compare RUN_A RUN_B ...`: runs side by side — verdicts, message counts and
latency quantiles — e.g. the same scenario in sim and live, or on amqtt and Mosquitto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load(run_dir: Path) -> dict[str, Any]:
    for name in ("summary.json", "verdicts.json", "metrics.json"):
        if not (run_dir / name).exists():
            raise ValueError(f"{run_dir}: no {name} (is it a run folder?)")
    return {"dir": run_dir, "summary": json.loads((run_dir / "summary.json").read_text()),
            "verdicts": json.loads((run_dir / "verdicts.json").read_text())["verdicts"],
            "metrics": json.loads((run_dir / "metrics.json").read_text())}


def _label(run: dict[str, Any]) -> str:
    s = run["summary"]
    where = s["mode"] if s["mode"] == "sim" else f"live/{s.get('broker')}/{s.get('nodes')}"
    return f"{s['scenario']}:{s['variant']}:{where}"


def _num(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    table = [["", *(_label(r) for r in runs)]]
    names = [v["name"] for v in runs[0]["verdicts"]]
    for name in names:
        cells = []
        for r in runs:
            found = [v for v in r["verdicts"] if v["name"] == name]
            cells.append(found[0]["value"].upper() if found else "–")
        table.append([f"verdict {name}", *cells])
    def metric(path: str) -> list[str]:
        out = []
        for r in runs:
            value: Any = r["metrics"]
            for part in path.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            out.append(_num(value))
        return out
    for label, path in (("requests", "requests"), ("completed", "outcomes.COMPLETED"),
                        ("no response", "outcomes.NO_RESPONSE"),
                        ("undeliverable", "outcomes.UNDELIVERABLE"),
                        ("latency p50 ms", "latency_ms.p50"), ("latency p90 ms", "latency_ms.p90"),
                        ("latency p99 ms", "latency_ms.p99"), ("latency max ms", "latency_ms.max"),
                        ("messages published", "messages_published"),
                        ("messages per task", "messages_per_task"),
                        ("duplicates delivered", "duplicates_delivered"),
                        ("duplicates executed", "duplicates_executed")):
        table.append([label, *metric(path)])
    table.append(["seed", *(str(r["summary"]["seed"]) for r in runs)])
    return table


def render(runs: list[dict[str, Any]]) -> str:
    table = rows(runs)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for k, row in enumerate(table):
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    differing = [row[0] for row in table[1:] if row[0].startswith("verdict") and len(set(row[1:])) > 1]
    if differing:
        lines += ["", "verdicts that differ: " + ", ".join(d.removeprefix("verdict ") for d in differing)]
    return "\n".join(lines)
