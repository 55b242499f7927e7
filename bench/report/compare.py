"""`a2a-bench compare`: runs side by side — verdicts, message counts and latency
quantiles — e.g. the same scenario in sim and live, on amqtt and Mosquitto, or on several
topologies. Matrix folders compare too: one matrix shows, for each scenario, variant and
seed it ran on more than one topology, substrate or broker, those cells side by side; two
or more matrices are compared cell by cell.

Against the first run, each other run gets its fidelity: how its outcome counts differ
(identical or not) and the ratios of its latency quantiles (p50, p90, p99 of completed
requests, and of their transport overhead: latency less the task's own run time) — how
well a simulation predicted a live run, or one broker another."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.core.commands import RequestOutcome
from bench.substrates import substrate


def load(run_dir: Path) -> dict[str, Any]:
    for name in ("summary.json", "verdicts.json", "metrics.json"):
        if not (run_dir / name).exists():
            raise ValueError(f"{run_dir}: no {name} (is it a run folder?)")
    return {"dir": run_dir, "summary": json.loads((run_dir / "summary.json").read_text()),
            "verdicts": json.loads((run_dir / "verdicts.json").read_text())["verdicts"],
            "metrics": json.loads((run_dir / "metrics.json").read_text())}


def _parts(run: dict[str, Any]) -> list[str]:
    s = run["summary"]
    where = substrate(s["mode"]).tag(s)
    return [s["scenario"], s["variant"], s["topology"], where, f"s{s['seed']}",
            f"mqtt{s.get('mqtt', '3.1.1')}"]


def labels(runs: list[dict[str, Any]]) -> list[str]:
    """Each run's label, made of only what differs between the runs (all of it but the
    MQTT version if nothing)."""
    parts = [_parts(r) for r in runs]
    keep = [i for i in range(6) if len({p[i] for p in parts}) > 1] or list(range(5))
    return [":".join(p[i] for i in keep) for p in parts]


def _num(v: Any) -> str:
    if v is None:
        return "–"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    table = [["", *labels(runs)]]
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
    # every way a request ended that some run shows (completed always)
    seen = {k for r in runs for k, n in (r["metrics"].get("outcomes") or {}).items() if n}
    outcomes = [(o.value.lower().replace("_", " "), f"outcomes.{o.value}") for o in RequestOutcome
                if o is RequestOutcome.COMPLETED or o.value in seen]
    for label, path in (("requests", "requests"), *outcomes,
                        ("latency p50 ms", "latency_ms.p50"), ("latency p90 ms", "latency_ms.p90"),
                        ("latency p99 ms", "latency_ms.p99"), ("latency max ms", "latency_ms.max"),
                        ("overhead p50 ms", "overhead_ms.p50"), ("overhead p90 ms", "overhead_ms.p90"),
                        ("overhead p99 ms", "overhead_ms.p99"),
                        ("messages published", "messages_published"),
                        ("messages per task", "messages_per_task"),
                        ("duplicates delivered", "duplicates_delivered"),
                        ("duplicates executed", "duplicates_executed")):
        table.append([label, *metric(path)])
    table.append(["seed", *(str(r["summary"]["seed"]) for r in runs)])
    return table


def ratio(a: Any, b: Any) -> float | None:
    """b / a, or None where either is missing (a 0 ms quantile counts as 1 ms)."""
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return max(float(b), 1.0) / max(float(a), 1.0)


def fidelity(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run after the first against the first: outcome-count differences (run minus
    first) and latency ratios (run / first) of completed requests and of their overhead."""
    base = runs[0]["metrics"]
    out = []
    for label, r in zip(labels(runs)[1:], runs[1:], strict=True):
        m = r["metrics"]
        a, b = base.get("outcomes") or {}, m.get("outcomes") or {}
        diff = {k: b.get(k, 0) - a.get(k, 0) for k in sorted(set(a) | set(b))
                if b.get(k, 0) != a.get(k, 0)}
        out.append({"run": label, "outcomes_identical": not diff, "outcome_diff": diff,
                    "latency_ratio": {q: ratio((base.get("latency_ms") or {}).get(q),
                                                (m.get("latency_ms") or {}).get(q))
                                      for q in ("p50", "p90", "p99")},
                    "overhead_ratio": {q: ratio((base.get("overhead_ms") or {}).get(q),
                                                 (m.get("overhead_ms") or {}).get(q))
                                       for q in ("p50", "p90", "p99")}})
    return out


def _ratios(r: dict[str, float | None]) -> str:
    return " ".join(f"{q} {'–' if v is None else f'x{v:.3g}'}" for q, v in r.items())


def render_fidelity(runs: list[dict[str, Any]]) -> list[str]:
    first = labels(runs)[0]
    lines = [f"against {first} (outcomes: this run minus it; ratios: this run over it; "
             "overhead: latency less the task's own run time):"]
    for f in fidelity(runs):
        diff = ", ".join(f"{k} {n:+d}" for k, n in f["outcome_diff"].items())
        lines.append(f"  {f['run']}: outcomes " + ("identical" if f["outcomes_identical"]
                                                    else f"differ ({diff})"))
        lines.append(f"    latency  {_ratios(f['latency_ratio'])}")
        lines.append(f"    overhead {_ratios(f['overhead_ratio'])}")
    return lines


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
    return "\n".join([*lines, "", *render_fidelity(runs)])


def is_matrix(folder: Path) -> bool:
    return (folder / "matrix.json").exists()


def matrix_groups(folder: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Cells of one matrix that ran the same scenario, variant and seed in more than one
    place (topology, substrate, broker): each group's runs, ready for `render`."""
    records = json.loads((folder / "matrix.json").read_text())["records"]
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in records:
        c = r["cell"]
        groups.setdefault((c["scenario"], c["variant"], c["seed"]), []).append(r)
    out = []
    for (scenario, variant, seed), rs in sorted(groups.items()):
        runs, seen = [], set()
        for r in rs:
            run = load(folder / "cells" / r["cell"]["id"])
            key = tuple(_parts(run))
            if key not in seen:
                seen.add(key)
                runs.append(run)
        if len(runs) > 1:
            out.append((f"{scenario} · {variant} · seed {seed}", runs))
    return out


def render_matrices(folders: list[Path]) -> str:
    """Two or more matrices cell by cell: verdict letters and p50 latency, differences marked."""
    short = {"true": "T", "false": "F", "unknown": "?"}
    data = [{r["cell"]["id"]: r for r in json.loads((f / "matrix.json").read_text())["records"]}
            for f in folders]
    ids = [i for i in data[0] if all(i in d for d in data[1:])]
    header = ["cell", *(f.name for f in folders)]
    table = [header]
    differ = 0
    for i in ids:
        cells = []
        for d in data:
            r = d[i]
            p50 = r["metrics"]["latency_ms"]["p50"]
            cells.append("".join(short[v] for v in r["verdicts"].values())
                         + f" p50 {'–' if p50 is None else f'{p50:.0f}'}")
        mark = " *" if len({c.split(' ')[0] for c in cells}) > 1 else ""
        differ += bool(mark)
        table.append([i + mark, *cells])
    widths = [max(len(row[k]) for row in table) for k in range(len(header))]
    lines = ["  ".join(c.ljust(widths[k]) for k, c in enumerate(row)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    only = sum(len(d) for d in data) - len(ids) * len(data)
    lines += ["", f"{len(ids)} cells in common, {differ} with different verdicts (*)"
              + (f"; {only} cells in only some of the matrices" if only else "")]
    return "\n".join(lines)
