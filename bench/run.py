"""One run of one scenario: build the deployment on a substrate, feed it the workload,
let the nemesis act, record the history, judge it, and write `results/<run-id>/`.

The history is streamed to disk as it is recorded; verdicts, metrics and the report are
written after. Nothing here decides protocol behaviour: that is the core's.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

from bench.checks import (
    Value,
    Verdict,
    as_expected,
    fault_firings,
    folds,
    interrupted_at_s,
    judge,
    not_applicable,
    workload_origin_ms,
)
from bench.checks.coverage import reached
from bench.core.events import (
    DirectoryUpdated,
    FaultStart,
    HarnessError,
    RunFinished,
    RunInterrupted,
)
from bench.faults import CATALOGUE
from bench.history import History, Line, Recorder, cut_tail, tail_lines
from bench.loop import Progress, run_loop
from bench.metrics import FOLDS as METRIC_FOLDS
from bench.metrics import Metrics, compute
from bench.report.markdown import render
from bench.report.summary import Summary
from bench.spec.scenario import Mode, Scenario
from bench.spec.topology import MqttVersion
from bench.substrates import Choice, Options, open_deployment, substrate
from bench.variants import Variant
from bench.workload import plan

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3


class Interrupted(KeyboardInterrupt):
    """The run was stopped from outside (Ctrl-C, SIGTERM). `run_scenario` keeps and judges
    what was recorded, then raises this with the result (a KeyboardInterrupt still: a
    caller such as pytest stops as it would on Ctrl-C)."""

    def __init__(self, how: str = "Ctrl-C", result: RunResult | None = None) -> None:
        super().__init__(how)
        self.how = how
        self.result = result


def _how(exc: BaseException) -> str:
    return exc.how if isinstance(exc, Interrupted) else "Ctrl-C"


@contextlib.contextmanager
def _held(hold: bool) -> Iterator[None]:
    """While an interrupted run stops its nodes and writes its folder, a second Ctrl-C
    must not cut that short (the clean-up has its own timeouts)."""
    if not hold or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class RunResult:
    out_dir: Path
    verdicts: list[Verdict]
    metrics: Metrics
    summary: Summary

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts, self.summary["expect"])


def exit_code(verdicts: list[Verdict], expect: dict[str, str]) -> int:
    """0 every verdict as expected (true unless the scenario says otherwise), 1 some
    verdict contradicts its expectation, 2 some verdict is unknown."""
    worst = EXIT_OK
    for v in verdicts:
        wanted = expect.get(v.name, "true")
        if as_expected(v.value.value, wanted):
            continue
        if v.value is Value.UNKNOWN:
            worst = max(worst, EXIT_UNKNOWN) if worst != EXIT_FALSE else worst
        else:
            worst = EXIT_FALSE
    return worst


def replay_command(scenario: Scenario, variant: Variant, topology_overridden: bool,
                   mode: Mode, options: Options) -> str:
    argv = ["a2a-bench", "run", scenario.source, "--mode", mode.value, "--seed", str(scenario.seed),
            *substrate(mode).replay(scenario, options)]
    if topology_overridden:
        argv += ["--topology", scenario.topology.source]
    if scenario.mqtt is not MqttVersion.V311:
        argv += ["--mqtt", scenario.mqtt.value]
    for given in options.node_commands:
        argv += ["--node-command", given]
    for given in options.node_images:
        argv += ["--node-image", given]
    if options.wire_tap:
        argv += ["--wire-tap"]
    if variant.name != "reference":
        argv += ["--variant", variant.name]
    return shlex.join(argv)


def execute(scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path, mode: Mode,
            options: Options, progress: Progress | None = None,
            say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Deploy the scenario on `mode`'s substrate and drive it through the one run loop."""
    options = replace(options, link_faults=any(CATALOGUE[f.kind].on_link(f.params)
                                               for f in scenario.faults))
    dep = open_deployment(mode, scenario, variant, recorder, workdir, options, say)
    interrupted = False
    try:   # from here on, whatever happens, everything the deployment started is stopped
        dep.start()
        ops = plan(scenario.topology, scenario.workload, scenario.seed, scenario.duration_ms)
        stats = run_loop(dep, ops, scenario.faults, duration_ms=scenario.duration_ms,
                         drain_ms=scenario.drain_ms, progress=progress)
    except KeyboardInterrupt as exc:   # stopped from outside: said once, then everything stops
        interrupted = True
        dep.record("bench", RunInterrupted(_how(exc), scenario.duration_ms))
        raise
    except Exception as exc:   # the history says why it ends here, then the caller is told
        dep.record("bench", HarnessError(f"the run stopped: {exc!r}"[:300], {
            "where": traceback.format_exc(limit=6)[-1500:]}))
        raise
    finally:
        with _held(interrupted):
            closing = dep.close()
    stats |= closing
    rest = {k: v for k, v in stats.items() if k not in ("simulated_ms", "operations")}
    dep.record("bench", RunFinished(stats["simulated_ms"], stats["operations"], rest))
    return stats


#: The lines a judging pass keeps no copy of: a global directory's announcements, N² of
#: them, which only folds read (`History.read`).
STREAMED = (DirectoryUpdated,)


def read_for_judging(path: Path, lines: Iterable[str] | None = None) -> History:
    """A stored history as the checkers and the metrics read it: every line through the
    folds, those of a streamed kind kept by nothing else (`lines`: the file's lines as
    another reader takes them, `tail_lines`)."""
    return History.read(path, folds=(*folds(), *METRIC_FOLDS), streamed=STREAMED,
                        lines=lines)


#: How many lines a run writes before a second process starts judging it beside the run:
#: below, judging after the run (some 40,000 lines a second) costs less than that process's
#: start (a second of imports), and the cells of a matrix keep their cores to themselves.
JUDGE_ASIDE_AFTER = 100_000


class JudgeAside:
    """Judging a long run on a core it leaves spare: a second process reads the history as
    the run writes it (`tail_lines`), folding and keeping its lines as `read_for_judging`
    would, and once the run has closed it and sent the summary, judges it as `judge_run`
    does — the same files, the same result, the run's wall time and judging's overlapped.
    If that process fails, the run is judged after it, as without one (said in one line).

    The process is a fresh interpreter that imports the bench and nothing else (not a
    multiprocessing spawn, which imports the parent's `__main__` again: a user's script
    calling `run_scenario` without a `__main__` guard ran its whole run a second time in
    it), with the parent's import path, talking over a pipe. It ignores a Ctrl-C (the run's
    to handle: it stops the process) and stays in the run's process group, so that a kill
    of the group reaches it too."""

    def __init__(self, out_dir: Path, duration_ms: float, say: Callable[[str], None]) -> None:
        self.out_dir = out_dir
        self.duration_ms = duration_ms
        self.say = say
        self.process: subprocess.Popen[bytes] | None = None
        self.conn: Any = None

    def start(self) -> None:
        # the parent's import path, as it is (its script's folder or the working directory
        # included, named), and no other: `-P` keeps the child's working directory off it
        path = os.pathsep.join(p or os.getcwd() for p in sys.path)
        theirs = None
        try:
            self.conn, theirs = multiprocessing.Pipe()
            fd = theirs.fileno()
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-c", "import signal; signal.signal(signal.SIGINT, "
                 "signal.SIG_IGN); import sys; from bench.run import judge_aside_main; "
                 "judge_aside_main(sys.argv[1:])", str(self.out_dir), repr(self.duration_ms),
                 str(fd)], pass_fds=(fd,), stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONPATH=path))
        except OSError as exc:     # no process to be had (a limit): judged after the run
            self.say(f"judging beside the run could not start ({exc}); judging it after")
            self.process = None
            if self.conn is not None:
                self.conn.close()
        finally:
            if theirs is not None:
                theirs.close()

    def finish(self, summary: dict[str, Any]) -> RunResult | None:
        """The judged run, once the history is closed; None: judge it after the run."""
        if self.process is None:
            return None
        try:
            self.conn.send(summary)
            how, got = self.conn.recv()
        except (EOFError, OSError) as exc:
            how, got = "failed", f"its process ended ({exc!r})"
        finally:
            self.stop()
        if how == "judged":
            return cast(RunResult, got)
        self.say(f"judging beside the run failed: {got}; judging it after the run")
        return None

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.conn.close()
        self.process = None


def judge_aside_main(argv: list[str]) -> None:
    """`JudgeAside`'s process: OUT_DIR DURATION_MS FD (its end of the pipe)."""
    from multiprocessing.connection import Connection
    judge_aside(argv[0], float(argv[1]), Connection(int(argv[2])))


def judge_aside(out_dir: str, duration_ms: float, conn: Any) -> None:
    """`JudgeAside`'s process: the history read as it is written, then judged."""
    summary: list[dict[str, Any]] = []

    def written(wait_s: float) -> bool:
        if conn.poll(wait_s):
            summary.append(conn.recv())   # sent once the run has closed the history
            return True
        return False
    try:
        path = Path(out_dir) / "history.jsonl"
        history = read_for_judging(path, tail_lines(path, written))
        conn.send(("judged", judge_run(Path(out_dir), summary[0], duration_ms, history)))
    except Exception as exc:   # said by the run, which judges again after itself
        with contextlib.suppress(OSError):   # the run is gone (killed): nobody to tell
            conn.send(("failed", f"{exc!r}"[:300]))


def spare_core() -> bool:
    """A core for a second process: more than one core, and this process not a daemonic pool
    worker (its pool has the cores already)."""
    return len(os.sched_getaffinity(0)) > 1 and not multiprocessing.current_process().daemon


def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=2, sort_keys=False) + "\n")


def run_scenario(scenario: Scenario, variant: Variant, out_dir: Path, *,
                 topology_overridden: bool = False, mode: Mode | str | None = None,
                 options: Options | None = None, progress: Progress | None = None,
                 say: Callable[[str], None] = lambda line: None,
                 observe: Callable[[Line], None] | None = None,
                 judge_aside_after: int = JUDGE_ASIDE_AFTER) -> RunResult:
    """Run `scenario` into `out_dir` and judge it; `judge_aside_after` lines into the run,
    where a core is spare, a second process begins judging it (`JudgeAside`; 0: never)."""
    mode = Mode(mode) if mode else scenario.mode
    described = substrate(mode)
    options = options or described.prepare(scenario, Choice())[1]
    out_dir.mkdir(parents=True, exist_ok=True)
    where = described.identity(scenario, options)
    resolved = scenario.to_json() | {"variant": variant.name, "mode": mode.value}
    if described.wall_clock:
        resolved |= {"broker": where.broker, "nodes": where.nodes}
    write_json(out_dir / "scenario.json", resolved)
    write_json(out_dir / "topology.json", scenario.topology.to_json())
    recorder = Recorder(out_dir / "history.jsonl", flush_after_s=described.history_flush_s)
    if observe is not None:
        recorder.observers.append(observe)
    wall0 = time.perf_counter()
    summary = {"scenario": scenario.name, "variant": variant.name, "seed": scenario.seed,
               "topology": scenario.topology.name, "mode": mode.value,
               "mqtt": scenario.mqtt.value, "broker": where.broker, "nodes": where.nodes, "model": where.model,
               "expect": described.expect(scenario, options),
               "replay": replay_command(scenario, variant, topology_overridden, mode, options)}
    aside = JudgeAside(out_dir, scenario.duration_ms, say)
    if judge_aside_after > 0 and spare_core():
        recorder.when(judge_aside_after, aside.start)
    try:
        try:
            stats = execute(scenario, variant, recorder, out_dir, mode, options, progress, say)
        except KeyboardInterrupt as exc:
            aside.stop()
            recorder.close()   # everything recorded up to the interruption is on disk
            with _held(True):
                history = read_for_judging(out_dir / "history.jsonl")
                summary |= _timing(history.end_ms, time.perf_counter() - wall0,
                                   history.count) | {
                    "interrupted": {"at_s": interrupted_at_s(history),
                                    "planned_s": scenario.duration_ms / 1000,
                                    "how": _how(exc)}}
                result = judge_run(out_dir, summary, scenario.duration_ms, history)
            raise Interrupted(_how(exc), result) from None
        finally:
            recorder.close()  # whatever happened, the history recorded so far is on disk
        summary |= _timing(stats["simulated_ms"], time.perf_counter() - wall0,
                           recorder.count) | {"stats": stats}
        judged = aside.finish(summary)
    finally:
        aside.stop()
    return judged or judge_run(out_dir, summary, scenario.duration_ms)


def _timing(run_ms: float, wall: float, events: int) -> dict[str, Any]:
    run_s = run_ms / 1000
    return {"simulated_s": run_s, "wall_s": wall,
            "sim_s_per_wall_s": run_s / wall if wall > 0 else float("inf"), "events": events}


def _on_the_workload_clock(history: History, faults: list[dict[str, Any]]
                           ) -> list[dict[str, Any]]:
    """The fault table of report.md in the scenario's terms: when each fault was scheduled
    (its at_s) and when it was journaled, both in seconds since the workload started."""
    origin = workload_origin_ms(history)
    starts = {e.fault_index: e for e in history.of(FaultStart)}
    return [f | {"at_s": starts[f["index"]].at_ms / 1000,
                 "journaled_s": (starts[f["index"]].t_ms - origin) / 1000}
            if f["index"] in starts else f for f in faults]


def judge_run(out_dir: Path, summary: dict[str, Any], duration_ms: float,
              history: History | None = None) -> RunResult:
    history = history or read_for_judging(out_dir / "history.jsonl")
    verdicts = judge(history)
    metrics = compute(history, duration_ms)
    faults = fault_firings(history)
    summary = summary | {"expect": summary["expect"] | not_applicable(history, verdicts)}
    summary = summary | {"exit_code": exit_code(verdicts, summary["expect"]),
                         "situations": {k: n for k, n in reached(history).items() if n}}
    write_json(out_dir / "verdicts.json", {"verdicts": [v.to_json() for v in verdicts],
                                           "faults": faults})
    write_json(out_dir / "metrics.json", metrics)
    write_json(out_dir / "summary.json", summary)
    # built up as the run went (where, then how long, then how it was judged): whole now
    whole = cast(Summary, summary)
    (out_dir / "report.md").write_text(render(whole, verdicts, metrics,
                                              _on_the_workload_clock(history, faults)))
    return RunResult(out_dir, verdicts, metrics, whole)


def rejudge(out_dir: Path) -> RunResult:
    """`a2a-bench check`: judge a stored history again (checkers may have changed). A run
    killed outright (no summary, no run_finished, perhaps a last line cut mid-write) is
    judged on the lines it completed, as an interrupted run."""
    scenario = json.loads((out_dir / "scenario.json").read_text())
    duration_ms = float(scenario["duration_s"]) * 1000
    history = read_for_judging(out_dir / "history.jsonl")
    path = out_dir / "summary.json"
    summary: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
        "scenario": scenario.get("name", "?"), "variant": scenario.get("variant", "?"),
        "seed": scenario.get("seed"), "topology": scenario.get("topology", "?"),
        "mode": scenario.get("mode", "?"), "broker": scenario.get("broker", "sim"),
        "nodes": scenario.get("nodes", "sim"), "expect": scenario.get("expect", {}),
        "replay": ""} | _timing(history.end_ms, 0.0, history.count)
    cut = cut_tail(out_dir / "history.jsonl")
    if not history.of(RunFinished) and not history.of(RunInterrupted):
        how = "killed: the history ends without run_finished" + \
            (f", its last line cut after {cut} bytes" if cut else "")
        history = history.plus(RunInterrupted(
            how, duration_ms, seq=history.count + 1, t_ms=history.end_ms, node="bench"))
        summary |= _timing(history.end_ms, 0.0, history.count - 1) | {
            "interrupted": {"at_s": interrupted_at_s(history), "planned_s": duration_ms / 1000,
                            "how": how}}
    return judge_run(out_dir, summary, duration_ms, history)


def print_progress(stream: Any = None) -> Callable[[float, float], None]:
    """Progress lines at most every 2 wall seconds on long runs, to `stream` (None: the
    sys.stderr of the moment each line is written, not of when this module was imported —
    a run embedded in pytest wrote to a capture that test had closed, and died of it once a
    loaded machine made the run last 2 s: 2026-12-08)."""
    state = {"last": time.perf_counter(), "start": time.perf_counter()}

    def show(t_ms: float, end_ms: float) -> None:
        now = time.perf_counter()
        if now - state["last"] >= 2.0 or (t_ms >= end_ms and now - state["start"] >= 2.0):
            state["last"] = now
            rate = (t_ms / 1000) / max(now - state["start"], 1e-9)
            print(f"  simulated {t_ms / 1000:7.1f} / {end_ms / 1000:.1f} s "
                  f"({rate:.1f} sim-s per wall-s)", file=stream or sys.stderr, flush=True)
    return show
