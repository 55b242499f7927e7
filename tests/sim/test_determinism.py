"""Same seed, same bytes: a simulated run is exactly replayable."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE


def history_hash(tmp: Path, name: str, seed: int | None = None) -> str:
    scenario = load_scenario(SCENARIOS / f"{name}.toml", seed=seed)
    run_scenario(scenario, REFERENCE, tmp, mode="sim")
    return hashlib.sha256((tmp / "history.jsonl").read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["quickstart", "restart", "partition", "qos1_redelivery"])
def test_same_seed_gives_byte_identical_history(tmp_path: Path, name: str) -> None:
    assert history_hash(tmp_path / "a", name) == history_hash(tmp_path / "b", name)


def test_another_seed_gives_another_history(tmp_path: Path) -> None:
    assert history_hash(tmp_path / "a", "quickstart", 1) != history_hash(tmp_path / "b", "quickstart", 2)
