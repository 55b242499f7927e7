"""A second implementation under test (issue 17): the Rust executor of examples/rust-node,
written from docs/PROTOCOL.md alone, as the executors of a mesh whose orchestrator is the
reference. It must pass where the reference passes, and the bench must catch the bug its
`--bug memory-dedup` flag switches on. `.ci/run` builds it; a machine without the
binary skips these tests and says how to build it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli import EXIT_FALSE, EXIT_OK
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import Options
from bench.variants import REFERENCE
from tests.live.conftest import compressed

ROOT = Path(__file__).resolve().parents[2]
RUST_NODE = ROOT / "examples" / "rust-node" / "target" / "release" / "a2a-rust-node"

pytestmark = pytest.mark.skipif(
    not RUST_NODE.exists(),
    reason="the Rust node is not built: cargo build --release --manifest-path "
           "examples/rust-node/Cargo.toml")


def _verdicts(result: object) -> dict[str, str]:
    return {v.name: v.value.value for v in result.verdicts}   # type: ignore[attr-defined]


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
def test_rust_executors_pass_the_quickstart_on_both_brokers(tmp_path: Path, broker: str) -> None:
    """Every verdict TRUE but the two about process instances and gates, which the node
    declares it leaves out: those are UNKNOWN and say why, and the run exits 0."""
    scenario = compressed("quickstart", 5).with_node_command("executor", (str(RUST_NODE),))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live", options=Options(broker=broker))
    verdicts = _verdicts(result)
    assert result.exit_code == EXIT_OK, verdicts
    assert {k for k, v in verdicts.items() if v != "true"} == {"gate_integrity", "context_isolation"}
    notes = {v.name: v.note for v in result.verdicts}
    assert notes["gate_integrity"].startswith("not applicable: exec-1, exec-2, exec-3 declare no gates")
    assert result.metrics["outcomes"].get("COMPLETED", 0) >= 15
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    executed = {e["taskId"] for e in events if e["kind"] == "agent_called"}
    frames = [e for e in events if e["kind"] == "relay_sent" and e["node"].startswith("exec-")]
    assert executed and frames, "the Rust node ran tasks and streamed their answers"


def test_rust_executor_restarts_from_its_data_dir(tmp_path: Path) -> None:
    """restart: exec-1 is SIGKILLed in its ledger's flush window and started again on the
    same data dir; what it ran is not run again and its peers lose nothing unexplained."""
    scenario = compressed("restart", 10).with_node_command("executor", (str(RUST_NODE),))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live", options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert result.exit_code == EXIT_OK, verdicts
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [e["node"] for e in events if e["kind"] == "node_started"].count("exec-1") == 2
    assert any(e["kind"] == "tasks_restored" and e["node"] == "exec-1" for e in events)


@pytest.mark.parametrize(("flags", "exit_code", "duplicate_execution"), [
    ((), EXIT_OK, "true"),
    (("--bug", "memory-dedup"), EXIT_FALSE, "false"),
])
def test_the_bench_catches_the_rust_nodes_bug_and_only_with_it(
        tmp_path: Path, flags: tuple[str, ...], exit_code: int, duplicate_execution: str) -> None:
    """redelivery_restart: the broker redelivers requests to exec-1, some after it
    restarted. With its ledger and task table on disk they are duplicates; with them in
    memory only (as it says: its ledger is not durable) they run a second time, and
    duplicate_execution says so."""
    scenario = compressed("redelivery_restart", 12).with_node_command(
        "executor", (str(RUST_NODE), *flags))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live", options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert verdicts["duplicate_execution"] == duplicate_execution, verdicts
    assert result.exit_code == exit_code, verdicts


def test_the_rust_node_refusing_hostile_input_is_judged_from_its_drop(tmp_path: Path) -> None:
    """hostile_input with Rust executors: every refusal is theirs to say, not the bench's to
    miss. They refuse the empty_conversation attack as MALFORMED and leave the drop's
    optional messageId out; the rules read it off the PUBLISH the tap saw reach them
    (bench/protocols/seed/rules/inbound.py; four were FALSE before, 2026-12-07)."""
    scenario = load_scenario(SCENARIOS / "hostile_input.toml").with_node_command(
        "executor", (str(RUST_NODE),))
    result = run_scenario(scenario, REFERENCE, tmp_path, mode="live",
                          options=Options(broker="mosquitto"))
    verdicts = _verdicts(result)
    assert {k: verdicts[k] for k in ("robustness", "auth_admission", "wire_evidence",
                                     "silent_loss")} == dict.fromkeys(
        ("robustness", "auth_admission", "wire_evidence", "silent_loss"), "true"), verdicts
