"""Judging streams: a history read for judging keeps no line of a streamed kind (a global
directory's announcements, N² of them) and answers for those only through folds, which
give the same facts as the same fold run over the history in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.checks import judge
from bench.checks.coverage import reached
from bench.core.events import DirectoryUpdated, NodeStarted, RunInterrupted
from bench.history import Fold, History
from bench.metrics import DirectoryFill, compute
from bench.protocols.seed.rules.directory import Directories
from bench.run import STREAMED, read_for_judging
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
