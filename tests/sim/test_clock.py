"""Node clocks read like real ones: a simulated node's clock starts at a seeded moment of
2024-2029, never at 0, so a node that confuses a duration with a deadline shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE
from tests.helpers import node_clock_origins


def origin(tmp: Path, seed: int) -> float:
    run_scenario(load_scenario(SCENARIOS / "quickstart.toml", seed=seed), REFERENCE, tmp,
                 mode="sim")
    origins = node_clock_origins(tmp / "history.jsonl")
    # every node of a run reads one clock (skew is a fault's doing); a node's clock is in
    # whole ms, the run's tMs in thousandths
    assert max(origins) - min(origins) < 1
    return round(max(origins))


def test_simulated_node_clocks_start_at_a_seeded_realistic_moment(tmp_path: Path) -> None:
    first, second = origin(tmp_path / "a", 1), origin(tmp_path / "b", 2)
    for o in (first, second):
        assert 2024 <= datetime.fromtimestamp(o / 1000, UTC).year <= 2029
    assert first != second
