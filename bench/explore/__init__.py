"""`a2a-bench explore`: search instead of fixed scenarios, then shrink (DESIGN §12).

Random scenarios (`bench.explore.draw`) run in simulation, N at a time, until one gives a
verdict FALSE that its expectations do not call for, or the budget (runs or minutes) is
spent. The failing scenario is then shrunk (`bench.explore.shrink`) while the same checker
still fails, and the smallest one is written as `minimal.toml` and
`minimal-topology.toml` with the command that replays it. Everything is seeded: the same
`--seed` draws the same scenarios in the same order.

An UNKNOWN verdict is not a failure here — a drawn scenario often leaves a subject
unexercised — but each run's verdicts are kept in explore.json.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomli_w

from bench.checks import EITHER
from bench.explore.draw import Draft, draw
from bench.explore.shrink import candidates
from bench.spec.distribution import SpecError, rng_for

#: Shrinking stops after this many candidate runs even if it could go on.
MAX_SHRINK_RUNS = 300
#: A drafted run still going after this many wall seconds is a harness failure (a hang
#: in the simulator is a bench bug explore found, not a reason to wait forever).
TRIAL_WALL_S = 180


class _Hung(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Hung(f"the simulated run was still going after {TRIAL_WALL_S} s of wall time")


@dataclass(frozen=True, slots=True)
class Trial:
    """One drafted scenario run in simulation."""

    index: int
    folder: str
    failing: tuple[str, ...]          # checkers FALSE against expectation; "harness": it broke
    verdicts: dict[str, str]
    wall_s: float
    invalid: str = ""                 # the draft did not load (a shrink step too far)
    situations: tuple[str, ...] = ()  # the catalogued situations this run reached


@dataclass
class Exploration:
    runs: list[Trial] = field(default_factory=list)
    found: Trial | None = None
    others: list[Trial] = field(default_factory=list)
    shrink_steps: list[dict[str, Any]] = field(default_factory=list)
    minimal: Path | None = None
    drawn: Draft | None = None
    shrunk: Draft | None = None
    elapsed_s: float = 0.0
    found_after_s: float | None = None    # from the start to the first failing scenario


def write_draft(d: Draft, folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    scenario = dict(d.scenario, name=name, topology=f"{name}-topology.toml")
    (folder / f"{name}-topology.toml").write_text(tomli_w.dumps(d.topology))
    path = folder / f"{name}.toml"
    path.write_text(tomli_w.dumps(scenario))
    return path


def trial(index: int, d: Draft, folder: Path, variant_name: str) -> Trial:
    """Write the draft, load it as any scenario is loaded, run it in sim and judge it."""
    from bench.checks import judging
    from bench.run import run_scenario
    from bench.spec.scenario import load_scenario
    from bench.variants import variant

    start = time.perf_counter()
    path = write_draft(d, folder, "scenario")
    try:
        scenario = load_scenario(path, known_checks=judging())
    except SpecError as exc:
        return Trial(index, str(folder), (), {}, 0.0, invalid=str(exc))
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TRIAL_WALL_S)
    try:
        result = run_scenario(scenario, variant(variant_name), folder / "run", mode="sim")
    except Exception as exc:   # a bench bug, found by exploring: reported, not hidden
        return Trial(index, str(folder), ("harness",), {"harness": repr(exc)[:300]},
                     time.perf_counter() - start)
    finally:
        signal.alarm(0)
    verdicts = {v.name: v.value.value for v in result.verdicts}
    expect = result.summary["expect"]
    failing = tuple(name for name, value in verdicts.items()
                    if value == "false" and expect.get(name, "true") not in ("false", EITHER))
    return Trial(index, str(folder), failing, verdicts, time.perf_counter() - start,
                 situations=tuple(result.summary.get("situations", {})))


def _drafts(seed: int) -> Iterator[tuple[int, Draft]]:
    i = 0
    while True:
        i += 1
        yield i, draw(rng_for(seed, f"explore/{i}"), f"explore-{seed}-{i}")


def explore(*, variant: str, seed: int, runs: int | None, minutes: float | None, jobs: int,
            out: Path, keep_going: bool = False,
            say: Callable[[str], None] = lambda line: None,
            drafts: Iterator[tuple[int, Draft]] | None = None,
            tx: list[str] | None = None) -> Exploration:
    """Run drafts (by default drawn from `seed`) until one fails, or `runs` drafts or
    `minutes` are spent (or `drafts` runs out), then shrink the first failure. With `tx`
    (execnet gateway specs) the trials run on those hosts, one per gateway at a time."""
    found = Exploration()
    t0 = time.perf_counter()
    deadline = t0 + minutes * 60 if minutes is not None else float("inf")
    budget = runs if runs is not None else 10**9
    last_say = t0
    drafts = _drafts(seed) if drafts is None else drafts
    pending: dict[Future[Trial], Draft] = {}
    failures: list[tuple[Trial, Draft]] = []
    if tx:
        from bench.explore.hosts import GatewayPool, gateways
        jobs = len(gateways(tx))
    with GatewayPool(tx) if tx else ProcessPoolExecutor(max_workers=jobs) as pool:
        submitted = 0
        while True:
            stop = (bool(failures) and not keep_going) or submitted >= budget \
                or time.perf_counter() >= deadline
            while not stop and len(pending) < jobs:
                nxt = next(drafts, None)
                if nxt is None:
                    budget = submitted
                    break
                i, d = nxt
                folder = out / "runs" / f"{i:05d}"
                pending[pool.submit(trial, i, d, folder, variant)] = d
                submitted += 1
                stop = submitted >= budget
            if not pending:
                break
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: f.result().index):
                d = pending.pop(fut)
                t = fut.result()
                found.runs.append(t)
                if t.failing:
                    failures.append((t, d))
                    if found.found_after_s is None:
                        found.found_after_s = time.perf_counter() - t0
                    say(f"run {t.index}: {', '.join(t.failing)} FALSE ({t.folder})")
                else:
                    shutil.rmtree(t.folder, ignore_errors=True)   # keep what failed only
            now = time.perf_counter()
            if now - last_say >= 5:
                last_say = now
                n = len(found.runs)
                say(f"explored {n} scenarios in {now - t0:.0f} s "
                    f"({n / (now - t0) * 60:.0f}/min), {len(failures)} failing")
        found.elapsed_s = time.perf_counter() - t0
        # the lowest-numbered failure, whatever finished first: the same seed finds the same
        failures.sort(key=lambda f: f[0].index)
        found.others = [t for t, _ in failures[1:]]
        if failures:
            found.found, found.drawn = failures[0]
            checker = found.found.failing[0]
            found.shrunk = _shrink(pool, found, found.drawn, checker, variant, jobs, out, say)
            found.minimal = write_draft(found.shrunk, out, "minimal")
    return found


def _shrink(pool: Any, found: Exploration, d: Draft, checker: str,
            variant: str, jobs: int, out: Path, say: Callable[[str], None]) -> Draft:
    """Greedy: try the candidates in order, `jobs` at a time; take the first (in order)
    that still fails with `checker`, and start over from it."""
    tried = 0
    while tried < MAX_SHRINK_RUNS:
        better: tuple[str, Draft] | None = None
        options = candidates(d)
        while better is None and tried < MAX_SHRINK_RUNS:
            batch = [c for _, c in zip(range(jobs), options, strict=False)]
            if not batch:
                break
            futures = [pool.submit(trial, 10**6 + tried + k, cand, out / "shrink" / f"{tried + k:04d}",
                                   variant) for k, (_what, cand) in enumerate(batch)]
            tried += len(batch)
            for (what, cand), fut in zip(batch, futures, strict=True):
                t = fut.result()
                keeps = checker in t.failing
                found.shrink_steps.append({"step": what, "fails": keeps,
                                           "invalid": t.invalid or None})
                if keeps and better is None:
                    better = (what, cand)
                shutil.rmtree(t.folder, ignore_errors=True)
        if better is None:
            break
        say(f"shrunk: {better[0]}")
        d = better[1]
    shutil.rmtree(out / "shrink", ignore_errors=True)
    return d


def situations_reached(e: Exploration) -> dict[str, int]:
    """Every catalogued situation -> how many drafted runs reached it (zero included)."""
    from bench.checks.coverage import SITUATIONS
    return {s.name: sum(s.name in t.situations for t in e.runs) for s in SITUATIONS}


def to_json(e: Exploration, *, variant: str, seed: int, jobs: int) -> dict[str, Any]:
    n = len(e.runs)
    return {"variant": variant, "seed": seed, "jobs": jobs, "scenarios": n,
            "elapsed_s": round(e.elapsed_s, 1),
            "per_minute": round(n / e.elapsed_s * 60, 1) if e.elapsed_s else None,
            "found": None if e.found is None else {
                "run": e.found.index, "folder": e.found.folder, "failing": list(e.found.failing),
                "after_s": round(e.found_after_s or 0.0, 1),
                "drawn_size": e.drawn.size() if e.drawn else None,
                "shrunk_size": e.shrunk.size() if e.shrunk else None,
                "minimal": str(e.minimal) if e.minimal else None},
            "situations": situations_reached(e),
            "also_failing": [{"run": t.index, "failing": list(t.failing), "folder": t.folder}
                             for t in e.others],
            "shrink_steps": e.shrink_steps,
            "runs": [{"run": t.index, "failing": list(t.failing), "verdicts": t.verdicts,
                      "wall_s": round(t.wall_s, 2), **({"invalid": t.invalid} if t.invalid else {})}
                     for t in e.runs]}


def write_report(e: Exploration, out: Path, **how: Any) -> tuple[Path, dict[str, Any]]:
    """OUT/explore.json, and what it holds."""
    report = to_json(e, **how)
    path = out / "explore.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    return path, report
