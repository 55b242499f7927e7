"""Offered load in steps until the knee: `a2a-bench load`.

Each step is one run of the scenario at an offered request rate (every requester together),
on whatever deployment the bench was told to make — the reference, anyone's node by
`--node-command`, any broker — recorded and judged like any run: a duplicate under load is a
FALSE like any other. A step's figures count only its steady part: the requests sent after
its warm-up (the deployment starting, the directory filling) and before its end; what they
came to is read from the step's history, so every protocol's requester is measured alike.

The ramp stops at the knee, the first step where one of these holds:
- p99 latency passes the bound (given, or `FLOOR_FACTOR` times the first step's p99: the
  deployment unloaded);
- loss begins: more of the step's requests than `max_loss` of them got no answer at all;
- errors rise: the share answered with an error (a refusal past a responder's capacity, a
  timeout) passes the first step's by more than `max_errors` (a workload's own failures, the
  same at every rate, are no knee);
- throughput stops following the offered rate: completions in the window fall below
  `follow` of the requests sent in it.

Jepsen's and locust's shape: a plan printed first, a line per step as it ends, the curve
drawn at the end (offered against achieved, p50 and p99, losses marked), JSON beside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.core.outcome import EventKind
from bench.core.vocabulary import ANSWERED_WITH_AN_ERROR
from bench.history import read_jsonl
from bench.metrics import exact_quantiles

#: Without a bound of its own, the knee's p99 is this many times the first step's.
FLOOR_FACTOR = 5.0
COMPLETED = "COMPLETED"


@dataclass(frozen=True, slots=True)
class Bounds:
    """Where a step is past the knee (see the module's docstring)."""

    p99_ms: float | None = None
    max_loss: float = 0.0
    max_errors: float = 0.02
    follow: float = 0.9

    def p99_bound(self, floor_p99_ms: float | None) -> float | None:
        """The p99 a step may reach: the given bound, else FLOOR_FACTOR × the first step's."""
        if self.p99_ms is not None:
            return self.p99_ms
        return None if floor_p99_ms is None else FLOOR_FACTOR * max(floor_p99_ms, 1.0)


@dataclass(frozen=True, slots=True)
class Window:
    """A step's steady part, on its workload's clock (ms from workload_started)."""

    warmup_ms: float
    hold_ms: float

    def holds(self, t_ms: float) -> bool:
        return self.warmup_ms <= t_ms < self.warmup_ms + self.hold_ms


@dataclass(frozen=True, slots=True)
class Figures:
    """What one step's requests came to, inside its window."""

    sent: int                     # requests sent in the window
    completed: int                # of them, completed (whenever)
    completions: int              # requests completed in the window (whenever sent)
    errors: int                   # of them, answered with an error
    lost: int                     # of them, never answered (no response, undeliverable, ...)
    outcomes: dict[str, int]      # how the window's requests ended ("UNSETTLED": not at all)
    p50_ms: float | None          # latency of the window's completed requests
    p99_ms: float | None
    hold_s: float

    @property
    def error_share(self) -> float:
        return self.errors / self.sent if self.sent else 0.0

    @property
    def offered_per_s(self) -> float:
        return self.sent / self.hold_s

    @property
    def achieved_per_s(self) -> float:
        return self.completions / self.hold_s


def figures(history: Path, window: Window) -> Figures:
    """A step's figures from its history: requests by their `request_sent` (the requester's
    own record, whatever its protocol), their end by `request_settled`."""
    origin: float | None = None
    sent_at: dict[str, float] = {}
    ended: dict[str, tuple[str, float, float]] = {}    # request -> (outcome, at, latency)
    for line in read_jsonl(history):
        kind = line["kind"]
        if kind == EventKind.WORKLOAD_STARTED.value and origin is None:
            origin = float(line["tMs"])
        elif kind == EventKind.REQUEST_SENT.value:
            sent_at.setdefault(line["requestId"], float(line["tMs"]))
        elif kind == EventKind.REQUEST_SETTLED.value:
            ended.setdefault(line["requestId"], (str(line["outcome"]), float(line["tMs"]),
                                                 float(line.get("latencyMs") or 0)))
    zero = origin or 0.0
    mine = [rid for rid, t in sent_at.items() if window.holds(t - zero)]
    outcomes = Counter(ended[rid][0] if rid in ended else "UNSETTLED" for rid in mine)
    latencies = [ended[rid][2] for rid in mine if rid in ended and ended[rid][0] == COMPLETED]
    q = exact_quantiles(latencies)
    errors = sum(n for o, n in outcomes.items() if o in ANSWERED_WITH_AN_ERROR)
    return Figures(sent=len(mine), completed=outcomes[COMPLETED],
                   completions=sum(1 for outcome, at, _l in ended.values()
                                   if outcome == COMPLETED and window.holds(at - zero)),
                   errors=errors, lost=len(mine) - outcomes[COMPLETED] - errors,
                   outcomes=dict(sorted(outcomes.items())),
                   p50_ms=q["p50"], p99_ms=q["p99"], hold_s=window.hold_ms / 1000)


def past_the_knee(f: Figures, bounds: Bounds, p99_bound_ms: float | None,
                  error_floor: float = 0.0) -> list[str]:
    """Why a step is past the knee, one phrase per reason; empty: it is not. `error_floor`:
    the first step's share of error answers."""
    if f.sent == 0:
        return []     # nothing sent in the window (a low rate's draws): the step says nothing
    why = []
    if p99_bound_ms is not None and f.p99_ms is not None and f.p99_ms > p99_bound_ms:
        why.append(f"p99 {f.p99_ms:,.0f} ms > {p99_bound_ms:,.0f} ms")
    if f.lost > bounds.max_loss * f.sent:
        how = ", ".join(f"{n} {o}" for o, n in f.outcomes.items()
                        if o != COMPLETED and o not in ANSWERED_WITH_AN_ERROR)
        why.append(f"loss: {f.lost} of {f.sent} requests never answered ({how})")
    if f.error_share > error_floor + bounds.max_errors:
        how = ", ".join(f"{n} {o}" for o, n in f.outcomes.items() if o in ANSWERED_WITH_AN_ERROR)
        why.append(f"errors: {f.errors} of {f.sent} requests answered with an error ({how}; "
                   f"the first step {error_floor:.1%})")
    if f.completions < bounds.follow * f.sent:
        why.append(f"achieved {f.achieved_per_s:,.1f}/s < {bounds.follow:.0%} of the "
                   f"{f.offered_per_s:,.1f}/s sent")
    return why


def rates(start: float, factor: float, most: float) -> Iterator[float]:
    """A geometric ramp: start, start × factor, ... up to `most` (included when reached
    within a rounding)."""
    r = start
    while r <= most * (1 + 1e-9):
        yield r
        r *= factor


@dataclass(slots=True)
class Step:
    """One step of the ramp: what was asked, what came of it, how it was judged."""

    index: int
    rate_per_s: float             # the offered rate asked for (every requester together)
    run_dir: str
    figures: Figures | None = None
    verdicts: dict[str, str] = field(default_factory=dict)     # name -> value
    unexpected: list[str] = field(default_factory=list)       # "name VALUE (expected X)"
    exit_code: int = 0
    wall_s: float = 0.0
    knee: list[str] = field(default_factory=list)             # why past the knee
    interrupted: bool = False

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.figures is not None:
            out["figures"] |= {"offered_per_s": self.figures.offered_per_s,
                               "achieved_per_s": self.figures.achieved_per_s}
        return out


@dataclass(slots=True)
class Ramp:
    """The whole load run, as load.json keeps it."""

    scenario: str
    deployment: str
    bounds: Bounds
    window: Window
    planned: list[float]
    steps: list[Step] = field(default_factory=list)
    p99_bound_ms: float | None = None
    error_floor: float | None = None
    interrupted: str | None = None

    @property
    def knee(self) -> dict[str, Any] | None:
        """The first step past the knee and the last before it; None: not reached."""
        bad = next((s for s in self.steps if s.knee and not s.interrupted), None)
        if bad is None:
            return None
        good = [s for s in self.steps if s.index < bad.index and not s.knee]
        return {"first_past_per_s": bad.rate_per_s, "why": bad.knee,
                "last_before_per_s": good[-1].rate_per_s if good else None}

    @property
    def exit_code(self) -> int:
        """1 some step's verdict contradicts its scenario; else 2 one is unknown or the ramp
        was interrupted; else 0. The knee is a measurement, not a failure."""
        codes = {s.exit_code for s in self.steps}
        if 1 in codes:
            return 1
        return 2 if codes - {0} or self.interrupted else 0

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "deployment": self.deployment,
                "bounds": asdict(self.bounds), "window": asdict(self.window),
                "planned_per_s": self.planned, "p99_bound_ms": self.p99_bound_ms,
                "error_floor": self.error_floor,
                "knee": self.knee, "interrupted": self.interrupted,
                "steps": [s.to_json() for s in self.steps]}


def ramp(plan: Iterable[float], run_step: Callable[[Step], object], state: Ramp,
         shown: Callable[[Step], None] = lambda step: None) -> Ramp:
    """Run each planned rate in turn until a step is past the knee (that step is kept: it
    is the knee's evidence). `run_step` runs one and fills in its figures and verdicts; a
    step it cannot finish it marks `interrupted` and raises out of here, the step kept."""
    for i, rate in enumerate(plan):
        step = Step(i + 1, rate, "")
        try:
            run_step(step)
        finally:     # a step stopped half-way is kept too, marked so
            state.steps.append(step)
        measured = step.figures is not None and step.figures.sent > 0
        if state.p99_bound_ms is None and measured and step.figures is not None:
            state.p99_bound_ms = state.bounds.p99_bound(step.figures.p99_ms)
        if state.error_floor is None and measured and step.figures is not None:
            state.error_floor = step.figures.error_share
        if step.figures is not None:
            step.knee = past_the_knee(step.figures, state.bounds, state.p99_bound_ms,
                                      state.error_floor or 0.0)
        shown(step)
        if step.knee:
            break
    return state


def rate_label(rate: float) -> str:
    """A rate as a folder name part: 50, 12.5, 0.25."""
    return f"{rate:g}".replace(".", "_")


def table_lines(r: Ramp) -> list[str]:
    """The table, one Markdown row per step."""
    rows = ["| step | offered/s | sent | achieved/s | completed | errors | lost | p50 ms | "
            "p99 ms | verdicts | past the knee |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for s in r.steps:
        f = s.figures
        verdicts = "interrupted" if s.interrupted else (
            "; ".join(s.unexpected) if s.unexpected else "as expected")
        if f is None:
            rows.append(f"| {s.index} | {s.rate_per_s:g} | | | | | | | | {verdicts} | |")
            continue
        rows.append(f"| {s.index} | {s.rate_per_s:g} | {f.sent} | {f.achieved_per_s:,.1f} | "
                    f"{f.completed} | {f.errors} | {f.lost} | {_ms(f.p50_ms)} | {_ms(f.p99_ms)} | "
                    f"{verdicts} | {'; '.join(s.knee)} |")
    return rows


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def markdown(r: Ramp, command: str) -> str:
    knee = r.knee
    said = ("**not reached** up to " f"{r.steps[-1].rate_per_s:g} requests/s" if r.steps
            else "not reached: no step ran") if knee is None else (
        f"between **{knee['last_before_per_s']:g}** and **{knee['first_past_per_s']:g}** "
        "requests/s" if knee["last_before_per_s"] is not None else
        f"at or below the first step, **{knee['first_past_per_s']:g}** requests/s") + \
        f" ({'; '.join(knee['why'])})" * (knee is not None)
    bound = "none yet" if r.p99_bound_ms is None else f"{r.p99_bound_ms:,.0f} ms"
    lines = [f"# Load: {r.scenario}", "", f"{r.deployment}", "", f"    {command}", "",
             f"Each step {r.window.warmup_ms / 1000:g} s of warm-up, then "
             f"{r.window.hold_ms / 1000:g} s measured. Past the knee: p99 above {bound}, "
             f"more than {r.bounds.max_loss:.0%} of a step's requests never answered, error "
             f"answers {r.bounds.max_errors:.0%} above "
             f"the first step's share, or achieved below {r.bounds.follow:.0%} of sent.", "",
             f"The knee: {said}.", ""]
    if r.interrupted:
        lines += [f"Interrupted ({r.interrupted}): the table holds the steps that ran.", ""]
    return "\n".join([*lines, *table_lines(r), "", "![load](plots/load.png)", ""])


def plot(r: Ramp, title: str, subtitle: str = "") -> Any:
    """Offered against achieved (the ideal dashed), and p50/p99 on a log axis beneath it;
    a step that lost requests is marked red, the knee shaded."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.report.plots import PALETTE, _legend, _no_data, _plain_log, _style
    done = [s for s in r.steps if s.figures is not None and s.figures.sent]
    fig, (top, low) = plt.subplots(2, 1, figsize=(7, 6.4), sharex=True,
                                   gridspec_kw={"height_ratios": [1, 1]})
    if not done:
        _no_data(top, "no step sent a request in its window")
        _style(top, title, "", "requests/s")
        return fig
    xs = [s.figures.offered_per_s for s in done if s.figures]
    figs = [s.figures for s in done if s.figures]
    top.plot(xs, xs, ls="--", color="#999999", lw=1, label="achieved = offered")
    top.plot(xs, [f.achieved_per_s for f in figs], "o-", color=PALETTE[0], lw=1.8,
             label="achieved (completed per s)")
    lossy = [(x, f) for x, f in zip(xs, figs, strict=True) if f.lost or f.errors]
    if lossy:
        top.scatter([x for x, _ in lossy], [f.achieved_per_s for _, f in lossy], s=80,
                    facecolors="none", edgecolors="#cc2222", lw=1.6, zorder=5,
                    label="requests lost or answered with an error")
        for x, f in lossy:
            said = ", ".join(p for p in (
                f"{f.lost} lost" * bool(f.lost),
                f"{f.errors} error{'s' * (f.errors != 1)}" * bool(f.errors)) if p)
            top.annotate(said, (x, f.achieved_per_s), textcoords="offset points",
                         xytext=(6, -12), fontsize=8, color="#cc2222")
    for ax in (top, low):
        ax.set_xscale("log")
        _plain_log(ax.xaxis, xs)
    top.set_yscale("log")
    _plain_log(top.yaxis, xs + [f.achieved_per_s for f in figs if f.achieved_per_s > 0])
    _style(top, title, "", "requests/s")
    if subtitle:
        import textwrap
        top.set_title("\n".join([title, *textwrap.wrap(subtitle, 90)]), fontsize=9.5,
                      loc="left")
    for name, colour in (("p50", PALETTE[1]), ("p99", PALETTE[3])):
        pts = [(x, v) for x, f in zip(xs, figs, strict=True)
               if (v := f.p50_ms if name == "p50" else f.p99_ms) is not None]
        if pts:
            low.plot([x for x, _ in pts], [y for _, y in pts], "o-", color=colour, lw=1.8,
                     label=f"{name} latency")
    ys = [v for f in figs for v in (f.p50_ms, f.p99_ms) if v]
    if r.p99_bound_ms is not None:
        low.axhline(r.p99_bound_ms, color="#cc2222", lw=0.9, ls=":",
                    label=f"p99 bound {r.p99_bound_ms:,.0f} ms")
        ys.append(r.p99_bound_ms)
    if ys:
        low.set_yscale("log")
        _plain_log(low.yaxis, ys)
    knee = r.knee
    if knee is not None:
        past = next(s for s in done if s.rate_per_s == knee["first_past_per_s"]) \
            if any(s.rate_per_s == knee["first_past_per_s"] for s in done) else None
        if past is not None and past.figures is not None:
            for ax in (top, low):
                ax.axvline(past.figures.offered_per_s, color="#cc2222", lw=6, alpha=0.15)
            top.annotate("knee", (past.figures.offered_per_s, 1.0),
                         xycoords=("data", "axes fraction"), xytext=(4, -12),
                         textcoords="offset points", fontsize=9, color="#cc2222")
    _style(low, "", "offered load (requests sent per s, log scale)", "latency (ms, log scale)")
    _legend(top, fontsize=8, loc="upper left", frameon=False)
    _legend(low, fontsize=8, loc="best", frameon=False)
    fig.tight_layout()
    return fig
