"""Every checker can fail: each seeded defect fails the checker that guards against it on
its scenario, while the reference node passes the same scenario with the same seed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks import Value
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE, VARIANTS

DEFECTS = [v for v in VARIANTS.values() if v.name != "reference"]


@pytest.mark.parametrize("defect", DEFECTS, ids=lambda v: v.name)
def test_reference_passes_and_defect_fails(tmp_path: Path, defect) -> None:  # type: ignore[no-untyped-def]
    scenario = load_scenario(SCENARIOS / f"{defect.scenario}.toml")
    ref = {v.name: v for v in run_scenario(scenario, REFERENCE, tmp_path / "ref", mode="sim").verdicts}
    bad = {v.name: v for v in run_scenario(scenario, defect, tmp_path / "bad", mode="sim").verdicts}
    assert ref[defect.caught_by].value is Value.TRUE, ref[defect.caught_by]
    assert bad[defect.caught_by].value is Value.FALSE, bad[defect.caught_by]
    assert bad[defect.caught_by].counterexamples, "a FALSE verdict must point at the history"
    assert all(isinstance(s, int) for c in bad[defect.caught_by].counterexamples for s in c["seq"])


def test_every_checker_is_guarded_by_some_defect_or_fault(tmp_path: Path) -> None:
    """Every checker is FALSE on some run of the shipped scenarios: a seeded defect's, or a
    scenario's that expects it FALSE — measured here, not listed by hand."""
    from bench.checks import checkers
    caught: set[str] = set()
    runs = [(v.scenario, v) for v in DEFECTS]
    runs += [(p.stem, REFERENCE) for p in sorted(SCENARIOS.glob("*.toml"))
             if "false" in p.read_text() and not p.name.endswith(".matrix.toml")]
    for i, (name, variant) in enumerate(runs):
        result = run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), variant,
                              tmp_path / str(i), mode="sim")
        caught |= {v.name for v in result.verdicts if v.value is Value.FALSE}
    # the simulator has no wire to tap: wire_evidence is shown FALSE on live runs of seeded
    # defects (clean_session, agent_id_as_node_id, reply_to_from_agent) in tests/live
    assert set(checkers()) - caught == {"wire_evidence"}


def test_a_defect_leaves_nothing_behind_for_the_next_run_in_the_same_process(tmp_path: Path) -> None:
    """Runs share a Python process (xdist workers, inproc live nodes): the shallow-copy
    defect once polluted the module's context template for every later run."""
    scenario = load_scenario(SCENARIOS / "context.toml")
    run_scenario(scenario, VARIANTS["shallow_context_copy"], tmp_path / "bad", mode="sim")
    ref = {v.name: v for v in run_scenario(scenario, REFERENCE, tmp_path / "ref", mode="sim").verdicts}
    assert ref["context_isolation"].value is Value.TRUE, ref["context_isolation"]
