"""`a2a-bench load`: the scenario at rising offered load, step by step, until the knee."""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import EXIT_INVALID, EXIT_UNKNOWN, Sub, out_folder
from bench.cli.run import Prepared, deployment_arguments, prepared

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench.load import Ramp, Step, Window

#: Without --max-rate, the ramp's last planned step is this many times its first.
SPAN = 256.0


def add_load(sub: Sub) -> None:
    load = sub.add_parser(
        "load", help="rising offered load in steps until the knee: a table and its curve",
        description="Run SCENARIO again and again, each time at a higher offered request rate "
                    "(every requester together), on the deployment the options describe — the "
                    "reference, your node by --node-command, any broker — until the knee: the "
                    "first step whose p99 latency passes its bound, which loses requests, or "
                    "whose throughput stops following the offered rate. Each step is a whole run, "
                    "judged by every checker (a duplicate under load is a FALSE like any other), "
                    "its figures counted after its warm-up. Writes results/load-<scenario>-<utc>/: "
                    "load.json, report.md with the table, plots/load.png and .svg (offered "
                    "against achieved, p50 and p99), and steps/<n>-<rate>/, each a run folder.",
        epilog="exit codes: 0 every step's verdicts as its scenario expects (the knee is a "
               "measurement, not a failure), 1 a verdict FALSE in some step, 2 a verdict UNKNOWN, "
               "a harness error or an interrupted ramp (Ctrl-C: the steps that ran are kept and "
               "drawn), 3 invalid input\n\n"
               "examples:\n"
               "  a2a-bench load quickstart --broker mosquitto\n"
               "        the reference, live, from the scenario's own rate, doubling, to the knee\n"
               "  a2a-bench load a2a_quickstart --mode live --rates 50,100,200,400 --hold-s 10\n"
               "  a2a-bench load a2a_quickstart --mode live --node-command "
               "\"responder=python my_agent.py\"\n"
               "  a2a-bench load a2a_quickstart --mode sim --topology a2a-busy --start 1\n"
               "        simulated: a responder of capacity 1 refuses what overlaps")
    load.add_argument("scenario", help="scenario file or name (see `a2a-bench list`)")
    deployment_arguments(load)
    ramp = load.add_argument_group("the ramp")
    ramp.add_argument("--rates", metavar="R,R,...",
                      help="the offered rates, requests per second, every requester together, "
                           "in order (default: --start, times --factor, up to --max-rate)")
    ramp.add_argument("--start", type=float, metavar="R",
                      help="the first step's rate (default: the scenario's own: its rate_per_s "
                           "times its requesters)")
    ramp.add_argument("--factor", type=float,
                      help="each step's rate over the one before (default 2)")
    ramp.add_argument("--max-rate", type=float, metavar="R",
                      help=f"the last step's rate at most (default {SPAN:g} × --start)")
    ramp.add_argument("--warmup-s", type=float, default=3.0,
                      help="each step's first seconds, not counted: the deployment starting, "
                           "the directory filling (default 3)")
    ramp.add_argument("--hold-s", type=float, default=10.0,
                      help="each step's measured seconds after its warm-up (default 10)")
    knee = load.add_argument_group("the knee")
    knee.add_argument("--p99-ms", type=float,
                      help="a step whose p99 latency passes this is past the knee (default: 5 × "
                           "the first step's p99)")
    knee.add_argument("--max-loss", type=float, default=0.0,
                      help="a step leaving more than this fraction of its requests without any "
                           "answer is past the knee (default 0: any loss)")
    knee.add_argument("--max-errors", type=float, default=0.02,
                      help="a step whose share of requests answered with an error passes the "
                           "first step's by more than this is past the knee (default 0.02; the "
                           "workload's own failures are the same at every rate)")
    knee.add_argument("--follow", type=float, default=0.9,
                      help="a step whose completions fall below this fraction of the requests "
                           "it sent is past the knee (default 0.9)")
    load.add_argument("--out", type=Path,
                      help="the load folder (default results/load-<scenario>-<utc>)")
    load.add_argument("--json", action="store_true", help="print load.json at the end")
    load.add_argument("--no-plots", action="store_true", help="skip plots/load.png and .svg")
    load.set_defaults(handler=_load)


def _plan(args: argparse.Namespace, first: float) -> list[float] | str:
    """The planned rates, or why the arguments give none."""
    from bench.load import rates
    if args.rates is not None:
        try:
            plan = [float(r) for r in args.rates.split(",")]
        except ValueError:
            return f"--rates={args.rates}: expected rates separated by commas, e.g. 50,100,200"
        if not plan or any(r <= 0 for r in plan):
            return f"--rates={args.rates}: expected rates above 0"
        if any(b <= a for a, b in zip(plan, plan[1:], strict=False)):
            return (f"--rates={args.rates}: expected each rate above the one before (a ramp "
                    "finds the knee rising)")
        ramp = [f for f, v in (("--start", args.start), ("--factor", args.factor),
                               ("--max-rate", args.max_rate)) if v is not None]
        if ramp:
            return (f"{', '.join(ramp)}: given with --rates, which lists every step's rate "
                    "(give one or the other)")
        return plan
    factor = 2.0 if args.factor is None else args.factor
    start = args.start if args.start is not None else first
    if start <= 0:
        return (f"--start: the scenario offers no requests of its own (rate_per_s "
                f"{first:g}); give --start or --rates")
    if factor <= 1:
        return f"--factor={factor:g}: expected a factor above 1"
    most = args.max_rate if args.max_rate is not None else start * SPAN
    if most < start:
        return f"--max-rate={most:g}: expected at least --start ({start:g})"
    return list(rates(start, factor, most))


def _refusal(args: argparse.Namespace, ready: Prepared, plan: list[float]) -> str | None:
    from bench.spec.scenario import MAX_PLANNED_REQUESTS
    if args.warmup_s < 0 or args.hold_s <= 0:
        return (f"--warmup-s={args.warmup_s:g}, --hold-s={args.hold_s:g}: expected a warm-up "
                "of 0 or more and a hold above 0 seconds")
    if not 0 <= args.max_loss < 1 or not 0 <= args.max_errors < 1 or not 0 < args.follow <= 1:
        return (f"--max-loss={args.max_loss:g}, --max-errors={args.max_errors:g}, --follow="
                f"{args.follow:g}: expected loss and error fractions in [0, 1) and a follow "
                "fraction in (0, 1]")
    if args.p99_ms is not None and args.p99_ms <= 0:
        return f"--p99-ms={args.p99_ms:g}: expected a bound above 0"
    scenario = ready.scenario
    if not scenario.topology.orchestrators:
        return f"{scenario.source}: its topology {scenario.topology.name} has no requester"
    step_s = args.warmup_s + args.hold_s
    late = [f for f in scenario.faults if f.at_ms >= step_s * 1000]
    if late:
        return (f"{scenario.source}: faults[{late[0].index}] at {late[0].at_ms / 1000:g} s falls "
                f"after a step's {step_s:g} s (--warmup-s + --hold-s): it would never act")
    most = max(plan) * step_s
    if most > MAX_PLANNED_REQUESTS:
        return (f"--rates: {max(plan):g}/s for {step_s:g} s plans {most:,.0f} requests, more "
                f"than the {MAX_PLANNED_REQUESTS:,} one run can record and judge")
    return None


def _command(args: argparse.Namespace, ready: Prepared, plan: list[float]) -> str:
    """The command that runs this ramp again, every choice spelled out."""
    argv = ["a2a-bench", "load", str(ready.scenario.source), "--mode", str(ready.mode),
            "--seed", str(ready.scenario.seed)]
    for flag in ("topology", "broker", "broker_restart_command", "broker_ca", "nodes", "mqtt"):
        if getattr(args, flag) is not None:
            argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    for flag in ("no_isolation", "wire_tap"):
        if getattr(args, flag):
            argv.append(f"--{flag.replace('_', '-')}")
    for given in args.node_command:
        argv += ["--node-command", given]
    for given in args.node_image:
        argv += ["--node-image", given]
    if args.variant != "reference":
        argv += ["--variant", args.variant]
    argv += ["--rates", ",".join(f"{r:g}" for r in plan), "--warmup-s", f"{args.warmup_s:g}",
             "--hold-s", f"{args.hold_s:g}", "--max-loss", f"{args.max_loss:g}",
             "--max-errors", f"{args.max_errors:g}",
             "--follow", f"{args.follow:g}"]
    if args.p99_ms is not None:
        argv += ["--p99-ms", f"{args.p99_ms:g}"]
    return shlex.join(argv)


def _load(args: argparse.Namespace) -> int:
    from bench.load import Bounds, Ramp, Window, ramp
    ready = prepared(args)
    if isinstance(ready, int):
        return ready
    scenario = ready.scenario
    requesters = len(scenario.topology.orchestrators)
    plan = _plan(args, scenario.workload.rate_per_s * requesters)
    why = plan if isinstance(plan, str) else _refusal(args, ready, plan)
    if why is not None or isinstance(plan, str):
        print(f"a2a-bench: {why}", file=sys.stderr)
        return EXIT_INVALID
    out = out_folder(args.out, f"load-{scenario.name}")
    if out is None:
        return EXIT_INVALID
    where = f"{ready.mode}{ready.described.header(scenario, ready.options)}"
    window = Window(args.warmup_s * 1000, args.hold_s * 1000)
    bounds = Bounds(args.p99_ms, args.max_loss, args.max_errors, args.follow)
    state = Ramp(str(scenario.source), f"{scenario.topology.name} ({len(scenario.topology.nodes)} "
                 f"nodes, {requesters} requester(s)), variant {ready.chosen.name}, seed "
                 f"{scenario.seed}, {where}", bounds, window, plan)
    command = _command(args, ready, plan)
    say = (lambda line: None) if args.json else print
    say(f"a2a-bench load {scenario.source}: {state.deployment}")
    say(f"  steps {', '.join(f'{r:g}' for r in plan)} requests/s (every requester together), "
        f"each {args.warmup_s:g} s warm-up + {args.hold_s:g} s measured; past the knee: p99 "
        f"above {f'{args.p99_ms:g} ms' if args.p99_ms else '5 × the first step'}, loss above "
        f"{args.max_loss:.0%}, errors {args.max_errors:.0%} above the first step's, achieved "
        f"below {args.follow:.0%} of sent")
    say(f"  {'step':>4} {'offered/s':>9} {'sent':>6} {'achieved/s':>10} {'errors':>6} "
        f"{'lost':>5} {'p50 ms':>7} {'p99 ms':>7} {'wall s':>6}  verdicts")

    def terminated(_signum: int, _frame: object) -> None:
        from bench.run import Interrupted
        raise Interrupted("SIGTERM")
    signal.signal(signal.SIGTERM, terminated)
    code = EXIT_UNKNOWN
    try:
        ramp(plan, lambda step: _step(step, ready, window, out, args.json), state,
             shown=lambda step: _show(step, say))
        code = state.exit_code
    except _Stopped as exc:
        state.interrupted = exc.args[0]
        print(f"a2a-bench: {exc.args[0]}; the steps that ran are in {out}", file=sys.stderr)
        code = exc.code
    finally:
        _write(state, out, command, args.no_plots)
    knee = state.knee
    if knee is None:
        said = (f"not reached up to {state.steps[-1].rate_per_s:g} requests/s"
                if state.steps and not state.interrupted else "not reached")
    else:
        below = knee["last_before_per_s"]
        said = (f"between {below:g} and {knee['first_past_per_s']:g} requests/s" if below
                is not None else f"at or below the first step ({knee['first_past_per_s']:g}/s)")
        said += f": {'; '.join(knee['why'])}"
    if args.json:
        print(json.dumps(state.to_json(), indent=2))
    else:
        print(f"  knee: {said}")
        print(f"  again: {command}")
        print(f"  results: {out}/ (report.md, load.json"
              + ("" if args.no_plots else ", plots/load.png") + ")")
    return code


class _Stopped(Exception):
    """The ramp cannot go on: said in one line (args[0]), with the exit code it ends with."""

    def __init__(self, why: str, code: int) -> None:
        super().__init__(why)
        self.code = code


def _step(step: Step, ready: Prepared, window: Window, out: Path, quiet: bool) -> Step:
    """Run one step: the scenario at the step's rate for the warm-up and the hold."""
    from bench.load import figures, rate_label
    from bench.report.progress import Status
    from bench.run import Interrupted, run_scenario
    from bench.substrates import BrokerRefused, EnvironmentFailure
    from bench.substrates.live.brokers import BrokerError
    s = ready.scenario
    per_requester = step.rate_per_s / len(s.topology.orchestrators)
    scenario = dataclasses.replace(
        s, duration_ms=window.warmup_ms + window.hold_ms,
        workload=dataclasses.replace(s.workload, rate_per_s=per_requester))
    run_dir = out / "steps" / f"{step.index:02d}-{rate_label(step.rate_per_s)}"
    step.run_dir = str(run_dir.relative_to(out))
    status = Status(sys.stderr, ready.described.clock_word) \
        if sys.stderr.isatty() and not quiet else None
    t0 = time.monotonic()
    try:
        try:
            result = run_scenario(scenario, ready.chosen, run_dir, mode=ready.mode,
                                  options=ready.options, progress=status.tick if status else None,
                                  observe=status.observe if status else None)
        finally:
            if status:
                status.close()
    except Interrupted as exc:
        step.interrupted, step.exit_code = True, EXIT_UNKNOWN
        step.wall_s = time.monotonic() - t0
        if (run_dir / "history.jsonl").exists():
            step.figures = figures(run_dir / "history.jsonl", window)
        raise _Stopped(f"interrupted ({exc.how}) in step {step.index} "
                       f"({step.rate_per_s:g}/s)", EXIT_UNKNOWN) from None
    except KeyboardInterrupt:
        step.interrupted = True
        raise _Stopped(f"interrupted before step {step.index} began", EXIT_UNKNOWN) from None
    except BrokerRefused as exc:
        step.interrupted = True
        raise _Stopped(f"broker {ready.options.shown_broker}: {exc}", EXIT_INVALID) from None
    except (BrokerError, EnvironmentFailure) as exc:
        step.interrupted = True
        raise _Stopped(f"step {step.index} ({step.rate_per_s:g}/s): {exc}", EXIT_UNKNOWN) \
            from None
    step.wall_s = time.monotonic() - t0
    step.figures = figures(run_dir / "history.jsonl", window)
    step.exit_code = result.exit_code
    from bench.checks import as_expected
    expect = result.summary["expect"]
    for v in result.verdicts:
        value = v.value.value
        step.verdicts[v.name] = value
        want = expect.get(v.name, "true")
        if not as_expected(value, want):
            step.unexpected.append(f"{v.name} {value.upper()} (expected {want})")
    return step


def _show(step: Step, say: Callable[[str], None]) -> None:
    f = step.figures
    verdicts = "interrupted" if step.interrupted else (
        "; ".join(step.unexpected) if step.unexpected else "as expected")
    if f is None:
        say(f"  {step.index:>4} {step.rate_per_s:>9g} {'':>6} {'':>10} {'':>6} {'':>5} {'':>7} "
            f"{'':>7} {step.wall_s:>6.1f}  {verdicts}")
        return

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}" if v >= 10 else f"{v:.1f}"
    say(f"  {step.index:>4} {step.rate_per_s:>9g} {f.sent:>6} {f.achieved_per_s:>10,.1f} "
        f"{f.errors:>6} {f.lost:>5} {ms(f.p50_ms):>7} {ms(f.p99_ms):>7} {step.wall_s:>6.1f}  "
        f"{verdicts}")
    if step.knee:
        say(f"       past the knee: {'; '.join(step.knee)}")


def _write(state: Ramp, out: Path, command: str, no_plots: bool) -> None:
    """load.json and report.md, then the plot: what ran is never lost to a drawing."""
    from bench.load import markdown, plot
    out.mkdir(parents=True, exist_ok=True)
    (out / "load.json").write_text(json.dumps(state.to_json(), indent=2) + "\n")
    (out / "report.md").write_text(markdown(state, command))
    if no_plots:
        return
    from bench.report.plots import save
    try:
        save(plot(state, f"{Path(state.scenario).stem} under rising load", state.deployment),
             out / "plots", "load")
    except Exception as exc:   # a plot must never cost the ramp its table
        print(f"a2a-bench: the plot failed ({exc!r}); load.json and report.md are in {out}",
              file=sys.stderr)
