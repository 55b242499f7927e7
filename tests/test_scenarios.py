"""Every shipped scenario runs on the reference node with every verdict as expected,
and every fault in it actually fired."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import checkers
from bench.run import EXIT_OK, run_scenario
from bench.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE

FILES = sorted(SCENARIOS.glob("*.toml"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_scenario_passes_on_the_reference(tmp_path: Path, path: Path) -> None:
    scenario = load_scenario(path, known_checks=tuple(checkers()))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="sim")
    wrong = {v.name: (v.value.value, v.counterexamples[:2], v.note)
             for v in result.verdicts if v.value.value != scenario.expect.get(v.name, "true")}
    assert result.exit_code == EXIT_OK, wrong
    assert result.metrics["requests"] > 0
    for name in ("history.jsonl", "verdicts.json", "metrics.json", "summary.json", "report.md",
                 "scenario.json", "topology.json"):
        assert (tmp_path / name).exists()


def test_the_fault_scenarios_cover_the_catalogue() -> None:
    from bench.faults import CATALOGUE
    import tomllib
    kinds = {f["kind"] for p in FILES for f in tomllib.loads(p.read_text()).get("faults", [])}
    assert set(CATALOGUE) <= kinds
