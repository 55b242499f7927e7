"""What explore found on the reference in December 2026 and what each fix excuses: a rule
that lets a run pass must say, by a count, that the excuse was taken, and fail again on
the same real history once the history no longer shows the reason — as a node that did
the same thing by itself would.

- a ghost (a gone node's retained announcement, offline, never online) listing the agents
  of a node that went offline: the reference refuses to queue there (W-DIR-5);
- a forgery admitted under a request's messageId, then the genuine request tampered on the
  way: silent_loss must still see the forgery;
- a hostile envelope injected while the broker was down: nobody could refuse it;
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
from bench.core.directory import AgentDescriptor, Announcement, Directory, Resolution
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
