"""Plots from real runs (matplotlib, headless Agg; PNG and SVG).

Run plots read a run folder's history: latency CDF, latency quantiles over time with
the fault windows shaded, relay stream timelines with gaps marked, messages per node and
type. Matrix plots read the cells: duplicates delivered versus executed per cell, and a
topology comparison (one workload on several topologies, in one figure).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from bench.history import read_jsonl  # noqa: E402

PALETTE = ["#3366aa", "#dd7733", "#44aa77", "#aa4466", "#7766bb", "#999933", "#33aaaa",
           "#bb5522"]
FAULT_COLOUR = "#f2b6b6"


def _plain_log(axis: Any) -> None:
    """Log axis with plain numbers (50, 100, 500) instead of 5×10^1."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def _style(ax: Any, title: str, xlabel: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.25)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _legend(ax: Any, **kwargs: Any) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def save(fig: Figure, folder: Path, name: str) -> dict[str, Path]:
    """Write the figure as PNG and SVG; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"png": folder / f"{name}.png", "svg": folder / f"{name}.svg"}
    fig.savefig(paths["png"], dpi=110, bbox_inches="tight")
    fig.savefig(paths["svg"], bbox_inches="tight")
    plt.close(fig)
    return paths


def read_history(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_jsonl(run_dir / "history.jsonl"))


def fault_windows(events: Iterable[dict[str, Any]]) -> list[tuple[float, float, str]]:
    """(start ms, end ms, label) per fault, from the nemesis journal."""
    starts: dict[int, tuple[float, str]] = {}
    windows = []
    end = 0.0
    for e in events:
        end = max(end, float(e["tMs"]))
        if e["kind"] == "fault_start":
            starts[e["faultIndex"]] = (float(e["tMs"]), e["fault"])
        elif e["kind"] == "fault_healed" and e.get("faultIndex") in starts:
            t0, label = starts.pop(e["faultIndex"])
            windows.append((t0, float(e["tMs"]), label))
    windows += [(t0, end, label) for t0, label in starts.values()]
    return windows


def _shade(ax: Any, windows: list[tuple[float, float, str]]) -> None:
    for i, (t0, t1, label) in enumerate(windows):
        width = max(t1 - t0, 100.0) / 1000
        ax.axvspan(t0 / 1000, t0 / 1000 + width, color=FAULT_COLOUR, alpha=0.35, lw=0,
                   label=f"fault: {label}" if i == 0 or label != windows[i - 1][2] else None)


def latencies(events: Iterable[dict[str, Any]]) -> list[tuple[float, float]]:
    """(settled at ms, latency ms) of every COMPLETED request."""
    return [(float(e["tMs"]), float(e["latencyMs"])) for e in events
            if e["kind"] == "request_settled" and e.get("outcome") == "COMPLETED"
            and e.get("latencyMs") is not None]


def latency_cdf(series: list[tuple[str, list[float]]], title: str) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (label, values) in enumerate(series):
        if not values:
            continue
        xs = sorted(values)
        ys = [(k + 1) / len(xs) for k in range(len(xs))]
        ax.step(xs, ys, where="post", color=PALETTE[i % len(PALETTE)], lw=1.8,
                label=f"{label} (n={len(xs)}, p50 {xs[len(xs) // 2]:.0f} ms)")
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.set_ylim(0, 1.02)
    for q in (0.5, 0.99):
        ax.axhline(q, color="#888888", lw=0.6, ls=":")
    _style(ax, title, "request latency (ms, log scale)", "fraction of completed requests")
    _legend(ax, fontsize=8, loc="lower right", frameon=False)
    return fig


def latency_over_time(events: list[dict[str, Any]], title: str) -> Figure:
    points = latencies(events)
    fig, ax = plt.subplots(figsize=(9, 4))
    _shade(ax, fault_windows(events))
    if points:
        span = max(t for t, _ in points) - min(t for t, _ in points)
        # about 12 requests per bin, whole seconds: quantiles of 2 points are noise
        bin_ms = max(1000.0, round(span / max(1, len(points) / 12) / 1000) * 1000)
        ax.scatter([t / 1000 for t, _ in points], [v for _, v in points], s=9, alpha=0.5,
                   color=PALETTE[0], label="one request", lw=0)
        bins: dict[int, list[float]] = defaultdict(list)
        for t, v in points:
            bins[int(t // bin_ms)].append(v)
        xs = sorted(bins)
        for q, colour, label in ((0.5, PALETTE[1], "p50"), (0.99, PALETTE[3], "p99")):
            ys = [sorted(bins[b])[min(len(bins[b]) - 1, int(q * len(bins[b])))] for b in xs]
            ax.plot([(b + 0.5) * bin_ms / 1000 for b in xs], ys, color=colour, lw=1.8,
                    label=f"{label} per {bin_ms / 1000:g} s")
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
    _style(ax, title, "time (s) — when the request settled", "latency (ms, log scale)")
    _legend(ax, fontsize=8, loc="upper left", frameon=False)
    return fig


def relay_timeline(events: list[dict[str, Any]], title: str, max_streams: int = 8) -> Figure | None:
    frames: dict[str, list[tuple[float, int]]] = defaultdict(list)
    delivered: dict[str, list[tuple[float, int]]] = defaultdict(list)
    gaps: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    for e in events:
        if e["kind"] == "relay_frame":
            frames[e["stream"]].append((float(e["tMs"]), int(e["streamSeq"])))
        elif e["kind"] == "relay_delivered":
            delivered[e["stream"]].append((float(e["tMs"]), int(e["streamSeq"])))
        elif e["kind"] == "relay_gap":
            gaps[e["stream"]].append((float(e["tMs"]), int(e["fromSeq"]), int(e["toSeq"])))
    if not frames:
        return None
    chosen = sorted(frames, key=lambda s: (-len(gaps.get(s, [])), -len(frames[s]), s))[:max_streams]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    _shade(ax, fault_windows(events))
    for i, stream in enumerate(sorted(chosen)):
        colour = PALETTE[i % len(PALETTE)]
        f = sorted(frames[stream])
        ax.plot([t / 1000 for t, _ in f], [q for _, q in f], color=colour, lw=1, alpha=0.6)
        d = delivered.get(stream, [])
        ax.scatter([t / 1000 for t, _ in d], [q for _, q in d], s=9, color=colour, lw=0,
                   label=stream)
        for t, lo, hi in gaps.get(stream, []):
            ax.vlines(t / 1000, lo - 0.4, hi + 0.4, color="#cc0000", lw=3)
            ax.annotate("gap", (t / 1000, hi + 0.4), fontsize=7, color="#cc0000")
    _style(ax, title + " — line: frames made on the executor; dots: pushed to a tab; "
           "red: explicit gaps", "time (s)", "seq in stream")
    _legend(ax, fontsize=7, loc="upper left", frameon=False, ncol=2)
    return fig


def message_counts(events: list[dict[str, Any]], title: str) -> Figure:
    sent: dict[str, Counter[str]] = defaultdict(Counter)
    tasks = 0
    for e in events:
        if e["kind"] == "outbound_settled" and e.get("state") == "PUBLISHED":
            sent[e["node"]][e.get("messageType") or "?"] += 1
        elif e["kind"] == "task_executed":
            tasks += 1
    nodes = sorted(sent)
    types = sorted({t for c in sent.values() for t in c})
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(nodes) + 3), 4))
    bottom = [0] * len(nodes)
    for i, t in enumerate(types):
        values = [sent[n][t] for n in nodes]
        ax.bar(nodes, values, bottom=bottom, color=PALETTE[i % len(PALETTE)], label=t)
        bottom = [b + v for b, v in zip(bottom, values, strict=False)]
    total = sum(bottom)
    per_task = f"{total / tasks:.2f} messages per task" if tasks else "no tasks"
    _style(ax, f"{title} — {total} published, {per_task}", "node", "messages published")
    ax.tick_params(axis="x", labelrotation=45 if len(nodes) > 6 else 0, labelsize=8)
    _legend(ax, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def duplicates(cells: list[dict[str, Any]], title: str) -> Figure:
    """Per cell: duplicates that reached a node versus duplicates that ran a task again."""
    rows = [c for c in cells if c["metrics"]["duplicates_delivered"] or
            c["metrics"]["duplicates_executed"] or c["cell"]["variant"] != "reference"]
    rows = rows or cells
    seeds = len({c["cell"]["seed"] for c in rows}) > 1
    labels = [f"{c['cell']['scenario']} · {c['cell']['variant']}"
              + (f" · s{c['cell']['seed']}" if seeds else "") for c in rows]
    delivered = [c["metrics"]["duplicates_delivered"] for c in rows]
    executed = [c["metrics"]["duplicates_executed"] for c in rows]
    fig, ax = plt.subplots(figsize=(8, max(3, 0.32 * len(rows) + 1.2)))
    ys = list(range(len(rows)))
    ax.barh([y + 0.2 for y in ys], delivered, height=0.4, color=PALETTE[0],
            label="duplicates delivered (dropped by ledger or task table)")
    ax.barh([y - 0.2 for y in ys], executed, height=0.4, color=PALETTE[3],
            label="duplicates executed (a task ran again)")
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    _style(ax, title, "count", "")
    _legend(ax, fontsize=8, frameon=False, loc="lower right")
    return fig


def topology_comparison(series: list[tuple[str, list[float], float | None]], title: str) -> Figure:
    """One workload on several topologies: latency CDFs, and messages per task."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    for i, (label, values, _mpt) in enumerate(series):
        if values:
            xs = sorted(values)
            left.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post",
                      color=PALETTE[i % len(PALETTE)], lw=1.8, label=label)
    left.set_xscale("log")
    _plain_log(left.xaxis)
    _style(left, title, "request latency (ms, log scale)", "fraction of completed requests")
    _legend(left, fontsize=8, frameon=False, loc="lower right")
    right.bar([s[0] for s in series], [s[2] or 0 for s in series],
              color=[PALETTE[i % len(PALETTE)] for i in range(len(series))])
    _style(right, "messages per task", "topology", "")
    right.tick_params(axis="x", labelsize=8)
    return fig


def run_plots(run_dir: Path) -> dict[str, dict[str, Path]]:
    """Every run plot for one run folder, into <run>/plots/. Returns name -> paths."""
    events = read_history(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    label = f"{summary['scenario']} · {summary['variant']} · seed {summary['seed']}"
    folder = run_dir / "plots"
    out = {"latency_cdf": save(latency_cdf([(label, [v for _, v in latencies(events)])],
                                           f"Latency CDF — {label}"), folder, "latency_cdf"),
           "latency_over_time": save(latency_over_time(events, f"Latency over time — {label}"),
                                     folder, "latency_over_time"),
           "messages": save(message_counts(events, "Messages per node and type"), folder,
                            "messages")}
    relay = relay_timeline(events, "Relay streams")
    if relay is not None:
        out["relay"] = save(relay, folder, "relay")
    return out


def verdict_grid(cells: list[dict[str, Any]], title: str) -> Figure:
    """The matrix at a glance: one row per cell, one column per checker; green TRUE, red
    FALSE, amber UNKNOWN; a black frame where the verdict is not what the cell expects."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle
    checkers: list[str] = []
    for c in cells:
        checkers += [k for k in c["verdicts"] if k not in checkers]
    code = {"true": 0, "unknown": 1, "false": 2}
    grid = [[code[c["verdicts"].get(k, "unknown")] for k in checkers] for c in cells]
    fig, ax = plt.subplots(figsize=(0.42 * len(checkers) + 4.5, 0.2 * len(cells) + 1.8))
    ax.imshow(grid, aspect="auto", interpolation="nearest", vmin=0, vmax=2,
              cmap=ListedColormap(["#5cb85c", "#f0ad4e", "#d9534f"]))
    for y, c in enumerate(cells):
        for x, k in enumerate(checkers):
            if k in c["wrong"]:
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=2, ec="black"))
    ax.set_xticks(range(len(checkers)), checkers, rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(len(cells)), [c["cell"]["id"] for c in cells], fontsize=6.5)
    ax.set_xticks([x - 0.5 for x in range(1, len(checkers))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(cells))], minor=True)
    ax.grid(which="minor", color="white", lw=0.6)
    ax.tick_params(which="minor", length=0)
    passed = sum(not c["wrong"] for c in cells)
    ax.set_title(f"{title} — {passed} of {len(cells)} cells as expected "
                 "(green true, red false, amber unknown)", fontsize=10, loc="left")
    return fig
