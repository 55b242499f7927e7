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

from bench.report.readings import (  # noqa: E402
    acted,
    answered_otherwise,
    fault_starts_ms,
    fault_windows,
    latencies,
    not_completed,
    workload_origin_ms,
)
from bench.substrates import substrate

PALETTE = ["#3366aa", "#dd7733", "#44aa77", "#aa4466", "#7766bb", "#999933", "#33aaaa",
           "#bb5522"]
#: Light fills, one per fault of a run (by its index), distinct from the data colours.
FAULT_COLOURS = ["#f2b6b6", "#b6d7f2", "#c9e8b6", "#f2dcb6", "#dcc6f0", "#b6efe6"]


def _plain_log(axis: Any, values: Iterable[float] = ()) -> None:
    """Log axis with plain numbers (50, 100, 500) instead of 5×10^1, and enough of them: a
    span of less than a decade and a half gets a label at every 1..9 step."""
    from matplotlib.ticker import FuncFormatter, LogLocator
    positive = [v for v in values if v > 0]
    span = max(positive) / min(positive) if positive else 1000.0
    subs = (tuple(float(k) for k in range(1, 10)) if span < 4 else
            (1.0, 2.0, 3.0, 5.0) if span < 40 else (1.0, 2.0, 5.0))
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))


def _no_data(ax: Any, what: str) -> None:
    ax.text(0.5, 0.5, f"no data: {what}", transform=ax.transAxes, ha="center",
            va="center", fontsize=10, color="#777777")


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


def save(fig: Figure, folder: Path, name: str,
         formats: tuple[str, ...] = ("png", "svg")) -> dict[str, Path]:
    """Write the figure as PNG and SVG (or those of `formats`); returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {fmt: folder / f"{name}.{fmt}" for fmt in formats}
    if "png" in paths:
        fig.savefig(paths["png"], dpi=110, bbox_inches="tight")
    if "svg" in paths:
        fig.savefig(paths["svg"], bbox_inches="tight")
    plt.close(fig)
    return paths


def _shade(ax: Any, events: list[dict[str, Any]], origin_ms: float) -> None:
    """Each fault in a colour of its own, labelled once with when the scenario scheduled it
    and when it acted (a restart in the flush window crashes its node later than its at_s);
    the deployment's start-up, before the workload's clock, in grey."""
    if origin_ms >= 50:   # a simulated deployment starts in no time: nothing to show
        ax.axvspan(-origin_ms / 1000, 0, lw=0, color="#e6e6e6",
                   label=f"start-up ({origin_ms / 1000:.1f} s, before the workload)")
    scheduled = fault_starts_ms(events)
    windows = fault_windows(events)
    spans = acted(windows, origin_ms)
    seen: set[int] = set()
    for t0, t1, _label, index in windows:
        width = max(t1 - t0, 100.0) / 1000
        at = f" at {scheduled[index] / 1000:g} s" if index in scheduled else ""
        ax.axvspan((t0 - origin_ms) / 1000, (t0 - origin_ms) / 1000 + width, lw=0,
                   alpha=0.55, color=FAULT_COLOURS[index % len(FAULT_COLOURS)],
                   label=None if index in seen else
                   f"faults[{index}]{at} — {'; '.join(spans[index][:3])}"
                   + (" …" if len(spans[index]) > 3 else ""))
        seen.add(index)


#: A latency-over-time window with fewer requests draws no quantile (the p99 of 2 is noise).
MIN_PER_BIN = 5
#: A window's p99 is its own only with this many requests; with fewer it is its maximum.
P99_NEEDS = 100

#: The run plots' time axis: the workload's clock, which a scenario's fault times use.
TIME_AXIS = "s since the workload started (a fault's at_s counts from here)"


def _others(missing: dict[str, list[float]]) -> str:
    return ", ".join(f"{len(ts)} {outcome}" for outcome, ts in sorted(missing.items()))


def latency_cdf(series: list[tuple[str, list[float]]], title: str,
                missing: dict[str, list[float]] | None = None) -> Figure:
    """Completed requests only (a request without a response has no latency); how many
    did not complete is said under the title."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (label, values) in enumerate(series):
        if not values:
            continue
        xs = sorted(values)
        ys = [(k + 1) / len(xs) for k in range(len(xs))]
        ax.step(xs, ys, where="post", color=PALETTE[i % len(PALETTE)], lw=1.8,
                label=f"{label} (n={len(xs)}, p50 {xs[len(xs) // 2]:.0f} ms)")
    drawn = any(values for _, values in series)
    if not drawn:
        _no_data(ax, "no request completed")
        ax.set_xticks([])
    else:
        ax.set_xscale("log")
        _plain_log(ax.xaxis, [v for _, values in series for v in values])
    if missing:
        title += f"\n(completed requests only; not shown: {_others(missing)})"
    ax.set_ylim(0, 1.02)
    for q, name in ((0.5, "p50"), (0.99, "p99")):
        ax.axhline(q, color="#888888", lw=0.6, ls=":")
        ax.text(0.005, q, name, transform=ax.get_yaxis_transform(), fontsize=7,
                color="#666666", va="bottom")
    _style(ax, title, "request latency (ms, log scale)" if drawn else "request latency (ms)",
           "fraction of completed requests")
    _legend(ax, fontsize=8, loc="lower right", frameon=False)
    return fig


def latency_over_time(events: list[dict[str, Any]], title: str) -> Figure:
    """Each completed request at the moment it settled; one answered with an error at its
    latency too (a cross); one that got no response at all along the top, at the moment
    it gave up. Time is the workload's clock, as the scenario's fault times are."""
    origin = workload_origin_ms(events)
    points = [(t - origin, v) for t, v in latencies(events)]
    missing = {k: [t - origin for t in ts] for k, ts in not_completed(events).items()}
    errors = {k: [(t - origin, v) for t, v in tv] for k, tv in answered_otherwise(events).items()}
    fig, ax = plt.subplots(figsize=(9, 4))
    _shade(ax, events, origin)
    if not points:
        _no_data(ax, "no request completed")
    if points:
        span = max(t for t, _ in points) - min(t for t, _ in points)
        # about 12 requests per bin, whole seconds: quantiles of 2 points are noise
        bin_ms = max(1000.0, round(span / max(1, len(points) / 12) / 1000) * 1000)
        ax.scatter([t / 1000 for t, _ in points], [v for _, v in points], s=9, alpha=0.5,
                   color=PALETTE[0], label="a completed request", lw=0)
        bins: dict[int, list[float]] = defaultdict(list)
        for t, v in points:
            bins[int(t // bin_ms)].append(v)
        # every bin from the first to the last: one with too few requests for a quantile
        # (or none) breaks the line, so it neither ends on one request nor ramps over a gap
        xs = list(range(min(bins), max(bins) + 1))
        # a p99 needs 100 requests in its window; of fewer it is the window's largest: said so
        drawn = [len(bins[b]) for b in xs if len(bins.get(b, ())) >= MIN_PER_BIN]
        upper = (0.99, "p99") if drawn and min(drawn) >= P99_NEEDS else (1.0, "max")
        for q, colour, label in ((0.5, PALETTE[1], "p50"), (upper[0], PALETTE[3], upper[1])):
            ys = [sorted(bins[b])[min(len(bins[b]) - 1, int(q * len(bins[b])))]
                  if len(bins.get(b, ())) >= MIN_PER_BIN else float("nan") for b in xs]
            ax.plot([(b + 0.5) * bin_ms / 1000 for b in xs], ys, color=colour, lw=1.8,
                    label=f"{label} per {bin_ms / 1000:g} s (windows of {MIN_PER_BIN}+ requests)")
        ax.set_yscale("log")
        _plain_log(ax.yaxis, [v for _, v in points])
        for i, (outcome, tv) in enumerate(sorted(errors.items())):
            ax.scatter([t / 1000 for t, _ in tv], [v for _, v in tv], marker="x", s=22,
                       lw=1.2, color=PALETTE[(2 + i) % len(PALETTE)],
                       label=f"answered {outcome} ({len(tv)})")
        # no latency to draw: along the top of the frame (axes coordinates), off the scale
        for i, (outcome, ts) in enumerate(sorted(missing.items())):
            ax.scatter([t / 1000 for t in ts], [0.97 - 0.04 * i] * len(ts), marker="v",
                       s=26, lw=0, color=PALETTE[(4 + i) % len(PALETTE)],
                       transform=ax.get_xaxis_transform(), clip_on=False,
                       label=f"{outcome} ({len(ts)}): no response, so no latency; "
                             "when it gave up (along the top)")
        # drawn in the axes' own frame, they do not widen the axis as data does: a request
        # given up after the last completion (in the drain) fell beyond it, over the legend
        gave_up = [t / 1000 for ts in missing.values() for t in ts]
        if gave_up:
            lo, hi = ax.get_xlim()
            ax.set_xlim(lo, max(hi, max(gave_up) + 0.03 * (max(gave_up) - lo)))
    _style(ax, title, f"when the request settled: {TIME_AXIS}",
           "latency (ms, log scale)" if points else "latency (ms)")
    _legend(ax, fontsize=8, loc="upper left", frameon=False, bbox_to_anchor=(1.0, 1.0))
    return fig


def relay_timeline(events: list[dict[str, Any]], title: str, max_streams: int = 8) -> Figure | None:
    """The relayed streams' frames over the workload's clock (those with gaps first, then
    the longest, at most `max_streams`; the legend says how many of how many). A stream
    whose tabs sat on its executor's own node is never relayed and is not drawn: it is
    counted in the title. A stream is a conversation's to one agent, so several tasks stream
    on it one after another: the title counts both (relay_integrity counts the tasks')."""
    origin = workload_origin_ms(events)
    frames: dict[str, list[tuple[float, int]]] = defaultdict(list)
    delivered: dict[str, list[tuple[float, int]]] = defaultdict(list)
    gaps: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    emitted: set[tuple[str, str]] = set()
    streamed: set[tuple[str, str]] = set()        # (task, stream) of the frames relayed
    for e in events:
        if e["kind"] == "relay_frame":
            frames[e["stream"]].append((float(e["tMs"]) - origin, int(e["streamSeq"])))
            streamed.add((str(e.get("taskId")), str(e["stream"])))
        elif e["kind"] == "relay_delivered":
            delivered[e["stream"]].append((float(e["tMs"]) - origin, int(e["streamSeq"])))
        elif e["kind"] == "relay_gap":
            gaps[e["stream"]].append((float(e["tMs"]) - origin, int(e["fromSeq"]),
                                      int(e["toSeq"])))
        elif e["kind"] == "flow_emitted" and e.get("stream"):
            emitted.add((str(e.get("taskId")), str(e["stream"])))
    if not frames:
        return None
    local = len({stream for _task, stream in emitted} - set(frames))
    tasks = len(emitted | streamed)
    chosen = sorted(frames, key=lambda s: (-len(gaps.get(s, [])), -len(frames[s]), s))[:max_streams]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    _shade(ax, events, origin)
    for i, stream in enumerate(sorted(chosen)):
        colour = PALETTE[i % len(PALETTE)]
        f = sorted(frames[stream])
        ax.plot([t / 1000 for t, _ in f], [q for _, q in f], color=colour, lw=1, alpha=0.6)
        d = delivered.get(stream, [])
        ax.scatter([t / 1000 for t, _ in d], [q for _, q in d], s=9, color=colour, lw=0,
                   label=stream)
        for t, lo, hi in gaps.get(stream, []):
            ax.vlines(t / 1000, lo - 0.4, hi + 0.4, color="black", lw=3)
            ax.annotate("gap", (t / 1000, hi + 0.4), fontsize=7, color="black")
    from matplotlib.ticker import MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))   # a seq is a whole number
    shown = (f"{len(chosen)} of {len(frames)} relayed streams" if len(chosen) < len(frames)
             else f"all {len(frames)} relayed streams")
    stayed = f", {local} more stayed on their executor's node" if local else ""
    _style(ax, f"{title} — {shown}{stayed}; {tasks} task streams on them\nline: frames made "
           "on the executor; dots: pushed to a tab; black bars: explicit gaps", TIME_AXIS,
           "seq in stream")
    _legend(ax, fontsize=7, loc="upper left", frameon=False, bbox_to_anchor=(1.0, 1.0),
            title=("streams with gaps first, then the longest" if len(chosen) < len(frames)
                   else None), title_fontsize=7)
    return fig


#: A messages plot shows at most this many nodes (the busiest); the rest are summed up.
MAX_NODES_SHOWN = 30


def message_counts(events: list[dict[str, Any]], title: str) -> Figure:
    sent: dict[str, Counter[str]] = defaultdict(Counter)
    tasks = 0
    for e in events:
        if e["kind"] == "outbound_settled" and e.get("state") == "PUBLISHED":
            sent[e["node"]][e.get("messageType") or "?"] += 1
        elif e["kind"] == "task_executed":
            tasks += 1
    grand_total = sum(sum(c.values()) for c in sent.values())
    nodes = sorted(sent)
    hidden = ""
    if len(nodes) > MAX_NODES_SHOWN:
        busiest = sorted(nodes, key=lambda n: (-sum(sent[n].values()), n))[:MAX_NODES_SHOWN]
        rest = [n for n in nodes if n not in busiest]
        hidden = (f"\n(the {MAX_NODES_SHOWN} busiest nodes; {len(rest)} more published "
                  f"{sum(sum(sent[n].values()) for n in rest)} in all)")
        nodes = sorted(busiest)
    types = sorted({t for c in sent.values() for t in c})
    fig, ax = plt.subplots(figsize=(max(6, 0.42 * len(nodes) + 3), 4))
    if not nodes:
        _no_data(ax, "nothing was published")
    bottom = [0] * len(nodes)
    for i, t in enumerate(types):
        values = [sent[n][t] for n in nodes]
        ax.bar(nodes, values, bottom=bottom, color=PALETTE[i % len(PALETTE)], label=t)
        bottom = [b + v for b, v in zip(bottom, values, strict=False)]
    per_task = f"{grand_total / tasks:.2f} messages per task" if tasks else "no tasks"
    _style(ax, f"{title} — {grand_total} published, {per_task}{hidden}", "node",
           "messages published")
    ax.tick_params(axis="x", labelrotation=45 if len(nodes) > 6 else 0, labelsize=8)
    # the busiest bar does not touch the frame (a zero-height bar stacked on it would pin
    # the axis to its top: matplotlib keeps a bar's base as a sticky edge)
    ax.set_ylim(0, max([*bottom, 1]) * 1.08)
    _legend(ax, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


#: A duplicates plot shows at most this many cells; the rest are counted in its title.
MAX_CELLS_SHOWN = 60


def _hidden_cells(total: int, rest: list[dict[str, Any]]) -> str:
    """What the duplicates plot leaves out (`rest` of `total` cells), counted from what it
    leaves out: it said "the 202 not shown had no duplicate and no seeded defect" where 31 of
    them were seeded defects."""
    with_duplicates = sum(1 for c in rest if c["metrics"]["duplicates_delivered"]
                          or c["metrics"]["duplicates_executed"])
    defects = sum(1 for c in rest if c["cell"]["variant"] != "reference")
    what = ", ".join([*([f"{with_duplicates} with duplicates"] if with_duplicates else []),
                      *([f"{defects} of seeded defects"] if defects else [])]) \
        or "none with a duplicate or a seeded defect"
    return f"({total - len(rest)} of {total} cells; not shown: {len(rest)}, {what})"


def duplicates(cells: list[dict[str, Any]], title: str) -> Figure:
    """Per cell: duplicates that reached a node versus duplicates that ran a task again.
    Every cell is a row (a zero is a finding too: the ledger had nothing to drop); past
    MAX_CELLS_SHOWN, the cells with duplicates or a seeded defect come first and the title
    counts what it leaves out."""
    def telling(c: dict[str, Any]) -> bool:
        return bool(c["metrics"]["duplicates_delivered"] or c["metrics"]["duplicates_executed"]
                    or c["cell"]["variant"] != "reference")
    rows = cells
    if len(cells) > MAX_CELLS_SHOWN:
        ordered = [c for c in cells if telling(c)] + [c for c in cells if not telling(c)]
        rows = ordered[:MAX_CELLS_SHOWN]
        title += "\n" + _hidden_cells(len(cells), ordered[MAX_CELLS_SHOWN:])
    seeds = len({c["cell"]["seed"] for c in rows}) > 1
    labels = [f"{c['cell']['scenario']} · {c['cell']['variant']}"
              + (f" · s{c['cell']['seed']}" if seeds else "")
              + (f" · {substrate(c['cell']['mode']).tag(c['cell'])}"
                 if substrate(c["cell"]["mode"]).wall_clock else "")
              for c in rows]
    delivered = [c["metrics"]["duplicates_delivered"] for c in rows]
    executed = [c["metrics"]["duplicates_executed"] for c in rows]
    fig, ax = plt.subplots(figsize=(8, max(3, 0.32 * len(rows) + 1.2)))
    ys = list(range(len(rows)))
    ax.barh([y - 0.2 for y in ys], delivered, height=0.4, color=PALETTE[0],
            label="duplicates delivered (dropped by ledger or task table)")
    ax.barh([y + 0.2 for y in ys], executed, height=0.4, color=PALETTE[3],
            label="duplicates executed (a task ran again)")
    for y, d, e in zip(ys, delivered, executed, strict=True):   # a zero is a value too
        ax.text(d, y - 0.2, f" {d}", va="center", fontsize=7, color=PALETTE[0])
        ax.text(e, y + 0.2, f" {e}", va="center", fontsize=7, color=PALETTE[3])
    ax.set_yticks(ys, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, max([*delivered, *executed, 1]) * 1.12)   # all zeros: 0..1, not ±0.04
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _style(ax, title, "count", "")
    _legend(ax, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
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
    _plain_log(left.xaxis, [v for _, values, _m in series for v in values])
    _style(left, title, "request latency (ms, log scale)", "fraction of completed requests")
    _legend(left, fontsize=8, frameon=False, loc="lower right")
    right.bar([s[0] for s in series], [s[2] or 0 for s in series],
              color=[PALETTE[i % len(PALETTE)] for i in range(len(series))])
    _style(right, "messages per task", "topology", "")
    right.tick_params(axis="x", labelsize=8)
    return fig


def run_plots(run_dir: Path, events: list[dict[str, Any]]) -> dict[str, dict[str, Path]]:
    """Every run plot for one run folder (its history read once by the caller), into
    <run>/plots/. Returns name -> paths."""
    summary = json.loads((run_dir / "summary.json").read_text())
    label = f"{summary['scenario']} · {summary['variant']} · seed {summary['seed']}"
    folder = run_dir / "plots"
    out = {"latency_cdf": save(latency_cdf([(label, [v for _, v in latencies(events)])],
                                           f"Latency CDF — {label}",
                                           {**not_completed(events), **{
                                               k: [t for t, _ in v] for k, v in
                                               answered_otherwise(events).items()}}),
                               folder, "latency_cdf"),
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
    FALSE where it is a failure, lilac FALSE where the cell expects it (a seeded defect
    caught), amber UNKNOWN; a black frame where the verdict is not what the cell expects."""
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle
    checkers: list[str] = []
    for c in cells:
        checkers += [k for k in c["verdicts"] if k not in checkers]
    code = {"true": 0, "unknown": 1, "false": 2}

    def cell_code(c: dict[str, Any], k: str) -> int:
        if k not in c["verdicts"]:
            return 4      # not its protocol's checker (or a run its broker refused)
        value = code[c["verdicts"][k]]
        return 3 if value == 2 and k not in c["wrong"] else value
    grid = [[cell_code(c, k) for k in checkers] for c in cells]
    fig, ax = plt.subplots(figsize=(0.42 * len(checkers) + 4.5, 0.2 * len(cells) + 1.8))
    ax.imshow(grid, aspect="auto", interpolation="nearest", vmin=0, vmax=4,
              cmap=ListedColormap(["#5cb85c", "#f0ad4e", "#d9534f", "#c5b3e6", "#f2f2f2"]))
    for y, c in enumerate(cells):
        if "refused" in c:
            ax.text(len(checkers) / 2 - 0.5, y, "refused by the broker at its start",
                    ha="center", va="center", fontsize=6.5, color="#666")
        for x, k in enumerate(checkers):
            if k in c["wrong"]:
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, lw=2, ec="black"))
    ax.set_xticks(range(len(checkers)), checkers, rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(len(cells)), [str(c["cell"]["id"]) for c in cells], fontsize=6.5)
    # white lines between the squares: two collections, not a minor tick (a Tick and its
    # label) per row — a 200-row grid's minor ticks were a third of its drawing
    ax.hlines([y - 0.5 for y in range(1, len(cells))], -0.5, len(checkers) - 0.5,
              color="white", lw=0.6, zorder=1.5)
    ax.vlines([x - 0.5 for x in range(1, len(checkers))], -0.5, len(cells) - 0.5,
              color="white", lw=0.6, zorder=1.5)
    ax.set_xlim(-0.5, len(checkers) - 0.5)
    ax.set_ylim(len(cells) - 0.5, -0.5)
    passed = sum(c.get("passed", not c["wrong"]) for c in cells)
    ax.set_title(f"{title} — {passed} of {len(cells)} cells as expected\n(green true, red "
                 "false, lilac false as expected, amber unknown, pale grey not the cell's "
                 "protocol; framed: not as expected)",
                 fontsize=10, loc="left", y=1.0)
    # nothing above the grid and no axis titles: the title and the (empty) axis labels kept
    # where they are, not placed by measuring every tick label again (half of a large
    # grid's drawing)
    ax.xaxis.set_label_coords(0.5, 0.0)
    ax.yaxis.set_label_coords(0.0, 0.5)
    return fig
