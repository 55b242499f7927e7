"""`a2a-bench load`: a step's figures from its history, the knee's three criteria, the ramp
that stops at it, and the command end to end in simulation (a responder of capacity 1 loses
requests as the offered rate rises: a knee the simulator finds the same way every time)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import EXIT_FALSE, EXIT_INVALID, EXIT_OK, EXIT_UNKNOWN, main
from bench.history import dumps_line
from bench.load import Bounds, Figures, Ramp, Step, Window, figures, past_the_knee, ramp, rates


def _history(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(dumps_line({"seq": i + 1, "node": "n", **line}) + "\n"
                            for i, line in enumerate(lines)))
    return path


def _sent(t: float, rid: str) -> dict[str, object]:
    return {"tMs": t, "kind": "request_sent", "requestId": rid}


def _settled(t: float, rid: str, outcome: str, latency: float) -> dict[str, object]:
    return {"tMs": t, "kind": "request_settled", "requestId": rid, "outcome": outcome,
            "latencyMs": latency}


def test_a_steps_figures_count_only_what_was_sent_in_its_window(tmp_path: Path) -> None:
    """Clock from workload_started (at 500 ms here); warm-up 1 s, hold 2 s: requests sent at
    workload 1.0–3.0 s count, whenever they end; completions count by when they came."""
    h = _history(tmp_path / "h.jsonl", [
        {"tMs": 500.0, "kind": "workload_started"},
        _sent(900.0, "warm"), _settled(1600.0, "warm", "COMPLETED", 700),    # sent in warm-up
        _sent(1500.0, "a"), _settled(1510.0, "a", "COMPLETED", 10),          # workload 1.0 s
        _sent(2000.0, "b"), _settled(2040.0, "b", "COMPLETED", 40),
        _sent(2500.0, "c"), _settled(2600.0, "c", "FAILED", 100),
        _sent(3400.0, "d"),                                                  # never settled
        _sent(3499.0, "e"), _settled(4000.0, "e", "COMPLETED", 501),         # ends after the hold
        _sent(3500.0, "late"), _settled(3501.0, "late", "COMPLETED", 1),     # workload 3.0 s
    ])
    f = figures(h, Window(1000, 2000))
    assert (f.sent, f.completed, f.errors, f.lost) == (5, 3, 1, 1)
    assert f.outcomes == {"COMPLETED": 3, "FAILED": 1, "UNSETTLED": 1}
    # completions inside the window: warm (1.1 s), a, b; not e (3.5 s) nor late (3.001 s)
    assert f.completions == 3 and f.achieved_per_s == 1.5 and f.offered_per_s == 2.5
    assert (f.p50_ms, f.p99_ms) == (40, 501)


def _f(sent: int = 100, completed: int = 100, completions: int = 100,
       p99: float | None = 20.0, errors: int = 0) -> Figures:
    lost = sent - completed - errors
    return Figures(sent, completed, completions, errors, lost,
                   {"COMPLETED": completed} | ({"FAILED": errors} if errors else {})
                   | ({"NO_RESPONSE": lost} if lost else {}), 10.0, p99, 10.0)


def test_each_criterion_alone_puts_a_step_past_the_knee() -> None:
    bounds = Bounds()
    assert past_the_knee(_f(), bounds, 100.0) == []
    assert past_the_knee(_f(p99=101.0), bounds, 100.0) == ["p99 101 ms > 100 ms"]
    assert past_the_knee(_f(completed=99, completions=99), bounds, 100.0) == [
        "loss: 1 of 100 requests never answered (1 NO_RESPONSE)"]
    # error answers: only beyond the first step's share, and its tolerance
    assert past_the_knee(_f(completed=97, completions=97, errors=3), bounds, 100.0,
                         error_floor=0.01) == []
    assert past_the_knee(_f(completed=96, completions=96, errors=4), bounds, 100.0,
                         error_floor=0.01) == [
        "errors: 4 of 100 requests answered with an error (4 FAILED; the first step 1.0%)"]
    assert past_the_knee(_f(completions=89), bounds, 100.0) == [
        "achieved 8.9/s < 90% of the 10.0/s sent"]
    # each bound where the user put it
    assert past_the_knee(_f(completed=99, completions=89), Bounds(max_loss=0.05, follow=0.8),
                         None) == []
    assert past_the_knee(_f(completed=90, completions=90, errors=10), Bounds(max_errors=0.1),
                         None) == []
    # a low rate may send nothing in a window: that step says nothing, past nor before
    assert past_the_knee(_f(sent=0, completed=0, completions=0, p99=None), bounds, 1.0) == []


def test_the_p99_bound_is_the_users_or_five_times_the_first_steps() -> None:
    assert Bounds(p99_ms=250).p99_bound(10.0) == 250
    assert Bounds().p99_bound(30.0) == 150
    assert Bounds().p99_bound(None) is None


def test_the_ramp_stops_at_the_first_step_past_the_knee_and_keeps_it() -> None:
    seen: list[float] = []

    def run(step: Step) -> Step:
        seen.append(step.rate_per_s)
        step.figures = _f(p99=20.0 if step.rate_per_s < 40 else 500.0)
        return step
    r = ramp(rates(10, 2, 1000), run, Ramp("s", "d", Bounds(), Window(0, 10_000), []))
    assert seen == [10, 20, 40]
    assert r.p99_bound_ms == 100.0
    assert r.knee == {"first_past_per_s": 40, "last_before_per_s": 20,
                      "why": ["p99 500 ms > 100 ms"]}
    assert r.exit_code == EXIT_OK


def test_a_geometric_plan_ends_at_its_top_rate() -> None:
    assert list(rates(25, 2, 200)) == [25, 50, 100, 200]
    assert list(rates(1, 1.5, 5)) == [1, 1.5, 2.25, 3.375]


def test_load_finds_the_knee_of_a_responder_of_capacity_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """a2a-busy: one task at a time, the rest refused (-32004). At 1 request/s nothing
    overlaps in the window; at 2 some do, and the step loses them."""
    out = tmp_path / "load"
    assert main(["load", "a2a_quickstart", "--mode", "sim", "--topology", "a2a-busy",
                 "--start", "1", "--warmup-s", "2", "--hold-s", "10", "--out", str(out)]) \
        == EXIT_OK
    text = capsys.readouterr().out
    assert "knee: between 1 and 2 requests/s: errors: 2 of 19 requests answered with an error " \
        "(2 FAILED; the first step 0.0%)" in text
    assert "again: a2a-bench load scenarios/a2a_quickstart.toml --mode sim --seed 1 " \
        "--topology a2a-busy --rates 1,2,4,8,16,32,64,128,256" in text
    saved = json.loads((out / "load.json").read_text())
    assert [s["rate_per_s"] for s in saved["steps"]] == [1, 2]
    assert saved["knee"]["first_past_per_s"] == 2
    step = out / saved["steps"][1]["run_dir"]
    assert json.loads((step / "summary.json").read_text())["stats"]   # a whole run folder
    assert saved["steps"][1]["verdicts"]["duplicate_execution"] == "true"
    assert (out / "plots" / "load.png").stat().st_size > 10_000
    assert "| 2 | 2 | 19 | 1.7 | 17 | 2 | 0 |" in (out / "report.md").read_text()


def test_a_false_verdict_in_any_step_is_exit_1_and_named_in_its_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "quickstart", "--mode", "sim", "--variant", "reply_to_from_agent",
                 "--rates", "2,4", "--warmup-s", "1", "--hold-s", "3", "--no-plots",
                 "--out", str(tmp_path / "l")]) == EXIT_FALSE
    assert "reply_routing FALSE (expected true)" in capsys.readouterr().out


def test_an_interrupted_ramp_keeps_the_steps_that_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C in the second step: one line, exit 2, and load.json holds both steps."""
    import bench.run
    real = bench.run.run_scenario
    calls = []

    def second_interrupted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 2:
            raise bench.run.Interrupted("Ctrl-C")
        return real(*args, **kwargs)   # type: ignore[arg-type]
    monkeypatch.setattr(bench.run, "run_scenario", second_interrupted)
    out = tmp_path / "l"
    assert main(["load", "a2a_quickstart", "--mode", "sim", "--rates", "2,4,8",
                 "--warmup-s", "1", "--hold-s", "2", "--out", str(out)]) == EXIT_UNKNOWN
    err = capsys.readouterr().err
    assert f"a2a-bench: interrupted (Ctrl-C) in step 2 (4/s); the steps that ran are in {out}" \
        in err
    saved = json.loads((out / "load.json").read_text())
    assert [s["interrupted"] for s in saved["steps"]] == [False, True]
    assert saved["interrupted"].startswith("interrupted (Ctrl-C)")
    assert (out / "plots" / "load.png").exists()


@pytest.mark.parametrize(("argv", "said"), [
    (["--rates", "10,x"], "--rates=10,x: expected rates separated by commas"),
    (["--rates", "10,0"], "--rates=10,0: expected rates above 0"),
    # a ramp is rising, and --rates lists it whole: the others were ignored (2026-12-07)
    (["--rates", "20,10"], "--rates=20,10: expected each rate above the one before"),
    (["--rates", "10,20", "--factor", "3", "--max-rate", "40"],
     "--factor, --max-rate: given with --rates, which lists every step's rate"),
    (["--factor", "1"], "--factor=1: expected a factor above 1"),
    (["--start", "10", "--max-rate", "5"], "--max-rate=5: expected at least --start (10)"),
    (["--hold-s", "0"], "expected a warm-up of 0 or more and a hold above 0 seconds"),
    (["--follow", "0"], "expected loss and error fractions in [0, 1) and a follow fraction"),
    (["--max-errors", "1"], "expected loss and error fractions in [0, 1)"),
    (["--p99-ms", "-1"], "--p99-ms=-1: expected a bound above 0"),
    (["--rates", "200000"], "more than the 2,000,000 one run can record and judge"),
])
def test_bad_load_arguments_are_one_line_exit_3(
        argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "a2a_quickstart", "--mode", "sim", "--out", str(tmp_path / "l"),
                 *argv]) == EXIT_INVALID
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "l").exists()


def test_a_fault_a_step_never_reaches_is_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "restart", "--mode", "sim", "--hold-s", "2", "--warmup-s", "1",
                 "--out", str(tmp_path / "l")]) == EXIT_INVALID
    assert "falls after a step's 3 s (--warmup-s + --hold-s): it would never act" in \
        capsys.readouterr().err


def test_every_example_of_load_help_is_accepted() -> None:
    """Each example in `a2a-bench load --help` loads, deploys as said and plans a ramp: the
    a2a scenarios are simulated by their own mode key, so the live ones must say --mode."""
    import shlex

    from bench.cli import build_parser
    from bench.cli.load import _plan, _refusal
    from bench.cli.run import prepared
    parsers = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    text = parsers["load"].epilog
    examples = [line.strip() for line in text.splitlines()
                if line.strip().startswith("a2a-bench load ")]
    assert len(examples) >= 4
    for example in examples:
        args = build_parser().parse_args(shlex.split(example)[1:])
        ready = prepared(args)
        assert not isinstance(ready, int), example
        plan = _plan(args, ready.scenario.workload.rate_per_s)
        assert isinstance(plan, list) and _refusal(args, ready, plan) is None, example
        assert ("--node-command" not in example and "--rates" not in example) \
            or ready.mode == "live", example
