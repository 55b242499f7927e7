"""Situations are recognised from real histories, and only where they happened."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks.coverage import SITUATIONS, reached
from bench.history import History
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE


def situations(tmp_path: Path, name: str) -> dict[str, int]:
    run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), REFERENCE, tmp_path, mode="sim")
    return reached(History.read(tmp_path / "history.jsonl"))


@pytest.mark.parametrize("scenario, expected", [
    ("gates", {"gate_expired_reject", "turned_down_instance_followed_to_its_end",
               "failed_subflow", "fault_bit"}),
    ("tampering", {"header_tampered", "fault_bit"}),
    ("replay_expired", {"replay_outside_window", "fault_bit"}),
    ("quickstart", set()),
])
def test_a_run_reaches_the_situations_it_exercises_and_no_other(
        tmp_path: Path, scenario: str, expected: set[str]) -> None:
    got = situations(tmp_path, scenario)
    assert set(got) == {s.name for s in SITUATIONS}
    assert {name for name, n in got.items() if n} == expected


def test_every_situation_is_named_once_and_described() -> None:
    names = [s.name for s in SITUATIONS]
    assert len(names) == len(set(names)) and all(s.description for s in SITUATIONS)
