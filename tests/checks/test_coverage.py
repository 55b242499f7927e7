"""Situations are recognised from real histories, and only where they happened; the default
matrix reaches every one of them (each has a witness: a cell of the default matrix, run
here, that reaches it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checks.coverage import SITUATIONS, reached
from bench.core import events as ev
from bench.history import History
from bench.run import run_scenario
from bench.spec.scenario import SCENARIOS, load_scenario
from bench.variants import REFERENCE
from tests.helpers import crashed, dropped, history, outbound, task_state

#: every hand-written history also with all its events in one millisecond (conftest.py)
pytestmark = pytest.mark.usefixtures("one_millisecond_too")


def situations(tmp_path: Path, name: str) -> dict[str, int]:
    run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), REFERENCE, tmp_path, mode="sim")
    return reached(History.read(tmp_path / "history.jsonl"))


#: Scenario (reference, seed 1: a cell of the default matrix) -> exactly the situations it
#: reaches. Together they reach every situation; a new situation needs its witness here.
WITNESSES: dict[str, set[str]] = {
    "gates": {"gate_expired_reject", "turned_down_instance_followed_to_its_end",
              "branches_finished_out_of_order",
              "failed_subflow", "qos1_redelivery_bit"},
    "tampering": {"header_tampered", "tamper_payload_bit", "tamper_routing_bit",
                  "tamper_headers_bit", "request_timed_out"},
    "replay_expired": {"replay_outside_window", "replay_bit"},
    "quickstart": set(),
    "gate_timeout_fail": {"gate_expired_fail", "gate_on_timeout_fail", "restart_bit",
                          "gate_expired_after_home_restart",
                          "turned_down_instance_followed_to_its_end"},
    "gate_slow_link": {"executor_answered_already_decided", "decision_resent", "latency_bit"},
    "redelivery_restart": {"redelivered_after_ledger_flushes", "qos1_redelivery_bit",
                           "restart_bit"},
    "misaddressed": {"misaddressed_to_empty_roster", "request_timed_out", "empty_directory_bit"},
    "streaming_home_restart": {"home_restart_mid_stream_tabs_reattach", "relay_duplicate_dropped",
                               "relay_reorder_repaired", "qos1_redelivery_bit", "restart_bit"},
    "crash_in_flight": {"crash_with_publishes_in_flight", "latency_bit", "restart_bit"},
    "publish_failure": {"relay_gap_declared", "request_timed_out", "publish_failure_bit"},
    "puback_refused": {"relay_gap_declared", "request_timed_out", "puback_refused_bit"},
    "attacks": {"forged_sender", "forged_sender_bit", "replay_bit"},
    "hostile_input": {"hostile_input_admitted", "hostile_input_bit"},
    "directory_wipe": {"announcement_cleared", "directory_wipe_bit"},
    "ghost_announcement": {"ghost_announcement_bit", "announcement_cleared"},
    "streaming": {"stream_without_conversation", "qos1_redelivery_bit"},
    # the faults no scenario above exercises
    "double_subscription": {"double_subscription_bit"},
    "stale_roster": {"stale_roster_bit"},
    "broker_restart": {"broker_restart_bit"},
    "partition": {"partition_bit"},
    "pause": {"pause_bit"},
    "loss": {"loss_bit"},
    "duplicate_client_id": {"duplicate_client_id_bit", "request_timed_out"},
    "missing_reply_node": {"missing_reply_node_bit", "request_timed_out"},
    "clock_skew": {"clock_skew_bit", "request_timed_out"},
    "stuck_agent": {"task_timed_out", "instance_ended_by_its_task", "request_timed_out"},
    "key_rotation": {"key_rotation_bit", "request_timed_out"},
    "attacks_ledger": {"ledger_poisoning_bit", "forged_ahead_then_genuine"},
    "tampering_v2": {"header_tampered", "tamper_payload_bit", "tamper_routing_bit",
                     "tamper_headers_bit", "request_timed_out"},
    # the A2A-over-MQTT profile's own faults and situations
    "a2a_tampered": {"property_tampering_bit", "a2a_retried_for_no_first_reply",
                     "a2a_retry_answered_from_the_task_table"},
    "a2a_malformed": {"malformed_request_bit"},
    "malformed_envelopes": {"malformed_envelope_bit"},
    "a2a_restart": {"restart_bit", "a2a_retried_for_no_first_reply",
                    "a2a_retry_after_its_responder_restarted",
                    "a2a_retry_answered_from_the_task_table"},
    "a2a_oauth": {"a2a_cancelled_while_running", "a2a_next_turn",
                  "a2a_retried_for_no_first_reply", "a2a_retry_answered_from_the_task_table",
                  "a2a_spoilt_token_sent", "malformed_request_bit", "restart_bit"},
    "a2a_handover": {"a2a_cancelled_while_running", "a2a_next_turn",
                     "a2a_retry_answered_from_the_task_table",
                     "a2a_sent_again_after_a_requester_restart", "a2a_task_handed_over",
                     "crash_with_publishes_in_flight", "restart_bit"},
}


@pytest.mark.parametrize("scenario", WITNESSES)
def test_a_run_reaches_the_situations_it_exercises_and_no_other(tmp_path: Path,
                                                                scenario: str) -> None:
    got = situations(tmp_path, scenario)
    assert set(got) == {s.name for s in SITUATIONS}
    assert {name for name, n in got.items() if n} == WITNESSES[scenario]


def test_the_default_matrix_reaches_every_situation() -> None:
    """With the test above: each witness is a cell of the default matrix and reaches what
    it is listed with, so the matrix reaches every situation at least once — but those of a
    protocol the simulator runs no node of, whose witnesses are recorded live runs (below)."""
    from bench.matrix import load_matrix
    cells = {(c.scenario, c.variant, c.topology, c.seed, c.mode)
             for c in load_matrix(SCENARIOS / "default.matrix.toml").cells}
    assert all((s, "reference", None, 1, "sim") in cells for s in WITNESSES)
    missing = {s.name for s in SITUATIONS if s.protocol not in RECORDED} \
        - set().union(*WITNESSES.values())
    assert not missing, f"no witness in the default matrix reaches {sorted(missing)}"


#: the protocols the simulator runs no node of -> their recorded live runs (history files
#: of tests/data/<folder>): the witnesses of their situations
RECORDED = {"parley": Path(__file__).parents[1] / "data" / "parley"}


@pytest.mark.parametrize("protocol", sorted(RECORDED))
def test_a_live_only_protocols_recorded_runs_reach_each_of_its_situations(
        protocol: str) -> None:
    """Each situation of a protocol only live runs judge is reached by one of its recorded
    runs; and a recorded run reaches no situation of another protocol's."""
    import gzip

    from bench.history import loads_line
    own = {s.name for s in SITUATIONS if s.protocol == protocol}
    reached_somewhere: set[str] = set()
    assert own
    for path in sorted(RECORDED[protocol].glob("*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            got = reached(History.from_lines(loads_line(line) for line in f if line.strip()))
        assert not {n for n, k in got.items() if k and n not in own
                    and next(s for s in SITUATIONS if s.name == n).protocol is not None}, path
        reached_somewhere |= {n for n, k in got.items() if k and n in own}
    assert reached_somewhere == own, sorted(own - reached_somewhere)


def test_a_misaddressed_request_counts_only_while_the_roster_was_empty() -> None:
    """Refilled later: the drops in between still count (the roster loaded last before
    each drop decides, not the last one of the run)."""
    def roster(*agents: str) -> ev.RosterLoaded:
        return ev.RosterLoaded(list(agents), [], "fin", node="fin-1")
    h = history(roster("fin.a"), dropped("fin-1", "NOT_MINE"), roster(),
                dropped("fin-1", "NOT_MINE"), dropped("fin-1", "NOT_MINE"),
                dropped("fin-2", "NOT_MINE"), roster("fin.a"), dropped("fin-1", "NOT_MINE"))
    assert reached(h)["misaddressed_to_empty_roster"] == 2


def test_a_response_still_unsettled_at_a_crash_is_a_publish_in_flight() -> None:
    done = task_state("r1", "COMPLETED", "RUNNING")
    late = outbound("x1", "PUBLISHED", message_type="TASK_RESPONSE", request_id="r1",
                    node="exec-1")
    assert reached(history(done, crashed(), late))["crash_with_publishes_in_flight"] == 1
    assert reached(history(done, late, crashed()))["crash_with_publishes_in_flight"] == 0


def test_every_situation_is_named_once_and_described() -> None:
    names = [s.name for s in SITUATIONS]
    assert len(names) == len(set(names)) and all(s.description for s in SITUATIONS)


def test_every_fault_kind_has_its_situation() -> None:
    """The checkers import no fault code, so coverage lists the catalogue's kinds itself."""
    from bench.checks.coverage import FAULT_KINDS
    from bench.faults import CATALOGUE
    assert sorted(FAULT_KINDS) == sorted(CATALOGUE)
