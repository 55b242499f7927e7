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


def test_every_checker_is_guarded_by_some_defect_or_fault(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every checker is FALSE on some run of the shipped scenarios: a seeded defect's (of a
    node, or of the simulated broker), or a scenario's that expects it FALSE — measured
    here, not listed by hand."""
    from bench.checks import checkers
    from bench.spec import brokers
    caught: set[str] = set()
    runs = [(v.scenario, v) for v in DEFECTS]
    runs += [(p.stem, REFERENCE) for p in sorted(SCENARIOS.glob("*.toml"))
             if "false" in p.read_text() and not p.name.endswith(".matrix.toml")
             and not load_scenario(p).command_nodes]
    for i, (name, variant) in enumerate(runs):
        result = run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), variant,
                              tmp_path / str(i), mode="sim")
        caught |= {v.name for v in result.verdicts if v.value is Value.FALSE}
    generic = brokers.BEHAVIOURS["generic"]
    for defect in brokers.BROKER_DEFECTS.values():
        monkeypatch.setitem(brokers.BEHAVIOURS, "generic", defect.row(generic))
        result = run_scenario(load_scenario(SCENARIOS / f"{defect.scenario}.toml"), REFERENCE,
                              tmp_path / defect.name, mode="sim")
        caught |= {v.name for v in result.verdicts if v.value is Value.FALSE}
    # the simulator has no wire to tap: wire_evidence is shown FALSE on live runs of seeded
    # defects (clean_session, agent_id_as_node_id, reply_to_from_agent) in tests/live, and
    # a2a_session on bugs written into examples/a2a-responder (tests/live/test_a2a_live.py);
    # Parley's, which has no simulated node, on bugs written into its library
    # (tests/live/test_parley.py)
    assert set(checkers()) - caught == {"wire_evidence", "a2a_session", "parley_commander",
                                        "parley_handler", "parley_envelope"}


def test_a_defect_leaves_nothing_behind_for_the_next_run_in_the_same_process(tmp_path: Path) -> None:
    """Runs share a Python process (xdist workers, inproc live nodes): the shallow-copy
    defect once polluted the module's context template for every later run."""
    scenario = load_scenario(SCENARIOS / "context.toml")
    run_scenario(scenario, VARIANTS["shallow_context_copy"], tmp_path / "bad", mode="sim")
    ref = {v.name: v for v in run_scenario(scenario, REFERENCE, tmp_path / "ref", mode="sim").verdicts}
    assert ref["context_isolation"].value is Value.TRUE, ref["context_isolation"]


def test_a_bug_that_breaks_a_whole_class_of_work_is_false_not_unknown(tmp_path: Path) -> None:
    """No v2 signature verifies (a digest computed differently by the verifier): every
    request of tampering_v2 is refused. The checkers that judge tasks have nothing to
    judge (UNKNOWN), which used to be the whole story; silent_loss names it FALSE."""
    from bench.checks import Value
    from bench.core.auth import SignatureVerdict
    from bench.core.envelope import Envelope
    from bench.protocols.seed.node import Node
    from bench.run import run_scenario
    from bench.spec.scenario import SCENARIOS, load_scenario
    from bench.variants import Variant

    class NoV2Verifies(Node):
        def verify_envelope(self, env: Envelope, now_ms: int) -> SignatureVerdict:
            verdict = super().verify_envelope(env, now_ms)
            return SignatureVerdict.BAD_SIGNATURE if verdict is SignatureVerdict.VERIFIED \
                else verdict

    scenario = load_scenario(SCENARIOS / "tampering_v2.toml")
    result = run_scenario(scenario, Variant("no_v2_verifies", NoV2Verifies, "-", "silent_loss",
                                            "tampering_v2"), tmp_path, mode="sim")
    verdicts = {v.name: v for v in result.verdicts}
    assert verdicts["duplicate_execution"].value is Value.UNKNOWN
    loss = verdicts["silent_loss"]
    assert loss.value is Value.FALSE and loss.rules["driven_requests_get_through"]["violations"]


def test_every_defect_alters_the_protocol_of_the_scenario_that_shows_it() -> None:
    """`Variant.alters` names the protocol whose reference node a defect replaces: each
    defect's own scenario speaks it, so no defect is refused where it is shown."""
    from bench.substrates import variant_refusal
    assert REFERENCE.alters is None
    for defect in DEFECTS:
        scenario = load_scenario(SCENARIOS / f"{defect.scenario}.toml")
        assert defect.alters is not None and defect.alters[0] == scenario.topology.protocol
        assert variant_refusal(defect, scenario) is None, defect.name


def test_a_defect_no_node_would_run_is_refused_not_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A seed node's defect on an A2A or Parley topology ran the reference A2A nodes (or the
    library's own) and its report and replay line named the defect (2026-12-07); so did an
    A2A responder's defect where every responder is a program of its own."""
    from bench.cli import EXIT_INVALID, main
    from bench.matrix import load_matrix
    from bench.spec.distribution import SpecError
    for argv, says in (
            (["a2a_quickstart", "--variant", "strict_trusts_claims"],
             "--variant strict_trusts_claims is a defect of the seed protocol's reference "
             "node; topology 'a2a-pair' speaks A2A over MQTT"),
            (["quickstart", "--mode", "sim", "--variant", "a2m_token_on_sends_only"],
             "is a defect of A2A over MQTT's reference node; topology 'star' speaks the seed"),
            (["parley_quickstart", "--variant", "memory_dedup_60s"],
             "topology 'parley' speaks Parley v1"),
            (["a2a_quickstart", "--mode", "live", "--variant", "a2m_dedup_in_memory",
              "--node-command", "responder=python3 examples/a2a-responder/responder.py"],
             "replaces the reference node of tax-1, tax-2, and each runs a program of its own "
             "here: no node would run the defect")):
        assert main(["run", *argv, "--out", str(tmp_path / "never")]) == EXIT_INVALID
        assert says in capsys.readouterr().err
        assert not (tmp_path / "never").exists()
    matrix = tmp_path / "m.matrix.toml"
    matrix.write_text('[[group]]\nscenarios = ["quickstart", "a2a_quickstart"]\n'
                      'variants = ["strict_trusts_claims"]\n')
    with pytest.raises(SpecError, match="defect of the seed protocol's reference node; "
                                        "topology 'a2a-pair'"):
        load_matrix(matrix)
    matrix.write_text('[[group]]\nvariants = ["strict_trusts_claims"]\n')   # "@all": left out
    cells = load_matrix(matrix).cells
    assert cells and {load_scenario(SCENARIOS / f"{c.scenario}.toml").topology.protocol
                      for c in cells} == {"seed"}
