"""What explore found on the reference in December 2026 and what each fix excuses: a rule
that lets a run pass must say, by a count, that the excuse was taken, and fail again on
the same real history once the history no longer shows the reason — as a node that did
the same thing by itself would.

- a ghost (a gone node's retained announcement, offline, never online) listing the agents
  of a node that went offline: the reference refuses to queue there (W-DIR-5);
- a forgery admitted under a request's messageId, then the genuine request tampered on the
  way: silent_loss must still see the forgery;
- a hostile envelope injected while the broker was down: nobody could refuse it; nor one
  injected while another node held the target's client id (the impostor was handed it);
- a reply without Correlation Data the broker's redelivery fault sent twice (up to its
  last scheduled copy's delay past the heal), or the link duplicated: one reply;
- a request still running when its requester gave up, while a forgery under its messageId
  ran and ended elsewhere: the genuine task's end is the one that counts;
- a request queued for an attacker's ghost, the only entry listing its agent, by a node that
  never saw a live holder go offline (it had just restarted): W-DIR-5 queues there;
- a task's answer that reached its requester though its PUBACK never came back (a partition,
  then a restart): it was answered;
- frames held behind a hole by a home whose clock was then set back (its reorder window
  runs on that clock): undecided, not FALSE;
- a request handed over just after a lossy link's heal, while the link still retransmitted
  what it had lost: undecided, not FALSE;
- requests the node a key rotation left with the old keys (on purpose) refused are the
  fault's doing, not a class of work failing;
- a gate opened while its store's clock was set ahead falls due that much later (its
  deadline is on that clock), one whose deadline the clock jumped past at once;
- a reply without Correlation Data MQTT itself delivered again on a resumed session (DUP,
  the same packet id): one reply;
- a partition of a node down when it began: no connection for the broker to give up;
- a message its sender sent again after losing its connection before the PUBACK — and
  never settled, having crashed — is new to the broker, not a re-delivery;
- a message a broker without its sessions took before its target subscribed again, whose
  PUBACK a slow link brought back after that: lost with the sessions;
- a replay queued for a node that restarted across a key rotation, its key retired by then:
  BAD_SIGNATURE is honest at its arrival;
- requests refused STALE from a requester whose clock a fault set ahead: the fault's doing;
- a malformed request answered (or not yet) over a lossy link still catching up after its
  heal: undecided, not FALSE;
- gate decisions still in their sender's TCP retransmission queue (a lossy link that never
  caught up): in flight, not unresumed;
- requests sent while their only executor was down (UNDELIVERABLE, rightly) are no class
  of work failing by itself;
- requests the workload misaddressed or a forgery shadowed do not make a run's requests
  "not one got through";
- a request signed before its sender's clock was set off, acknowledged after: judged by
  the clock it was signed on;
- a task's watchdog after a restart that set the node's clock back: a whole timeout from
  the restart is all the node can know;
- requests a fault made the client refuse do not count as work that failed by itself;
- a copy dropped NOT_MINE went through the ledger: its duplicate is no trace of a refusal;
- a node's own frame back through a borrowed client id before its PUBACK: it did send it;
- a clear while the broker refused the node's publishes: its new announcement may have been
  refused (undecided, not FALSE);
- a forgery sent ahead to another node that reached this one through a client id it
  borrowed, dropped NOT_MINE and so ledgered: the genuine request is its DUPLICATE;
- an insider's request whose replyNodeId a man in the middle then rewrote: the node answered
  the replyNodeId it was handed;
- a request with a Message Expiry Interval held on lossy links: the broker saw it for less
  than its expiry (undecided, not FALSE)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.checks import Value, checkers
from bench.protocols.seed.directory import AgentDescriptor, Announcement, Directory, Resolution
from tests.helpers import Lines, explored_lines, from_lines


def _ghost_seen_online_once(lines: Lines) -> None:
    """The ghost's first announcement online: then it is a node gone offline, not a ghost."""
    first = next(e for e in lines if e["kind"] == "directory_updated"
                 and e["nodeId"].endswith("~ghost"))
    first["online"] = True


def _forgeries_refused(lines: Lines) -> None:
    lines[:] = [e for e in lines if not (e["kind"] == "inbound_admitted"
                                         and str(e.get("requestId")).startswith("attack"))]


def _broker_never_stopped(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "broker_restart"]


def _addressed_and_unforged(lines: Lines) -> None:
    _forgeries_refused(lines)
    for e in lines:
        if e["kind"] == "request_sent":
            e.pop("targetNodeId", None)


def _signed_when_acknowledged(lines: Lines) -> None:
    """Each request's record moved to its PUBACK: then it was signed on the skewed clock."""
    acked = {e["messageId"]: e["tMs"] for e in lines if e["kind"] == "outbound_settled"}
    for e in lines:
        if e["kind"] == "request_sent" and e["messageId"] in acked:
            e["tMs"] = acked[e["messageId"]]


def _no_clock_skew(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "clock_skew"]


def _no_refusing_fault(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "publish_failure"]


def _no_not_mine(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("reason") != "NOT_MINE"]


def _nobody_was_out(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "broker_restart"
                and e["kind"] != "mqtt_disconnected"]


def _frames_never_decided(lines: Lines) -> None:
    """The node's own records of sending a frame gone: then its SELF_LOOP is untrue."""
    looped = {e["messageId"] for e in lines if e.get("reason") == "SELF_LOOP"}
    lines[:] = [e for e in lines if not (e["kind"] == "relay_sent"
                                         and e["messageId"] in looped)]


def _no_refusing_broker(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "puback_refused"]


#: regression scenario -> (checker, rule, what the rule counts when it excuses), and the
#: mutation that takes the excuse away
def _forgery_never_reached_the_target(lines: Lines) -> None:
    """The forgery's NOT_MINE drop at the genuine request's target gone: then nothing
    ledgered its messageId there, and the genuine request's DUPLICATE is unexplained."""
    forged = {(e["messageId"], e["requestId"]) for e in lines if e["kind"] == "attack_sent"}
    lines[:] = [e for e in lines if not (e["kind"] == "inbound_dropped"
                                         and e["reason"] == "NOT_MINE"
                                         and (e["messageId"], e.get("requestId")) in forged)]


def _links_never_lossy(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "loss"]


def _headers_never_rewritten(lines: Lines) -> None:
    lines[:] = [e for e in lines if not (e["kind"] == "attack_sent"
                                         and e["attack"] == "tamper_headers")]


def _never_taken_over(lines: Lines) -> None:
    """The impostor's connections under exec-2's client id gone: then nothing took the
    injections but exec-2, which never refused them."""
    lines[:] = [e for e in lines if not (e["kind"] == "mqtt_connected" and e["node"] == "orch-1"
                                         and e.get("clientId") == "exec-2")]


def _nothing_redelivered(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "qos1_redelivery"]


def _never_down(lines: Lines) -> None:
    lines[:] = [e for e in lines if e["kind"] != "node_crashed"]


def _no_delays_journaled(lines: Lines) -> None:
    """The broker's journal of each copy and its delay gone: a copy seconds after the heal
    is then past any bound the fault set."""
    lines[:] = [e for e in lines if not (e["kind"] == "fault_fired"
                                         and e["fault"] == "qos1_redelivery")]


def _hung_tasks_ended(lines: Lines) -> None:
    """Each task still running at the end given an end at once: then its request had its
    answer's chance, and no answer is unexplained."""
    ended = {(e["node"], e["taskId"]) for e in lines
             if e["kind"] == "task_state" and e["state"] in ("COMPLETED", "FAILED", "TIMEOUT")}
    out: Lines = []
    for e in lines:
        out.append(e)
        if e["kind"] == "task_executed" and (e["node"], e["taskId"]) not in ended:
            out.append({k: e[k] for k in ("seq", "tMs", "node", "taskId", "agentId")}
                       | {"kind": "task_state", "state": "COMPLETED", "previous": "RUNNING",
                          "error": None})
    lines[:] = out


def _ghost_never_planted(lines: Lines) -> None:
    """The fault's journal of the ghost it planted gone: a target that is no node and no
    attack's is the node's own invention."""
    lines[:] = [e for e in lines if not (e["kind"] == "fault_fired"
                                         and e["fault"] == "ghost_announcement")]


def _answers_never_arrived(lines: Lines) -> None:
    lines[:] = [e for e in lines if not (e["kind"] == "inbound_admitted"
                                         and e["messageType"] == "TASK_RESPONSE")]


def _nobody_left_stale(lines: Lines) -> None:
    for e in lines:
        if e.get("fault") == "key_rotation" and e["kind"] == "fault_start":
            e["params"] = {k: v for k, v in e["params"].items() if k != "stale_node"}


def _copies_marked_new(lines: Lines) -> None:
    """Every reply taken marked a first delivery: then a second copy is a second reply."""
    for e in lines:
        if e["kind"] == "a2m_reply_taken":
            e["dup"] = False


def _sender_never_lost_its_connection(lines: Lines) -> None:
    lines[:] = [e for e in lines if not (e["node"] == "exec-1" and e["kind"] in (
        "mqtt_disconnected", "node_crashed"))]


def _links_never_slow(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "latency"]


def _never_rotated(lines: Lines) -> None:
    lines[:] = [e for e in lines if e.get("fault") != "key_rotation"]


CASES: dict[str, tuple[list[tuple[str, str, str | None]], Callable[[Lines], None]]] = {
    "request_for_a_gone_holder_not_sent_to_a_ghost": (
        [("directory_liveness", "undeliverable_only_when_unknown",
          "only_entries_never_seen_online_listed_it")], _ghost_seen_online_once),
    "request_for_a_lossy_holder_not_sent_to_a_ghost": (
        [("directory_liveness", "undeliverable_only_when_unknown",
          "only_entries_never_seen_online_listed_it")], _ghost_seen_online_once),
    "forgery_ahead_of_a_request_a_man_in_the_middle_rerouted": (
        [("silent_loss", "no_response_explained", None)], _forgeries_refused),
    "hostile_input_while_the_broker_was_down": (
        [("robustness", "hostile_input_refused", "injected_while_the_broker_was_down")],
        _broker_never_stopped),
    "requests_a_forgery_or_the_workload_misaddressed_do_not_count": (
        [("silent_loss", "driven_requests_get_through", "to_a_node_not_hosting_its_agent"),
         ("silent_loss", "driven_requests_get_through", "shadowed_by_an_admitted_forgery")],
        _addressed_and_unforged),
    "watchdog_after_a_restart_that_set_the_clock_back": (
        [("task_lifecycle", "times_out_on_time", "clock_set_between_submission_and_restart")],
        _no_clock_skew),
    "watchdog_after_a_restart_on_a_clock_set_ahead": (
        [("task_lifecycle", "times_out_on_time", "clock_set_between_submission_and_restart")],
        _no_clock_skew),
    "requests_refused_at_send_by_a_fault_do_not_count": (
        [("silent_loss", "driven_requests_get_through", "refused_at_send_by_a_fault")],
        _no_refusing_fault),
    "duplicate_of_a_copy_routed_elsewhere_after_a_refusal": (
        [("auth_admission", "refusal_leaves_no_trace", None)], _no_not_mine),
    "requests_while_the_broker_restarts_do_not_count": (
        [("silent_loss", "driven_requests_get_through",
          "sent_while_the_requester_or_the_broker_was_out")], _nobody_was_out),
    "own_frame_back_through_a_borrowed_client_id_before_its_puback": (
        [("silent_loss", "drops_are_true", None)], _frames_never_decided),
    "announcement_cleared_while_the_broker_refused_its_publishes": (
        [("directory_liveness", "announced_again_after_a_clear", None)], _no_refusing_broker),
    "request_signed_before_a_skew_acknowledged_after_it": (
        [("auth_admission", "stale_either_way", None)], _signed_when_acknowledged),
    "forgery_ledgered_not_mine_through_a_borrowed_client_id": (
        [("silent_loss", "no_response_explained", None)], _forgery_never_reached_the_target),
    "a2a_request_held_on_a_lossy_link_past_its_expiry": (
        [("a2a_broker", "expired_requests_not_delivered", None)], _links_never_lossy),
    "hostile_reply_node_rewritten_by_a_man_in_the_middle": (
        [("robustness", "hostile_input_refused", "reply_node_rewritten_in_flight")],
        _headers_never_rewritten),
    "hostile_input_lost_to_a_client_id_takeover": (
        [("robustness", "hostile_input_refused", "lost_to_client_id_takeover")],
        _never_taken_over),
    "a2a_redelivered_copy_of_a_reply_without_correlation": (
        [("a2a_replies", "replies_answer_a_request",
          "copy_the_redelivery_fault_made")], _nothing_redelivered),
    "a2a_reply_without_correlation_delivered_twice": (
        [("a2a_replies", "replies_answer_a_request", "copy_the_redelivery_fault_made")],
        _nothing_redelivered),
    "a2a_reply_without_correlation_copied_after_the_heal": (
        [("a2a_replies", "replies_answer_a_request", "copy_the_redelivery_fault_made")],
        _no_delays_journaled),
    "request_still_running_while_a_forgery_under_its_message_id_ended": (
        [("silent_loss", "no_response_explained", "no_response_task_slower_than_timeout")],
        _hung_tasks_ended),
    "queued_for_a_planted_ghost_after_a_restart": (
        [("targeted_delivery", "published_to_a_node",
          "queued_for_a_planted_ghost_as_w_dir_5_says")], _ghost_never_planted),
    "answer_arrived_before_its_puback_died_with_a_restart": (
        [("reply_routing", "ended_task_answered", "answer_arrived_unsettled")],
        _answers_never_arrived),
    "relayed_frames_held_by_a_home_whose_clock_was_set_back": (
        [("relay_integrity", "relayed_frames_accounted", None)], _no_clock_skew),
    "a2a_handover_held_behind_a_lossy_link_after_its_heal": (
        [("a2a_handover", "handed_over_requests_reach_their_agent", "handovers_undecided")],
        _links_never_lossy),
    "requests_refused_by_the_node_a_key_rotation_left_stale": (
        [("silent_loss", "driven_requests_get_through",
          "refused_for_a_key_or_a_clock_a_fault_set")], _nobody_left_stale),
    "gate_opened_on_a_clock_set_ahead_expires_that_much_later": (
        [("gate_integrity", "timeout_policy_applied", "open_at_end")], _no_clock_skew),
    "a2a_reply_without_correlation_redelivered_on_a_resumed_session": (
        [("a2a_replies", "replies_answer_a_request",
          "redelivered_copy_of_a_reply_without_correlation")], _copies_marked_new),
    "partition_of_a_node_down_when_it_began": (
        [("deployment", "gives_up_a_silent_client", "down_when_silenced")], _never_down),
    "response_resent_by_its_sender_after_a_broker_restart": (
        [("deployment", "redelivers_the_same_packet", "sender_resent")],
        _sender_never_lost_its_connection),
    "published_over_a_slow_link_before_the_target_subscribed_again": (
        [("qos1_delivery", "published_reaches_addressee", "lost_with_non_persistent_broker")],
        _links_never_slow),
    "replay_queued_for_a_node_restarting_across_a_key_rotation": (
        [("auth_admission", "verdict_is_honest", "signed_under_a_key_rotated_in_flight")],
        _never_rotated),
    "requests_refused_stale_from_a_requester_a_fault_set_ahead": (
        [("silent_loss", "driven_requests_get_through",
          "refused_for_a_key_or_a_clock_a_fault_set")], _no_clock_skew),
    "a2a_malformed_request_held_behind_a_lossy_link_after_its_heal": (
        [("a2a_replies", "malformed_requests_refused", None)], _links_never_lossy),
    "gate_decisions_held_by_a_link_that_never_caught_up": (
        [("gate_integrity", "decision_resumes", None)], _links_never_lossy),
    "requests_while_their_only_executor_is_down_do_not_count": (
        [("silent_loss", "driven_requests_get_through", "to_an_agent_no_node_hosted")],
        _never_down),
}


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lines]:
    return {name: explored_lines(tmp_path_factory.mktemp(name), name) for name in CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_excuse_is_taken_and_counted(histories: dict[str, Lines], name: str) -> None:
    h = from_lines(histories[name])
    for checker, rule, counter in CASES[name][0]:
        v = checkers()[checker](h)
        assert v.value is not Value.FALSE, (rule, v.counterexamples[:2])
        if counter is not None:
            assert v.counts.get(counter, 0) > 0, (rule, v.counts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_without_the_reason_the_rule_fails(histories: dict[str, Lines], name: str) -> None:
    rules, mutate = CASES[name]
    lines = [dict(e) for e in histories[name]]
    mutate(lines)
    h = from_lines([{**e, "seq": i + 1} for i, e in enumerate(lines)])
    for checker, rule, _counter in rules:
        v = checkers()[checker](h)
        assert v.value is Value.FALSE and v.rules[rule]["violations"] > 0, (rule, v.rules[rule])


# -- the reference's directory (W-DIR-5) ------------------------------------------------------


def _ann(node: str, online: bool, *agents: str) -> Announcement:
    return Announcement(node, online, "llm",
                        tuple(AgentDescriptor(a, node, "executor", online) for a in agents))


def test_a_ghost_does_not_take_the_agents_of_a_node_gone_offline() -> None:
    d = Directory()
    d.apply(_ann("exec-1~ghost", False, "llm.tax"))
    d.apply(_ann("exec-1", True, "llm.tax"))
    assert d.resolve("llm.tax", None).node_id == "exec-1"
    d.apply(_ann("exec-1", False))                       # its will: offline, no agents
    target = d.resolve("llm.tax", None)
    assert target.how is Resolution.UNRESOLVED and "exec-1~ghost" in target.reason
    d.apply(_ann("exec-1", True, "llm.tax"))             # back
    assert d.resolve("llm.tax", None).node_id == "exec-1"


def test_an_offline_entry_still_resolves_when_no_holder_went_offline() -> None:
    """An older release's node, offline with its agents listed, was never seen online here:
    the broker queues for it (W-DIR-5), as before."""
    d = Directory()
    d.apply(_ann("exec-9", False, "llm.tax"))
    target = d.resolve("llm.tax", None)
    assert target.how is Resolution.DIRECTORY and target.node_id == "exec-9"
    d.apply(_ann("exec-1", True, "llm.tax"))
    d.remove("exec-1")                                   # cleared, not gone offline
    assert d.resolve("llm.tax", None).node_id == "exec-9"
