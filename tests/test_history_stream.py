"""Judging streams: a history read for judging keeps no line of a streamed kind (a global
directory's announcements, N² of them) and answers for those only through folds, which
give the same facts as the same fold run over the history in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.checks import judge
from bench.checks.coverage import reached
from bench.core.events import DirectoryUpdated, NodeStarted, RunInterrupted
from bench.history import Fold, History, Line, tail_lines
from bench.metrics import DirectoryFill, compute
from bench.protocols.seed.rules.directory import Directories
from bench.run import (
    STREAMED,
    Interrupted,
    JudgeAside,
    RunResult,
    read_for_judging,
    run_scenario,
    spare_core,
)
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import variant as variant_by_name
from tests.helpers import run_lines


def _judged(h: History) -> tuple[object, ...]:
    return ([v.to_json() for v in judge(h)], compute(h, 10_000), reached(h))


@pytest.mark.parametrize(("scenario", "variant"), [
    ("directory_wipe", "reference"),       # clears, announcements again
    ("partition", "reference"),            # wills of a silenced node (metrics)
    ("unknown_agent", "reference"),        # UNDELIVERABLE
    ("stale_roster", "stale_roster"),      # a directory rule FALSE
])
def test_a_streamed_history_is_judged_as_the_whole_one(tmp_path: Path, scenario: str,
                                                      variant: str) -> None:
    run_lines(tmp_path, scenario, variant)
    path = tmp_path / "history.jsonl"
    streamed, whole = read_for_judging(path), History.read(path)
    assert whole.of(DirectoryUpdated), "the run announced nothing: nothing streamed"
    assert not any(isinstance(e, DirectoryUpdated) for e in streamed.events)
    assert (streamed.count, streamed.end_ms) == (len(whole.events), whole.end_ms)
    assert json.dumps(_judged(streamed)) == json.dumps(_judged(whole))


def test_a_streamed_kind_is_refused_by_name_and_a_fold_read_late_too(tmp_path: Path) -> None:
    """A reader that is not a fold would judge an empty list: it is told instead."""
    run_lines(tmp_path, "quickstart")
    h = History.read(tmp_path / "history.jsonl", folds=(Directories,), streamed=STREAMED)
    with pytest.raises(LookupError, match="directory_updated lines were streamed"):
        h.of(DirectoryUpdated)
    with pytest.raises(LookupError, match="directory_updated"):
        h.fold(DirectoryFill)
    assert h.fold(Directories).last_online


def test_a_fold_sees_its_kinds_in_line_order_either_way(tmp_path: Path) -> None:
    class Order(Fold):
        kinds = (NodeStarted, DirectoryUpdated)

        def __init__(self) -> None:
            self.seqs: list[int] = []

        def step(self, e: object) -> None:
            assert isinstance(e, (NodeStarted, DirectoryUpdated))
            self.seqs.append(e.seq)

    run_lines(tmp_path, "restart")
    path = tmp_path / "history.jsonl"
    read = History.read(path, folds=(Order,), streamed=STREAMED).fold(Order).seqs
    assert read == History.read(path).fold(Order).seqs == sorted(read)


def test_an_interruption_appended_keeps_what_was_streamed(tmp_path: Path) -> None:
    run_lines(tmp_path, "quickstart")
    h = read_for_judging(tmp_path / "history.jsonl")
    more = h.plus(RunInterrupted("killed", 1000.0, seq=h.count + 1, t_ms=h.end_ms, node="bench"))
    assert more.count == h.count + 1 and more.of(RunInterrupted)
    assert more.fold(Directories) is h.fold(Directories)
    with pytest.raises(ValueError, match="cannot take a directory_updated"):
        h.plus(DirectoryUpdated("x", True, [], 1, seq=h.count + 1, t_ms=h.end_ms, node="n"))


# -- judging beside the run ----------------------------------------------------------------------
def _run(out: Path, scenario: str, variant: str = "reference", **kw: Any) -> RunResult:
    return run_scenario(load_scenario(SCENARIOS / f"{scenario}.toml"), variant_by_name(variant),
                        out, mode="sim", **kw)


def _files(out: Path) -> dict[str, str]:
    got = {name: (out / name).read_text() for name in ("verdicts.json", "metrics.json")}
    summary = json.loads((out / "summary.json").read_text())
    for timed in ("wall_s", "sim_s_per_wall_s"):
        summary.pop(timed)
    return got | {"summary": json.dumps(summary)}


#: a test of judging beside the run, which is done only where a core is spare
needs_a_spare_core = pytest.mark.skipif(not spare_core(), reason="one core: no judging beside")


@needs_a_spare_core
@pytest.mark.parametrize(("scenario", "variant"), [
    ("partition", "reference"), ("stale_roster", "stale_roster")])
def test_a_run_judged_beside_itself_is_judged_as_after_itself(tmp_path: Path, scenario: str,
                                                               variant: str) -> None:
    """The second process starts at the run's first line, reads the history as it is written
    and judges it: the same verdicts (a FALSE among them), metrics and summary."""
    said: list[str] = []
    aside = _run(tmp_path / "aside", scenario, variant, judge_aside_after=1, say=said.append)
    after = _run(tmp_path / "after", scenario, variant, judge_aside_after=0)
    assert not said, said
    assert _files(tmp_path / "aside") == _files(tmp_path / "after")
    assert [v.to_json() for v in aside.verdicts] == [v.to_json() for v in after.verdicts]
    assert aside.metrics == after.metrics and aside.exit_code == after.exit_code
    assert (tmp_path / "aside" / "report.md").read_text().count("\n") > 20


def test_a_judge_aside_that_fails_is_said_and_the_run_judged_after_itself(
        tmp_path: Path) -> None:
    said: list[str] = []
    aside = JudgeAside(tmp_path / "nowhere", 1000.0, said.append)
    aside.start()     # no history there: its process fails at once
    assert aside.finish({"expect": {}}) is None
    assert len(said) == 1 and "judging beside the run failed" in said[0] \
        and "FileNotFoundError" in said[0], said
    assert aside.process is None


def test_a_run_interrupted_while_judged_beside_itself_is_judged_after_itself(
        tmp_path: Path) -> None:
    """Ctrl-C mid-run: the second process is stopped; what was recorded is judged."""
    started: list[JudgeAside] = []
    real = JudgeAside.start

    def start(self: JudgeAside) -> None:
        real(self)
        started.append(self)

    def stop_at(line: Line) -> None:
        if line.seq == 400:
            raise KeyboardInterrupt
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(JudgeAside, "start", start)
        with pytest.raises(Interrupted) as caught:
            _run(tmp_path, "partition", judge_aside_after=10, observe=stop_at)
    assert started and started[0].process is None, "its process was left running"
    result = caught.value.result
    assert result is not None and result.summary["interrupted"]["how"] == "Ctrl-C"
    assert json.loads((tmp_path / "summary.json").read_text())["interrupted"]


def test_tail_lines_gives_each_line_once_it_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":')
    written = iter([b'2}\n\xff{"c"', b':3}\n', None])
    got: list[str] = []

    def more(wait_s: float) -> bool:
        chunk = next(written)
        if chunk is None:
            return True
        with open(path, "ab") as fh:
            fh.write(chunk)
        return False
    got = list(tail_lines(path, more, 0.0))
    assert got == ['{"a":1}\n', '{"b":2}\n', '\ufffd{"c":3}\n']
    with open(path, encoding="utf-8", errors="replace") as fh:
        assert got == list(fh)


def test_a_judge_aside_that_cannot_start_is_said_and_the_run_judged_after_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(11, "Resource temporarily unavailable")
    monkeypatch.setattr("bench.run.subprocess.Popen", refuse)
    said: list[str] = []
    result = _run(tmp_path, "quickstart", judge_aside_after=1, say=said.append)
    assert len(said) == 1 and "could not start" in said[0], said
    assert result.exit_code == 0 and (tmp_path / "verdicts.json").exists()


def test_a_judge_aside_whose_run_is_gone_ends_quietly(tmp_path: Path) -> None:
    """The run killed outright: its end of the pipe closes; the judging process ends, with
    no traceback of a pipe nobody reads."""
    (tmp_path / "history.jsonl").write_text("")
    aside = JudgeAside(tmp_path, 1000.0, lambda _line: None)
    aside.start()
    assert aside.process is not None
    aside.conn.close()           # as the kernel closes it when the run dies
    assert aside.process.wait(60) == 0


UNGUARDED = """
import sys
from pathlib import Path

from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import variant

out = Path(sys.argv[1])
with open(out / "ran.txt", "a") as fh:
    fh.write("ran\\n")
said = []
run_scenario(load_scenario(SCENARIOS / "quickstart.toml"), variant("reference"), out / "run",
             judge_aside_after=1, say=said.append)
print("said:", said)
"""


@needs_a_spare_core
def test_a_script_without_a_main_guard_is_run_once_and_judged_beside_itself(
        tmp_path: Path) -> None:
    """A user's script calling `run_scenario` at module level, no `if __name__ ==
    "__main__"`: the judging process imports the bench, not the script (a multiprocessing
    spawn imported it again and ran the whole run a second time inside it, then failed)."""
    import subprocess
    import sys
    (tmp_path / "script.py").write_text(UNGUARDED)
    done = subprocess.run([sys.executable, str(tmp_path / "script.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ran.txt").read_text() == "ran\n"
    assert "said:" in done.stdout and "judging beside" not in done.stdout, done.stdout[-2000:]
    assert (tmp_path / "run" / "verdicts.json").exists()
