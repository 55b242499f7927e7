"""Issue 50: "after" means after in the history. A rule that orders two events of one node by
milliseconds reads a tie the wrong way round; ordered by the history's sequence it cannot. So
a recorded history judged again with every timestamp floored to 2 ms, and to 5 ms — ties
made where there were none, the order kept — gets the same verdicts, rule by rule. Run over
live histories (tests/data/live: the fidelity matrix's cells of 2026-12-05, MQTT 3.1.1,
process and inproc nodes, amqtt and Mosquitto), where milliseconds tie all the time, and
over simulated ones. The same check over the fidelity matrix's 125 live histories of that
day and every shipped scenario in simulation changed nothing (docs/findings/ties.md). What
these histories hold is what this test can catch: admitted_once's original bug (flushes
compared by time) needs a crash right after a tie, which none holds — the one-millisecond
run of the hand-written tests (conftest.py) is what catches that one."""

from __future__ import annotations

import gzip
import math
from pathlib import Path
from typing import Any

import pytest

from bench.checks import judge
from bench.history import History, loads_line
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE

LIVE = sorted((Path(__file__).parents[1] / "data" / "live").glob("*.jsonl.gz"))


def _judged(lines: list[dict[str, Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {v.name: (v.value.value, v.rules) for v in judge(History.from_lines(lines))}


def _floored(lines: list[dict[str, Any]], step_ms: float) -> list[dict[str, Any]]:
    return [dict(line, tMs=math.floor(float(line["tMs"]) / step_ms) * step_ms)
            for line in lines]


def _same_when_tied(lines: list[dict[str, Any]]) -> None:
    judged = _judged(lines)
    assert any(value == "true" for value, _ in judged.values())
    for step_ms in (2.0, 5.0):
        tied = _judged(_floored(lines, step_ms))
        changed = {name: (judged[name][0], tied[name][0]) for name in judged
                   if tied[name] != judged[name]}
        assert not changed, f"floored to {step_ms:g} ms: {changed}"


@pytest.mark.parametrize("recorded", LIVE, ids=[p.name.split(".")[0] for p in LIVE])
def test_a_live_history_with_its_milliseconds_tied_is_judged_the_same(recorded: Path) -> None:
    with gzip.open(recorded, "rt") as fh:
        _same_when_tied([loads_line(line) for line in fh if line.strip()])


@pytest.mark.parametrize("name", ["restart", "redelivery_restart", "gates", "streaming_home_restart",
                                  "a2a_pool_requester_restart"])
def test_a_simulated_history_with_its_milliseconds_tied_is_judged_the_same(
        tmp_path: Path, name: str) -> None:
    run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), REFERENCE, tmp_path, mode="sim")
    _same_when_tied([loads_line(line) for line in
                     (tmp_path / "history.jsonl").read_text().splitlines() if line.strip()])
