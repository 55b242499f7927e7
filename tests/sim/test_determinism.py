"""Same seed, same bytes: a simulated run is exactly replayable — in another interpreter,
with another hash seed (set and dict order of strings must not leak into a run)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE

ROOT = Path(__file__).resolve().parents[2]


def history_hash(tmp: Path, name: str, seed: int | None = None) -> str:
    scenario = load_scenario(SCENARIOS / f"{name}.toml", seed=seed)
    run_scenario(scenario, REFERENCE, tmp, mode="sim")
    return hashlib.sha256((tmp / "history.jsonl").read_bytes()).hexdigest()


def hash_in_a_fresh_interpreter(tmp: Path, name: str, hash_seed: str) -> str:
    out = tmp / f"run-{hash_seed}"
    subprocess.run([sys.executable, "-m", "bench", "run", name, "--mode", "sim", "--no-plots",
                    "--json", "--out", str(out)], cwd=ROOT, check=False, capture_output=True,
                   env={**os.environ, "PYTHONHASHSEED": hash_seed}, timeout=300)
    return hashlib.sha256((out / "history.jsonl").read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["quickstart", "restart", "partition", "qos1_redelivery",
                                  "gates", "attacks"])
def test_same_seed_gives_byte_identical_history_across_interpreters(tmp_path: Path,
                                                                    name: str) -> None:
    here = history_hash(tmp_path / "here", name)
    assert hash_in_a_fresh_interpreter(tmp_path, name, "1") == here
    assert hash_in_a_fresh_interpreter(tmp_path, name, "4242") == here


def test_another_seed_gives_another_history(tmp_path: Path) -> None:
    assert history_hash(tmp_path / "a", "quickstart", 1) != history_hash(tmp_path / "b", "quickstart", 2)
