"""A simulated run interrupted at three moments of scenarios/restart.toml (as the workload
starts, while exec-1 is down, after it came back): judged on what it recorded, exit 2, and
no FALSE (issue 50). The interruption lands where Ctrl-C lands in a simulation: between two
steps of the simulator, from the run's progress callback."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.run import EXIT_UNKNOWN, Interrupted, run_scenario
from bench.spec.scenario import SCENARIOS, Mode, load_scenario
from bench.variants import REFERENCE


@pytest.mark.parametrize("at_ms", [1_000.0, 9_000.0, 14_000.0])
def test_an_interrupted_simulation_is_judged_and_never_false(tmp_path: Path,
                                                             at_ms: float) -> None:
    def progress(elapsed_ms: float, planned_ms: float) -> None:
        if elapsed_ms >= at_ms:
            raise KeyboardInterrupt

    scenario = load_scenario(SCENARIOS / "restart.toml")
    with pytest.raises(Interrupted) as stopped:
        run_scenario(scenario, REFERENCE, tmp_path, mode=Mode.SIM, progress=progress)
    result = stopped.value.result
    assert result is not None
    assert not [v.name for v in result.verdicts if v.value.value == "false"], \
        [(v.name, v.counterexamples[:2]) for v in result.verdicts if v.value.value == "false"]
    assert result.exit_code == EXIT_UNKNOWN
    assert result.summary["interrupted"]["at_s"] == pytest.approx(at_ms / 1000, abs=1.0)
