"""Every rule of every checker, shown to fail on a mutated real history.

A rule is only worth what it can catch. For each rule there is one recipe: a simulated
run of a shipped scenario (TRUE on the reference), then one mutation of its history — an
event removed, repeated or altered, as a node with that bug would have recorded it — and
the rule must report it (a violation; for a rule that can only be undecided, an unknown).
A rule without a recipe fails `test_every_rule_has_a_recipe`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.checks import Value, checkers, judge, not_applicable
from bench.history import dumps_line
from bench.run import read_for_judging
from tests.helpers import Lines, from_lines, run_lines

Mutation = Callable[[Lines], None]
SCENARIOS = ("quickstart", "gates", "attacks_audit", "partition", "publish_failure", "context",
             "hostile_input", "directory_wipe", "process_restart", "stuck_agent",
             "broker_redelivery", "duplicate_client_id", "tampering_v2", "attacks_ledger",
             "key_rotation", "clock_ahead", "gate_decision_redelivered", "session_expired",
             "a2a_quickstart", "a2a_restart", "a2a_pool", "a2a_expiry", "a2a_malformed",
             "a2a_multiturn", "a2a_oauth", "a2a_handover", "a2a_stream_stall",
             "a2a_bad_properties", "a2a_reply_extras", "a2a_publish_refused",
             "malformed_envelopes", "a2a_binding_errors")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Lines]:
    return {name: run_lines(tmp_path_factory.mktemp(name), name) for name in SCENARIOS}


# -- mutations --------------------------------------------------------------------------------------
def where(lines: Lines, kind: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True) -> int:
    return next(i for i, e in enumerate(lines) if e["kind"] == kind and pred(e))


def drop(kind: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True) -> Mutation:
    return lambda lines: lines.pop(where(lines, kind, pred)) and None


def repeat(kind: str) -> Mutation:
    def go(lines: Lines) -> None:
        i = where(lines, kind)
        lines.insert(i + 1, copy.deepcopy(lines[i]))
    return go


def alter(kind: str, pred: Callable[[dict[str, Any]], bool] = lambda e: True,
          **changes: Any) -> Mutation:
    def go(lines: Lines) -> None:
        e = lines[where(lines, kind, pred)]
        for key, value in changes.items():
            e[key] = value(e) if callable(value) else value
    return go


def request(e: dict[str, Any]) -> bool:
    return e.get("messageType") == "TASK_REQUEST"


def response(e: dict[str, Any]) -> bool:
    return e.get("messageType") == "TASK_RESPONSE"


def drop_terminal_state(lines: Lines) -> None:
    i = where(lines, "task_state", lambda e: e["state"] == "COMPLETED")
    lines.pop(i)


def interrupted_unanswered(lines: Lines) -> None:
    """A task a restart ended FAILED("interrupted"), its requester never told: the
    response's settlement is gone, and its arrival (nothing left the executor)."""
    task = lines[where(lines, "task_state", lambda e: e.get("error") == "interrupted")]
    lines.pop(where(lines, "outbound_settled",
                    lambda e: response(e) and e["requestId"] == task["taskId"]
                    and e["node"] == task["node"]))
    lines[:] = [e for e in lines if not (e["kind"] == "inbound_admitted"
                                         and e["messageType"] == "TASK_RESPONSE"
                                         and e.get("requestId") == task["taskId"]
                                         and e.get("originNodeId") == task["node"])]


def merged_out_of_branch_order(lines: Lines) -> None:
    """A parallel step's first two branch merges written the other way round (as a node
    that merges branches as they finish would, when the second finished first)."""
    i = where(lines, "context_merged", lambda e: e["path"].endswith("/b1") and e["scope"] == "main")
    j = where(lines, "context_merged", lambda e: e["path"].endswith("/b2")
              and e["processInstId"] == lines[i]["processInstId"])
    lines[i], lines[j] = lines[j], lines[i]


def refused_in_the_overlap(lines: Lines) -> None:
    """A request of the rotated agent, admitted during the overlap, refused as BAD_SIGNATURE
    instead (as a node that drops the old key at once would)."""
    r = lines[where(lines, "keys_rotated", lambda e: bool(e["overlapKids"]))]
    i = where(lines, "inbound_admitted", lambda e: e["seq"] > r["seq"] and e["node"] == r["node"]
              and e["fromAgentId"] in r["overlapKids"])
    a = lines[i]
    lines[i] = {"seq": a["seq"], "tMs": a["tMs"], "node": a["node"], "kind": "inbound_dropped",
                "reason": "AUTH_REJECTED", "detail": "BAD_SIGNATURE",
                "topic": f"ooder/node/{a['node']}/inbox", "messageId": a["messageId"],
                "messageType": a["messageType"], "fromAgentId": a["fromAgentId"],
                "requestId": a["requestId"], "verdict": "BAD_SIGNATURE", "bytes": 400,
                "dup": False, "packetId": a.get("packetId"), "qos": 1, "retain": False}


def future_let_in(lines: Lines) -> None:
    """A request signed on a clock ten minutes fast, refused STALE, admitted VERIFIED (as
    a node that checks freshness only for the past would): one from the middle of the
    skew, away from its edges, where the clock may have moved while it was in flight."""
    stale = [i for i, e in enumerate(lines)
             if e["kind"] == "inbound_dropped" and e.get("verdict") == "STALE"]
    i = stale[len(stale) // 2]
    d = lines[i]
    lines[i] = {**{k: v for k, v in d.items() if k not in ("reason", "detail", "bytes", "topic")},
                "kind": "inbound_admitted", "verdict": "VERIFIED", "toAgentId": None,
                "targetNodeId": d["node"], "originNodeId": "orch-1", "replyNodeId": "orch-1",
                "via": "mqtt", "handler": "EXACT"}


def poisoned_ledger(lines: Lines) -> None:
    """A genuine request, arriving after a forgery under its messageId was refused, is
    dropped as a DUPLICATE of it (as a node that fills its ledger before admission would)."""
    refused = {(e["node"], e["messageId"]) for e in lines
               if e["kind"] == "inbound_dropped" and e["reason"] == "AUTH_REJECTED"}
    i = where(lines, "inbound_admitted", lambda e: (e["node"], e["messageId"]) in refused)
    a = lines[i]
    lines[i] = {"seq": a["seq"], "tMs": a["tMs"], "node": a["node"], "kind": "inbound_dropped",
                "reason": "DUPLICATE", "detail": "already in the inbound ledger",
                "topic": f"ooder/node/{a['node']}/inbox", "messageId": a["messageId"],
                "messageType": a["messageType"], "fromAgentId": a["fromAgentId"],
                "requestId": a["requestId"], "verdict": a["verdict"], "bytes": 400,
                "dup": False, "packetId": a.get("packetId"), "qos": 1, "retain": False}


def nothing_gets_through(lines: Lines) -> None:
    """Not one request reached an agent (a whole class of work broken: no signature
    verifies, say): every execution and every response gone, each request given up."""
    lines[:] = [e for e in lines if e["kind"] not in ("task_executed", "outbound_settled")
                or (e["kind"] == "outbound_settled" and e["messageType"] != "TASK_RESPONSE")]
    for e in lines:
        if e["kind"] == "request_settled":
            e["outcome"] = "NO_RESPONSE"


def unsettle(lines: Lines) -> None:
    """The requester forgets the first request: it never settles, past its deadline."""
    lines.pop(where(lines, "request_settled"))


def no_reply_node(lines: Lines) -> None:
    """A request without replyNodeId whose response went out anyway, to a guess."""
    e = lines[where(lines, "outbound_settled", lambda e: response(e) and e["state"] == "PUBLISHED")]
    req = lines[where(lines, "inbound_admitted",
                      lambda r: request(r) and r.get("requestId") == e["requestId"])]
    req["replyNodeId"] = None


def never_delivered(lines: Lines) -> None:
    sent = lines[where(lines, "outbound_settled", lambda e: request(e) and e["state"] == "PUBLISHED")]
    lines[:] = [e for e in lines if not (e["kind"] in ("inbound_admitted", "inbound_dropped")
                                         and e.get("messageId") == sent["messageId"])]


def watched_while_relaying(lines: Lines) -> None:
    i = where(lines, "relay_sent")
    sent = lines[i]
    lines.insert(i, {"seq": 0, "tMs": sent["tMs"], "node": sent["node"],
                     "kind": "subscriber_attached", "subscriberId": "tab-x",
                     "conversationId": sent["conversationId"]})


def lost_while_paused(lines: Lines) -> None:
    i = where(lines, "gate_open_sent")
    gate = lines[i]
    lines.insert(i + 1, {"seq": 0, "tMs": gate["tMs"], "node": gate["node"],
                         "kind": "instance_state", "processInstId": gate["processInstId"],
                         "taskId": None, "status": "FAILED", "previous": "PAUSED",
                         "reason": "interrupted", "version": None, "cause": "INTERRUPTED"})


def forget_gate(lines: Lines) -> None:
    """The gate store never had one gate: nothing of it on the orchestrator's side."""
    gate = lines[where(lines, "gate_opened")]["gateId"]
    lines[:] = [e for e in lines if not (e.get("gateId") == gate and e["node"] == "orch-1")
                and not (e["kind"] == "human_clicked" and e["gateId"] == gate)]


def second_decision(lines: Lines) -> None:
    """The gate store decides a gate again (after a restart, say) the other way."""
    i = where(lines, "gate_decided")
    again = copy.deepcopy(lines[i])
    again["decision"] = "reject" if again["decision"] == "approve" else "approve"
    lines.insert(i + 1, again)


def expired_undecided(lines: Lines) -> None:
    gate = lines[where(lines, "gate_expired")]["gateId"]
    lines[:] = [e for e in lines if e.get("gateId") != gate
                or e["kind"] in ("gate_open_sent", "gate_opened")]


def completed_despite_failed_subflow(lines: Lines) -> None:
    sub = lines[where(lines, "subflow_finished", lambda e: not e["ok"])]["processInstId"]
    i = where(lines, "instance_state", lambda e: e["processInstId"] == sub
              and e["status"] == "FAILED")
    lines[i] = {**lines[i], "status": "COMPLETED", "cause": "COMPLETED"}


def completed_after_reject(lines: Lines) -> None:
    """A rejected gate's instance goes on and completes, as if approved."""
    r = lines[where(lines, "gate_resumed", lambda e: e["decision"] != "approve")]
    i = where(lines, "instance_state", lambda e: e["processInstId"] == r["processInstId"]
              and e["seq"] > r["seq"])
    lines[i] = {**lines[i], "status": "COMPLETED", "cause": "COMPLETED"}


def ended_twice(lines: Lines) -> None:
    """A restart finds an instance still RUNNING on disk, its end never persisted, and ends
    it a second time."""
    e = lines[where(lines, "instance_state", lambda e: e["status"] in ("COMPLETED", "FAILED"))]
    lines.append({**e, "tMs": lines[-1]["tMs"], "status": "FAILED", "previous": "RUNNING",
                  "cause": "INTERRUPTED", "reason": "interrupted: the node restarted mid-step"})


def answered_off_the_scheme(lines: Lines) -> None:
    """The answer to a request whose replyNodeId held a '/' went out on the topic it spelled."""
    a = lines[where(lines, "attack_sent", lambda e: e["how"] == "reply_slash")]
    e = lines[where(lines, "outbound_settled", lambda e: response(e)
                    and e["requestId"] == a["requestId"])]
    e["state"], e["topic"] = "PUBLISHED", "ooder/node/exec-3/x/inbox"


def never_announced_again(lines: Lines) -> None:
    """The node whose announcement was cleared stays unannounced: online, unknown."""
    clear = lines[where(lines, "directory_updated", lambda e: bool(e.get("cleared")))]
    lines[:] = [e for e in lines if not (e["kind"] == "directory_updated" and e["seq"] > clear["seq"]
                                         and e["nodeId"] == clear["nodeId"] and e["online"])]


def streamed_elsewhere(lines: Lines) -> None:
    """A task's flow streams into a conversation its request did not name."""
    asked = {e["requestId"] for e in lines if e["kind"] == "request_sent"}
    e = lines[where(lines, "relay_frame", lambda e: e["taskId"] in asked)]
    e["conversationId"], e["stream"] = "elsewhere", "elsewhere|" + e["stream"].split("|")[1]


def never_flushed_again(lines: Lines) -> None:
    """A node flushes its ledger once and never again (its flush timer not re-armed)."""
    first = lines[where(lines, "ledger_flushed")]
    lines[:] = [e for e in lines if not (e["kind"] == "ledger_flushed" and e["node"] == first["node"]
                                         and e["seq"] > first["seq"])]


def to_its_own_inbox(lines: Lines) -> None:
    e = lines[where(lines, "outbound_settled", lambda e: request(e) and e["state"] == "PUBLISHED")]
    e["targetNodeId"], e["topic"] = e["node"], f"ooder/node/{e['node']}/inbox"


def undeliverable_though_known(lines: Lines) -> None:
    """A request the directory could resolve is called undeliverable all the same."""
    i = where(lines, "outbound_settled", lambda e: request(e) and e["state"] == "PUBLISHED")
    e = lines[i]
    lines.insert(i + 1, {"seq": 0, "tMs": e["tMs"], "node": e["node"], "kind": "warning",
                         "what": "undeliverable", "messageId": e["messageId"] + "-x",
                         "toAgentId": e["toAgentId"], "reason": "no directory entry"})


def false_warning(lines: Lines) -> None:
    """A node warns of a settlement for a message it never sent (its outbox lost track)."""
    i = where(lines, "outbound_settled")
    lines.insert(i + 1, {"seq": 0, "tMs": lines[i]["tMs"], "node": lines[i]["node"],
                         "kind": "warning", "what": "publish settled for an unknown message",
                         "messageId": "m-lost", "ok": True})


def false_duplicate(lines: Lines) -> None:
    """A node drops a request it never had as a DUPLICATE (its ledger answered wrongly)."""
    i = where(lines, "inbound_admitted", request)
    e = lines[i]
    lines[i] = {"seq": e["seq"], "tMs": e["tMs"], "node": e["node"], "kind": "inbound_dropped",
                "reason": "DUPLICATE", "detail": "already in the inbound ledger",
                "topic": f"ooder/node/{e['node']}/inbox", "messageId": e["messageId"],
                "messageType": "TASK_REQUEST", "fromAgentId": e["fromAgentId"],
                "requestId": e["requestId"], "verdict": "UNSIGNED", "bytes": 100}


def strict_nodes(lines: Lines) -> None:
    for e in lines:
        if e["kind"] == "node_started":
            e["authMode"] = "strict"


def attack_outcome_lost(lines: Lines) -> None:
    a = lines[where(lines, "attack_sent")]
    lines[:] = [e for e in lines if not (e["kind"] in ("inbound_admitted", "inbound_dropped")
                                         and e.get("messageId") == a["messageId"])]


def dishonest_verdict(lines: Lines) -> None:
    a = lines[where(lines, "attack_sent", lambda e: e["honestVerdict"] != "VERIFIED")]
    o = lines[where(lines, "inbound_admitted", lambda e: e.get("messageId") == a["messageId"])]
    o["verdict"] = "VERIFIED"


def raised(lines: Lines) -> None:
    """A node's process dies of an exception of its own mid-run."""
    i = where(lines, "task_executed")
    lines.insert(i + 1, {"seq": 0, "tMs": lines[i]["tMs"], "node": lines[i]["node"],
                         "kind": "node_crashed", "faultIndex": None, "how": "raised",
                         "lostWrites": None, "error": "KeyError('x')"})


def stolen_client_id(lines: Lines) -> None:
    e = lines[where(lines, "mqtt_connected", lambda e: e["node"] == "exec-2")]
    e["clientId"] = "exec-1"


def retried_under_the_same_correlation(lines: Lines) -> None:
    """A requester's retry goes out under its first attempt's Correlation Data."""
    retry = lines[where(lines, "a2m_attempt", lambda e: e["attempt"] == 2)]
    first = lines[where(lines, "a2m_attempt", lambda e: e["opId"] == retry["opId"])]
    retry["correlation"] = first["correlation"]


def pool_answered_no_subscribers(lines: Lines) -> None:
    """The broker answers a pooled request 0x10, as one that cannot route a shared
    subscription on a $ topic does."""
    i = where(lines, "a2m_attempt")
    a = lines[i]
    lines.insert(i + 1, {"seq": 0, "tMs": a["tMs"], "node": a["node"], "kind": "a2m_puback",
                         "opId": a["opId"], "correlation": a["correlation"],
                         "reasonCode": 0x10, "topic": a["topic"]})


def pooled_to_two_members(lines: Lines) -> None:
    """The broker hands one pooled request to the other member of the group as well."""
    i = where(lines, "a2m_request_taken", lambda e: "/pool/" in e["topic"])
    twin = copy.deepcopy(lines[i])
    twin["node"] = next(e["node"] for e in lines if e["kind"] == "a2m_request_taken"
                        and e["node"] != twin["node"])
    lines.insert(i + 1, twin)


def taken_past_its_expiry(lines: Lines) -> None:
    """A request the broker should have dropped reaches its responder when it is back: the
    earliest request that outlived its Message Expiry Interval untaken, taken at the end."""
    taken = {e["correlation"] for e in lines if e["kind"] == "a2m_request_taken"}
    a = next(e for e in lines if e["kind"] == "a2m_attempt" and e["correlation"] not in taken)
    reply = next(e["subscribed"][0] for e in lines if e["kind"] == "executors_registered"
                 and e["node"] == a["node"])
    last = lines[-1]
    lines.insert(len(lines) - 1, {
        "seq": 0, "tMs": last["tMs"], "node": "tax-1", "kind": "a2m_request_taken",
        "topic": a["topic"], "intake": "NEW", "method": a["method"], "taskId": a["taskId"],
        "correlation": a["correlation"], "responseTopic": reply, "qos": 1, "dup": False,
        "retain": False, "packetId": 7})


def malformed_answered_ok(lines: Lines) -> None:
    """The responder answers a request with a non-UUID Task.id as if it were fine."""
    attack = lines[where(lines, "attack_sent", lambda e: e["how"] == "bad_task_id")]
    answer = lines[where(lines, "a2m_replied",
                         lambda e: e["topic"].endswith("/" + attack["messageId"]))]
    answer.update(reply="RESULT", code=None, state="TASK_STATE_COMPLETED")


def refused_for_a_property(case: str) -> Mutation:
    """The valid request of `case` (metadata the profile says changes nothing) is answered
    -32005, as a responder with a whitelist of the binding's properties would."""
    def go(lines: Lines) -> None:
        attack = lines[where(lines, "attack_sent", lambda e: e["how"] == case)]
        for e in lines:
            if e["kind"] == "a2m_replied" and e["topic"].endswith("/" + attack["messageId"]):
                e.update(reply="ERROR", code=-32005, state=None)
    return go


def answered_after_the_end(lines: Lines) -> None:
    """A task answered COMPLETED is answered WORKING afterwards (a retry, a GetTask)."""
    i = where(lines, "a2m_replied", lambda e: e.get("state") == "TASK_STATE_COMPLETED")
    lines.insert(i + 1, {**copy.deepcopy(lines[i]), "state": "TASK_STATE_WORKING"})


def task_denied(lines: Lines) -> None:
    """The first GetTask of a task the responder had answered is answered 'task not
    found' (a table that forgets, a GetTask never implemented)."""
    get = lines[where(lines, "a2m_request_taken", lambda e: e.get("method") == "GetTask")]
    i = where(lines, "a2m_replied", lambda e: e["correlation"] == get["correlation"])
    lines[i].update(reply="ERROR", code=-32001, state=None)


def context_refused(lines: Lines) -> None:
    """The request that opened the first context is answered -32602 (a responder that
    knows only the contexts it made)."""
    first = lines[where(lines, "a2m_request_taken", lambda e: e.get("intake") == "NEW"
                        and e.get("contextId") is not None)]
    i = where(lines, "a2m_replied", lambda e: e["correlation"] == first["correlation"])
    lines[i].update(reply="ERROR", code=-32602, state=None)


def sent_again_after_its_answer(lines: Lines) -> None:
    """The first request published once more, under new Correlation Data, after its reply."""
    i = where(lines, "a2m_attempt")
    reply = where(lines, "a2m_reply_taken", lambda e: e.get("opId") == lines[i]["opId"])
    lines.insert(reply + 1, {**copy.deepcopy(lines[i]), "attempt": 2, "correlation": "ab12",
                             "tMs": lines[reply]["tMs"]})


def expired_token_run(lines: Lines) -> None:
    """A request whose token had expired runs: its responder executes its Task.id (and
    answers it as if it were fine)."""
    attack = lines[where(lines, "attack_sent", lambda e: e["how"] == "expired_token")]
    i = where(lines, "a2m_replied", lambda e: e["topic"].endswith("/" + attack["messageId"]))
    lines[i].update(reply="RESULT", code=None, state="TASK_STATE_WORKING")
    lines.insert(i, {"seq": 0, "tMs": lines[i]["tMs"], "node": attack["targetNodeId"],
                     "kind": "task_executed", "taskId": attack["requestId"],
                     "agentId": attack["toAgentId"], "conversationId": None,
                     "messageId": "00"})


def retry_without_its_token(lines: Lines) -> None:
    """A retry goes out without the token its first attempt carried."""
    alter("a2m_attempt", lambda e: e["attempt"] > 1, bearer=False)(lines)


def follow_up_to_the_pool(lines: Lines) -> None:
    """A GetTask for a pooled task goes to the pool after a reply named its member."""
    alter("a2m_attempt", lambda e: e["method"] == "GetTask",
          topic="$a2a/v1/request/acme/billing/pool/p1")(lines)


def handover_lost_its_reply_path(lines: Lines) -> None:
    """The delegate took a request its card owner handed over without its Correlation Data
    (a forward that dropped it): dropped, nothing to answer on."""
    handed = lines[where(lines, "a2m_request_taken", lambda e: e["intake"] == "HANDED_OVER")]
    alter("a2m_request_taken", lambda e: e["node"] == "tax-1w"
          and e.get("correlation") == handed["correlation"],
          correlation=None, responseTopic=None, intake="DROPPED")(lines)


RECIPES: dict[str, tuple[str, Mutation]] = {
    # task handover (a2a_handover)
    "handed_over_replies_name_their_agent": ("a2a_handover", alter(
        "a2m_reply_taken", lambda e: e.get("responderAgentId") == "billing.tax1w",
        responderAgentId=None)),
    "handed_over_requests_reach_their_agent": ("a2a_handover", handover_lost_its_reply_path),
    "malformed_requests_refused": ("a2a_malformed", malformed_answered_ok),
    "follow_ups_go_to_the_named_agent": ("a2a_pool", follow_up_to_the_pool),
    # bearer tokens (a2a_oauth)
    "unauthorized_requests_refused": ("a2a_oauth", expired_token_run),
    "requests_carry_a_token": ("a2a_oauth", retry_without_its_token),
    # what the profile relies on of its broker (a2a_broker)
    "pooled_requests_reach_one_member": ("a2a_pool", pooled_to_two_members),
    "expired_requests_not_delivered": ("a2a_expiry", taken_past_its_expiry),
    # the A2A-over-MQTT profile (a2a_requests, a2a_replies)
    "every_operation_settles": ("a2a_quickstart", drop("a2m_settled")),
    "retries_keep_the_profile": ("a2a_restart", retried_under_the_same_correlation),
    "no_answer_lost": ("a2a_quickstart", alter("a2m_settled", outcome="NO_REPLY")),
    "replies_answer_a_request": ("a2a_quickstart", alter("a2m_replied", correlation="00")),
    "refused_requests_run_nothing": ("a2a_quickstart", alter("a2m_request_taken",
                                                             intake="REFUSED", code=-32602)),
    "pooled_requests_reach_the_pool": ("a2a_pool", pool_answered_no_subscribers),
    "pooled_replies_name_their_responder": ("a2a_pool", alter("a2m_reply_taken",
                                                              responderAgentId=None)),
    # multi-turn and task states (a2a_requests, a2a_replies)
    "contexts_are_kept": ("a2a_multiturn", alter("a2m_replied", lambda e: bool(
        e.get("contextId")) and e["state"] == "TASK_STATE_COMPLETED", contextId="ctx-other")),
    "ended_tasks_stay_ended": ("a2a_multiturn", answered_after_the_end),
    # a request whose token was good answered as an invalid request (its token refused)
    "good_tokens_honoured": ("a2a_oauth", alter(
        "a2m_replied", lambda e: e["reply"] == "RESULT" and "nemesis" not in e["topic"],
        reply="ERROR", code=-32600)),
    # a malformed envelope dropped as not the node's to take, not as MALFORMED
    "malformed_envelopes_refused": ("malformed_envelopes", alter(
        "inbound_dropped", lambda e: e["reason"] == "MALFORMED" and e.get("messageId"),
        reason="NOT_MINE")),
    # the agent failed a task the responder then reported COMPLETED
    "tasks_end_as_their_agent_did": ("a2a_quickstart", alter(
        "agent_answered", lambda e: e["ok"], ok=False)),
    # a request refused -32004 while the responder's one task ran, started as a new task
    "capacity_kept": ("a2a_binding_errors", alter(
        "a2m_request_taken", lambda e: e.get("code") == -32004, intake="NEW", code=None,
        reason=None)),
    "known_tasks_stay_known": ("a2a_multiturn", task_denied),
    "new_contexts_are_welcome": ("a2a_multiturn", context_refused),
    "nothing_settled_twice": ("a2a_quickstart", repeat("request_settled")),
    # an operation's end reported 20 s after the status that ended its stream
    "final_statuses_end_the_operation": ("a2a_quickstart", alter(
        "a2m_settled", tMs=lambda e: e["tMs"] + 20_000)),
    # a refusal heard 12 s later than it was: after the fault that refused it healed
    "refusals_have_a_cause": ("a2a_publish_refused", alter(
        "a2m_puback", lambda e: e["reasonCode"] >= 0x80, tMs=lambda e: e["tMs"] + 12_000)),
    # a request taken without the Response Topic its requester published it with
    "requests_keep_their_reply_path": ("a2a_quickstart", alter(
        "a2m_request_taken", responseTopic=None)),
    # an operation whose publishes were refused, given up after its first attempt
    "refused_publishes_retried": ("a2a_publish_refused", alter(
        "a2m_settled", lambda e: e["outcome"] == "NOT_SENT", attempts=1)),
    # a reply carrying an unknown a2a- property ended nothing for 20 s
    "replies_with_unknown_properties_taken": ("a2a_reply_extras", alter(
        "a2m_settled", tMs=lambda e: e["tMs"] + 20_000)),
    "unknown_properties_ignored": ("a2a_bad_properties",
                                   refused_for_a_property("prop:a2a-unknown:present")),
    "unknown_artifact_modes_answered_in_json": ("a2a_bad_properties", refused_for_a_property(
        "prop:a2a-artifact-mode:unknown")),
    # a stalled stream with no GetTask after it
    "stalled_streams_recovered_with_get_task": ("a2a_stream_stall", drop(
        "a2m_attempt", lambda e: e["method"] == "GetTask")),
    # the requester subscribed (and so names) a reply topic ending in its node id
    "reply_suffixes_resist_collisions": ("a2a_quickstart", alter(
        "executors_registered", lambda e: not e["agents"],
        subscribed=lambda e: [f.rsplit("/", 1)[0] + "/r-client-1" for f in e["subscribed"]])),
    "pool_members_share_a_group": ("a2a_pool", alter(
        "executors_registered", lambda e: e["node"] == "tax-2",
        subscribed=lambda e: [f.replace("$share/a2a.acme.billing.p1/", "$share/g2/")
                              for f in e["subscribed"]])),
    "requests_go_to_request_topics": ("a2a_quickstart", alter(
        "a2m_attempt", topic="$a2a/v1/request/acme/billing")),
    "correlations_are_the_requesters_own": ("a2a_quickstart", alter(
        "a2m_attempt", correlation=lambda e: e["taskId"].encode().hex())),
    "requests_carry_a_reply_path": ("a2a_quickstart", alter("a2m_attempt", taskId="task-1")),
    "no_request_again_after_a_reply": ("a2a_quickstart", sent_again_after_its_answer),
    "turns_keep_the_task_and_context": ("a2a_multiturn", alter(
        "a2m_attempt", lambda e: ".t2" in e["opId"], contextId="ctx-other")),
    # duplicate_execution, task_lifecycle
    "executed_once": ("quickstart", repeat("task_executed")),
    "admitted_once": ("quickstart", repeat("inbound_admitted")),
    "legal_transitions": ("quickstart", alter("task_state", lambda e: e["state"] == "COMPLETED",
                                              previous="SUBMITTED")),
    "reaches_terminal": ("quickstart", drop_terminal_state),
    "session_kept_as_promised": ("partition", alter("mqtt_connected",
                                                    lambda e: e["sessionPresent"],
                                                    sessionPresent=False)),
    "redelivery_marked_dup": ("broker_redelivery", alter("inbound_dropped",
                                                         lambda e: e.get("dup") is True,
                                                         dup=False)),
    "times_out_on_time": ("stuck_agent", drop("task_state", lambda e: e["state"] == "TIMEOUT")),
    "ended_task_answered": ("process_restart", interrupted_unanswered),
    "branches_merged_in_branch_order": ("context", merged_out_of_branch_order),
    "refusal_leaves_no_trace": ("attacks_ledger", poisoned_ledger),
    "overlap_accepts_the_replaced_key": ("key_rotation", refused_in_the_overlap),
    "stale_either_way": ("clock_ahead", future_let_in),
    "decided_again_is_already_decided": ("gate_decision_redelivered", alter(
        "gate_decision_received", lambda e: e["status"] == "ALREADY_DECIDED",
        status="NOT_WAITING")),
    "routed_to_a_listed_entry": ("quickstart", alter("outbound_settled", request,
                                                     targetNodeId="exec-9")),
    "gives_up_a_silent_client": ("partition", lambda lines: lines.__setitem__(slice(None), [
        e for e in lines if not (e["kind"] == "directory_updated" and e["nodeId"] == "exec-2"
                                 and not e["online"])])),
    "redelivers_the_same_packet": ("broker_redelivery", alter(
        "inbound_dropped", lambda e: e.get("dup") is True,
        packetId=lambda e: e["packetId"] + 1000, dup=False)),
    "expired_session_not_resumed": ("session_expired", alter(
        "mqtt_connected", lambda e: e["node"] == "exec-1" and e["tMs"] > 10_000,
        sessionPresent=True)),
    "connects_under_its_client_id": ("quickstart", alter("node_started", clientId="orch-1-x")),
    "driven_requests_get_through": ("quickstart", nothing_gets_through),
    # silent_loss
    "settles_once": ("quickstart", unsettle),
    "no_response_explained": ("quickstart", alter("request_settled", outcome="NO_RESPONSE",
                                                  latencyMs=10**7)),   # at a timeout
    "no_response_not_early": ("quickstart", alter("request_settled", outcome="NO_RESPONSE")),
    "drops_are_true": ("quickstart", false_duplicate),
    # targeted_delivery
    "published_to_a_node": ("quickstart", alter("outbound_settled", request,
                                                topic="ooder/node/elsewhere/inbox")),
    "own_messages_stay_local": ("quickstart", to_its_own_inbox),
    "consumed_by_addressee": ("quickstart", alter("inbound_admitted", request,
                                                  targetNodeId="exec-9")),
    "no_foreign_namespace": ("quickstart", alter("inbound_admitted", request,
                                                 toAgentId="fin.helpful")),
    # reply_routing
    "response_echoes_request": ("quickstart", alter("outbound_settled", response, requestId=None)),
    "response_to_reply_node": ("quickstart", alter("outbound_settled", response,
                                                   targetNodeId="exec-2")),
    "missing_reply_node_explicit": ("quickstart", no_reply_node),
    # qos1_delivery
    "published_reaches_addressee": ("quickstart", never_delivered),
    # relay_integrity, relay_locality
    "frames_carry_the_flow": ("quickstart", alter("relay_frame", text="tampered ")),
    "relayed_frames_accounted": ("quickstart", drop("relay_accepted")),
    "seqs_are_one_to_n": ("quickstart", alter("relay_frame", streamSeq=lambda e: e["streamSeq"] + 5)),
    "gaps_and_acceptances_consistent": ("quickstart", repeat("relay_accepted")),
    "gaps_wait_the_window": ("publish_failure", alter("relay_gap", tMs=lambda e: e["tMs"] - 450)),
    "gaps_declared_when_the_window_ends": ("publish_failure", alter(
        "relay_gap", tMs=lambda e: e["tMs"] + 450)),
    "delivered_in_order_once": ("quickstart", repeat("relay_delivered")),
    "delivered_to_its_conversation": ("quickstart", alter("relay_delivered",
                                                          subscriberConversation="c-other")),
    "trust_labels": ("quickstart", alter("relay_delivered", trust=lambda e: "verified"
                                         if e["trust"] == "claimed" else "claimed")),
    "local_first": ("quickstart", watched_while_relaying),
    # gate_integrity
    "resumes_the_gates_instance": ("gates", alter("gate_resumed", processInstId="pi-other")),
    "resumes_with_the_decision": ("gates", alter("gate_resumed", decision=lambda e: "reject"
                                                 if e["decision"] == "approve" else "approve")),
    "resumes_once": ("gates", repeat("gate_resumed")),
    "turned_down_ends_the_instance": ("gates", completed_after_reject),
    "decided_once": ("gates", second_decision),
    "paused_survives_restart": ("gates", lost_while_paused),
    "open_reaches_gate_store": ("gates", forget_gate),
    "timeout_policy_applied": ("gates", expired_undecided),
    "expires_on_time": ("gates", alter("gate_expired", tMs=lambda e: e["tMs"] + 10_000)),
    "decision_resumes": ("gates", drop("gate_resumed")),
    "every_click_answered": ("gates", drop("gate_already_decided")),
    "decision_acknowledged": ("gates", drop("gate_acked", lambda e: not e["duplicate"])),
    # context_isolation
    "fresh_context_is_empty": ("gates", alter("instance_started", context=lambda e: {
        **e["context"], "facts": {"x": "pi-other/x#1"}})),
    "attempt_starts_from_its_snapshot": ("gates", alter("step_started",
                                                        lambda e: e["attempt"] == 1,
                                                        baseDigest="0" * 16)),
    "retry_starts_from_pre_attempt_snapshot": ("gates", alter(
        "step_started", lambda e: e["attempt"] > 1, baseDigest="1" * 16)),
    "version_chain_unbroken": ("gates", alter("context_merged", lambda e: e["version"] > 1,
                                              parentSnapshotId="pi-x:main:v0")),
    "failed_work_never_merged": ("gates", alter("step_finished",
                                                lambda e: e["ok"] and e["scope"] == "main",
                                                ok=False)),
    "merge_is_snapshot_plus_writes": ("gates", alter(
        "context_merged", lambda e: e["attempt"] > 1, context=lambda e: {
            **e["context"], "log": [*e["context"]["log"], f"{e['processInstId']}/x#1/draft"]})),
    "no_values_of_another_instance": ("gates", alter("context_merged", context=lambda e: {
        **e["context"], "log": [*e["context"]["log"], "pi-zz/a"]})),
    "failure_fails_the_instance": ("gates", completed_despite_failed_subflow),
    "ends_once": ("context", ended_twice),
    "ends_with_its_task": ("stuck_agent", drop("instance_state",
                                               lambda e: e["cause"] == "TASK_ENDED")),
    # auth_admission
    "mode_keeps_the_matrix": ("attacks_audit", strict_nodes),
    "audit_records_what_it_admits": ("attacks_audit", lambda lines: lines.__setitem__(
        slice(None), [e for e in lines if e["kind"] != "auth_verdict"])),
    "attack_has_an_outcome": ("attacks_audit", attack_outcome_lost),
    "verdict_is_honest": ("attacks_audit", dishonest_verdict),
    # directory_liveness, deployment
    "takeover_publishes_no_live_will": ("duplicate_client_id", alter("takeover_will", will="new")),
    "no_mute_receiver": ("quickstart", alter("executors_registered", registered=0)),
    "registers_all_expected": ("quickstart", alter("executors_registered",
                                                   expected=lambda e: e["expected"] + 1)),
    "roster_of_own_namespace": ("quickstart", alter("roster_loaded", agents=lambda e: [
        *e["agents"], "zz.foreign"])),
    "undeliverable_only_when_unknown": ("quickstart", undeliverable_though_known),
    "announced_again_after_a_clear": ("directory_wipe", never_announced_again),
    "ledger_flushed_on_time": ("quickstart", never_flushed_again),
    "streams_of_their_tasks_conversation": ("publish_failure", streamed_elsewhere),
    "unique_client_ids": ("quickstart", stolen_client_id),
    # robustness
    "never_raises": ("quickstart", raised),
    "agents_never_raise": ("a2a_quickstart", raised),
    "warnings_are_true": ("quickstart", false_warning),
    "hostile_input_refused": ("hostile_input", answered_off_the_scheme),
    "topics_well_formed": ("quickstart", alter("outbound_settled",
                                               lambda e: e["state"] == "PUBLISHED",
                                               topic="ooder/node/+/inbox")),
}

#: Rules that can only say "undecided": their recipe must make them say so.
UNDECIDED_ONLY = {"reaches_terminal"}

OWNER = {r.id: c.name for c in checkers().values() for r in c.rules}


def renumbered(lines: Lines) -> Lines:
    return [{**e, "seq": i + 1} for i, e in enumerate(lines)]


def test_every_rule_has_a_recipe() -> None:
    """Here on simulated histories; the wire's rules on a live one (the simulator has no
    wire to tap), in tests/live/test_wire_tap.py."""
    from tests.live.test_a2a_live import A2A_WIRE_MUTATIONS, REQUESTER_MUTATIONS
    from tests.live.test_a2a_requester_clauses import CLAUSE_MUTATIONS
    from tests.live.test_wire_tap import ATTACK_MUTATIONS, MUTATIONS
    wire = {rule for _mutate, rule in [*MUTATIONS.values(), *ATTACK_MUTATIONS.values(),
                                       *REQUESTER_MUTATIONS.values()]}
    wire |= {rule for _scenario, _mutate, rule in CLAUSE_MUTATIONS.values()}
    wire |= {rule for _mutate, _checker, rule in A2A_WIRE_MUTATIONS.values()}
    # Parley's, on recorded live histories of its library (it has no simulated node)
    from tests.checks.test_parley_rules import MUTATIONS as PARLEY_MUTATIONS
    wire |= set(PARLEY_MUTATIONS)
    assert set(RECIPES) | wire == set(OWNER)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_unmutated_histories_are_as_their_scenarios_expect(runs: dict[str, Lines],
                                                                scenario: str) -> None:
    from bench.spec.scenario import SCENARIOS as FOLDER
    from bench.spec.scenario import load_scenario
    history = from_lines(runs[scenario])
    verdicts = judge(history)
    expect = load_scenario(FOLDER / f"{scenario}.toml").expect | not_applicable(history, verdicts)
    assert all(v.value.value == expect.get(v.name, "true") for v in verdicts), \
        [(v.name, v.value, v.counterexamples[:1]) for v in verdicts
         if v.value.value != expect.get(v.name, "true")]


@pytest.mark.parametrize("rule_id", sorted(RECIPES))
def test_rule_catches_its_mutation(runs: dict[str, Lines], rule_id: str,
                                   tmp_path: Path) -> None:
    """In memory and as a run is judged: read from its file, a global directory's
    announcements streamed through folds, not kept."""
    scenario, mutate = RECIPES[rule_id]
    lines = copy.deepcopy(runs[scenario])
    mutate(lines)
    lines = renumbered(lines)
    checker = checkers()[OWNER[rule_id]]
    v = checker(from_lines(lines))
    found = v.rules[rule_id]
    if rule_id in UNDECIDED_ONLY:
        assert v.value is Value.UNKNOWN and found["unknown"] > 0, v.rules
    else:
        assert v.value is Value.FALSE and found["violations"] > 0, (v.rules, v.counterexamples[:2])
        assert any(c["rule"] == rule_id for c in v.counterexamples)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(dumps_line(line) + "\n" for line in lines))
    assert checker(read_for_judging(path)).to_json() == v.to_json()


@pytest.mark.parametrize(("to_partitioned", "expected"), [(True, Value.TRUE),
                                                          (False, Value.FALSE)])
def test_an_outage_explains_only_the_requests_it_touches(runs: dict[str, Lines],
                                                         to_partitioned: bool,
                                                         expected: Value) -> None:
    """During exec-2's partition, a request to exec-2 that gets no response is explained;
    one to exec-1, which was never cut off, is lost silently (a node that drops requests
    while a peer is out must not hide behind the peer's fault)."""
    lines = copy.deepcopy(runs["partition"])
    start = lines[where(lines, "fault_start")]["tMs"]
    end = lines[where(lines, "fault_healed")]["tMs"]
    target = {e["requestId"]: e["targetNodeId"] for e in lines
              if e["kind"] == "outbound_settled" and e.get("messageType") == "TASK_REQUEST"}
    sent = {e["requestId"]: e for e in lines if e["kind"] == "request_sent"}
    wanted = "exec-2" if to_partitioned else "exec-1"
    i = where(lines, "request_settled", lambda e: e["outcome"] == "COMPLETED"
              and start < sent[e["requestId"]]["tMs"] < end
              and target.get(e["requestId"]) == wanted)
    lines[i].update(outcome="NO_RESPONSE", latencyMs=sent[lines[i]["requestId"]]["timeoutMs"])
    v = checkers()["silent_loss"](from_lines(renumbered(lines)))
    assert v.value is expected, v.rules


def test_run_lines_are_a_real_run(tmp_path: Path) -> None:
    """The recipes mutate real histories, not hand-made ones."""
    lines = run_lines(tmp_path, "quickstart")
    assert lines[0]["kind"] == "run_started" and len(lines) > 1000


def test_a_sub_flow_recorded_against_what_its_steps_did_fails_the_instance_rule(
        runs: dict[str, Lines]) -> None:
    lines = copy.deepcopy(runs["gates"])
    alter("subflow_finished", lambda e: e["ok"], ok=False)(lines)
    v = checkers()["context_isolation"](from_lines(renumbered(lines)))
    assert any(c["rule"] == "failure_fails_the_instance" and "is recorded as failed" in c["why"]
               for c in v.counterexamples), v.counterexamples[:2]


def test_an_instance_failed_with_a_retry_left_fails_the_instance_rule(
        runs: dict[str, Lines]) -> None:
    """The node gave up one attempt early: its last StepStarted still had a retry left."""
    lines = copy.deepcopy(runs["context"])
    end = lines[where(lines, "instance_state", lambda e: e["cause"] == "STEP_FAILED")]
    i = max(i for i, e in enumerate(lines) if e["kind"] == "step_started"
            and e["processInstId"] == end["processInstId"] and e["seq"] < end["seq"])
    lines[i]["retries"] = lines[i]["attempt"]
    v = checkers()["context_isolation"](from_lines(renumbered(lines)))
    assert any("a retry was left" in c["why"] for c in v.counterexamples), v.counterexamples[:2]


def test_a_clear_recorded_as_unknown_though_known_fails_the_undeliverable_rule(
        runs: dict[str, Lines]) -> None:
    """A node's record of a cleared entry says it never had it, while it did."""
    lines = copy.deepcopy(runs["directory_wipe"])
    alter("directory_updated", lambda e: bool(e.get("cleared")), wasKnown=False)(lines)
    v = checkers()["directory_liveness"](from_lines(lines))
    assert any(c["rule"] == "undeliverable_only_when_unknown" and "was_known=False" in c["why"]
               for c in v.counterexamples), v.counterexamples[:2]


def test_a_task_lost_in_a_restart_fails_the_reaches_terminal_rule(
        runs: dict[str, Lines]) -> None:
    """The restarted node never mentions a task it was running when it crashed (it did
    not persist it): a violation, not an unfinished task."""
    lines = copy.deepcopy(runs["process_restart"])
    drop("task_state", lambda e: e.get("error") == "interrupted")(lines)
    v = checkers()["task_lifecycle"](from_lines(lines))
    assert v.value is Value.FALSE and any("lost with the process" in c["why"]
                                          for c in v.counterexamples), v.counterexamples[:2]


def test_a_task_timed_out_before_its_timeout_fails_the_watchdog_rule(
        runs: dict[str, Lines]) -> None:
    """A task ended TIMEOUT long before its node's 60 s (a watchdog armed off by ten)."""
    lines = copy.deepcopy(runs["quickstart"])
    alter("task_state", lambda e: e["state"] == "COMPLETED", state="TIMEOUT")(lines)
    v = checkers()["task_lifecycle"](from_lines(lines))
    assert any(c["rule"] == "times_out_on_time" and "its timeout is 60000 ms" in c["why"]
               for c in v.counterexamples), v.counterexamples[:2]


def test_a_step_started_after_its_task_timed_out_fails_the_instance_rule(
        runs: dict[str, Lines]) -> None:
    """The watchdog ended the task, yet its instance went on to run another step."""
    lines = copy.deepcopy(runs["stuck_agent"])
    end = where(lines, "task_state", lambda e: e["state"] == "TIMEOUT" and any(
        s["kind"] == "instance_started" and s["taskId"] == e["taskId"] for s in lines))
    task = lines[end]["taskId"]
    step = copy.deepcopy(lines[where(lines, "step_started", lambda e: e["taskId"] == task)])
    lines.insert(end + 1, {**step, "tMs": lines[end]["tMs"], "attempt": step["attempt"] + 1})
    v = checkers()["context_isolation"](from_lines(renumbered(lines)))
    assert any(c["rule"] == "ends_with_its_task" and "started after its task" in c["why"]
               for c in v.counterexamples), v.counterexamples[:2]


def test_a_task_whose_end_the_kill_cut_from_the_journal_is_not_called_lost(
        runs: dict[str, Lines]) -> None:
    """Seen live under load: a task's COMPLETED was committed, then SIGKILL cut its record
    (the journal follows the write). The restarted node reads it back ended and says so in
    tasks_restored: not lost. Without that line it is (the test above)."""
    lines = copy.deepcopy(runs["process_restart"])
    gone = lines[where(lines, "task_state", lambda e: e.get("error") == "interrupted")]
    boot = max(i for i, e in enumerate(lines) if e["kind"] == "tasks_restored"
               and e["node"] == gone["node"] and e["seq"] < gone["seq"])
    lines.remove(gone)
    lines[boot]["ended"] = sorted([*lines[boot]["ended"], gone["taskId"]])
    v = checkers()["task_lifecycle"](from_lines(lines))
    assert v.rules["reaches_terminal"]["violations"] == 0, v.counterexamples[:2]
    assert v.counts.get("ended_unjournaled_before_the_crash") == 1, v.counts


def test_the_clean_session_defect_fails_the_session_rule(tmp_path: Path) -> None:
    """Seeded defect: a node that reconnects with a clean session (DESIGN §10) finds no
    session after its restart, with nothing in between that lost it."""
    v = checkers()["qos1_delivery"](from_lines(run_lines(tmp_path, "restart", "clean_session")))
    assert v.rules["session_kept_as_promised"]["violations"] > 0, v.rules


def test_a_broker_that_redelivers_without_dup_fails_the_dup_rule(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded defect in the broker: it re-sends the unacknowledged PUBLISHes of a resumed
    session under their packet ids, but with DUP=0 ([MQTT-3.3.1-1] says 1)."""
    from bench.substrates.sim.broker import SimBroker as Broker
    transmit = Broker._transmit
    monkeypatch.setattr(Broker, "_transmit", lambda self, session, conn, msg, pid, dup:
                        transmit(self, session, conn, msg, pid, False))
    v = checkers()["qos1_delivery"](from_lines(run_lines(tmp_path, "broker_redelivery")))
    assert v.rules["redelivery_marked_dup"]["violations"] > 0, v.rules
    assert v.value is Value.FALSE


def test_a_broker_gone_without_a_fault_leaves_no_true_verdict(runs: dict[str, Lines]) -> None:
    """The bench's watch saw the broker go, and no fault did it: every TRUE becomes
    UNKNOWN naming the outage (what followed tested the broker's absence)."""
    lines = copy.deepcopy(runs["quickstart"])
    i = where(lines, "request_sent")
    lines.insert(i, {**lines[i], "kind": "broker_down", "node": "broker",
                     "how": "its process exited with -9", "planned": False})
    for key in ("conversationId", "deadlineMs", "fromAgentId", "messageId", "requestId",
                "timeoutMs", "toAgentId", "taskTimeoutMs"):
        lines[i].pop(key, None)
    verdicts = judge(from_lines(renumbered(lines)))
    assert not [v.name for v in verdicts if v.value is Value.TRUE]
    assert all("the broker went down" in v.note for v in verdicts if v.value is Value.UNKNOWN
               and "nothing to judge" not in v.note)


def test_a_silent_client_with_every_peer_cut_off_too_is_undecided(
        runs: dict[str, Lines]) -> None:
    """Found by explore: a partition of both nodes of a two-node mesh. The broker gave
    them up, but no peer was connected to take in a will, so its absence proves nothing:
    UNKNOWN, not "the broker never gave it up"."""
    lines = copy.deepcopy(runs["partition"])
    i = where(lines, "fault_start", lambda e: e["fault"] == "partition")
    everyone = sorted({e["node"] for e in lines if e["kind"] == "node_started"})
    lines[i] = {**lines[i], "params": {**lines[i]["params"], "nodes": everyone}}
    lines[:] = [e for e in lines if not (e["kind"] == "directory_updated" and not e["online"])]
    v = checkers()["deployment"](from_lines(renumbered(lines)))
    found = v.rules["gives_up_a_silent_client"]
    assert found["violations"] == 0 and found["unknown"] > 0, v.rules
    assert "no_peer_connected_to_see_the_will" in str(v.to_json()), v.to_json()


def test_a_will_that_comes_only_with_the_heal_is_no_give_up(runs: dict[str, Lines]) -> None:
    """Seen live on amqtt 0.12 (a clean clone's CI, 2026-12-05): the broker never timed the
    silent node out, the heal reset its connection 17 s in, and the will that reset made
    the broker publish reached the peers in the millisecond the heal was journaled — inside
    the fault's window, so the rule counted it a give-up. A will later than the bound is
    none: the simulated Mosquitto's will, moved to just before the heal, is FALSE."""
    lines = copy.deepcopy(runs["partition"])
    start = lines[where(lines, "fault_start", lambda e: e["fault"] == "partition")]
    healed = lines[where(lines, "fault_healed", lambda e: e["faultIndex"] == start["faultIndex"])]
    v = checkers()["deployment"](from_lines(lines))
    assert v.rules["gives_up_a_silent_client"]["violations"] == 0, v.rules
    wills = [e for e in lines if e["kind"] == "directory_updated" and e["nodeId"] == "exec-2"
             and not e["online"] and start["tMs"] <= e["tMs"] <= healed["tMs"]]
    assert wills and all(w["tMs"] - start["tMs"] < 15_000 for w in wills), wills
    for w in wills:
        lines.remove(w)
        w["tMs"] = healed["tMs"]
    at = lines.index(healed)
    lines[at:at] = wills
    v = checkers()["deployment"](from_lines(renumbered(lines)))
    assert v.rules["gives_up_a_silent_client"]["violations"] == 1, v.rules
    assert "did not give it up within 15 s (its will came only" in str(v.to_json())


def test_a_settlement_the_kill_cut_from_the_journal_is_not_called_lost(tmp_path: Path) -> None:
    """Seen live with process nodes: the requester committed a request's settlement, then
    SIGKILL cut its record (the journal follows the write); after the restart the response
    came again and was 'already settled'. The restarted node reads the settlement back
    and says so in requests_restored: settled, with its outcome. Without that, a request
    that never settled is still FALSE."""
    from bench.metrics import compute
    lines = run_lines(tmp_path, "streaming_home_restart")
    crash = next(e for e in lines if e["kind"] == "node_crashed" and e["node"] == "orch-1")
    boot = where(lines, "requests_restored", lambda e: e["node"] == "orch-1"
                 and e["seq"] > crash["seq"])
    restored = lines[boot]["settled"]
    cut = next(e for e in reversed(lines[:lines.index(crash)]) if e["kind"] == "request_settled"
               and e["node"] == "orch-1" and e["requestId"] in restored)
    before = compute(from_lines(lines), 15_000)["outcomes"]
    lines.remove(cut)
    h = from_lines(renumbered(lines))
    v = checkers()["silent_loss"](h)
    assert v.rules["settles_once"]["violations"] == 0, v.counterexamples[:2]
    assert v.counts.get("settled_unjournaled_before_a_crash") == 1, v.counts
    assert compute(h, 15_000)["outcomes"] == before    # counted once, with its outcome
    lines[[e["kind"] for e in lines].index("requests_restored", boot - 1)]["settled"] = {
        k: o for k, o in restored.items() if k != cut["requestId"]}
    v = checkers()["silent_loss"](from_lines(renumbered(lines)))
    assert v.rules["settles_once"]["violations"] == 1, v.rules


def test_a_frozen_node_is_not_late_to_flush_for_the_time_it_was_frozen(tmp_path: Path) -> None:
    """The pause fault freezes exec-2 for 15 s with admissions in its ledger: the flush
    after the thaw is on time (the frozen time does not count). Remove the flushes after
    the thaw and it is late again: the window excuses the freeze, not a dead timer."""
    lines = run_lines(tmp_path, "pause")
    v = checkers()["duplicate_execution"](from_lines(lines))
    assert v.rules["ledger_flushed_on_time"]["violations"] == 0, v.counterexamples[:2]
    healed = next(e for e in lines if e["kind"] == "fault_healed" and e["fault"] == "pause")
    kept = [e for e in lines if not (e["kind"] == "ledger_flushed" and e["node"] == "exec-2"
                                     and e["seq"] > healed["seq"])]
    v = checkers()["duplicate_execution"](from_lines(renumbered(kept)))
    assert v.rules["ledger_flushed_on_time"]["violations"] == 1, v.rules


def test_a_bad_definition_is_judged_except_on_a_node_that_declares_no_process_instances(
        runs: dict[str, Lines]) -> None:
    """hostile_input_refused: a task whose process definition the grammar rules out must end
    FAILED; the one exemption is a node whose node_started declares it runs no process
    instances (to it the payload is opaque)."""
    from bench.protocols.seed.rules.robustness import HOSTILE_REPLY
    lines = copy.deepcopy(runs["hostile_input"])
    a = lines[where(lines, "attack_sent", lambda e: e["how"] not in HOSTILE_REPLY and any(
        x["kind"] == "inbound_admitted" and x["messageId"] == e["messageId"] for x in lines))]
    end = lines[where(lines, "task_state", lambda e: e["taskId"] == a["requestId"]
                      and e["state"] == "FAILED")]
    end["state"], end["error"] = "COMPLETED", None
    checker = checkers()["robustness"]
    v = checker(from_lines(renumbered(lines)))
    assert v.rules["hostile_input_refused"]["violations"] >= 1, v.rules
    for e in lines:
        if e["kind"] == "node_started" and e["node"] == a["targetNodeId"]:
            e["features"] = ["tasks", "relay"]
    v = checker(from_lines(renumbered(lines)))
    assert v.rules["hostile_input_refused"]["violations"] == 0, v.counterexamples
    assert v.counts.get("definition_opaque_to_a_node_without_processes", 0) >= 1


def test_a_v2_signature_that_leaves_the_headers_out_is_caught_on_a_real_history(
        runs: dict[str, Lines]) -> None:
    """tampering_v2: a man in the middle rewrites replyNodeId on v2-signed requests to
    exec-3, and exec-3 refuses them (BAD_SIGNATURE). Recorded as a node whose v2 digest
    leaves the headers out would have — the altered request admitted, VERIFIED — the
    auth checker names it (verdict_is_honest)."""
    lines = copy.deepcopy(runs["tampering_v2"])
    attack = lines[where(lines, "attack_sent", lambda e: e["attack"] == "tamper_headers")]
    i = where(lines, "inbound_dropped", lambda e: e["messageId"] == attack["messageId"]
              and e["node"] == attack["targetNodeId"])
    d = lines[i]
    lines[i] = {"seq": d["seq"], "tMs": d["tMs"], "node": d["node"], "kind": "inbound_admitted",
                "messageId": d["messageId"], "messageType": "TASK_REQUEST",
                "fromAgentId": d["fromAgentId"], "toAgentId": attack["toAgentId"],
                "targetNodeId": d["node"], "requestId": d["requestId"],
                "originNodeId": "orch-1", "replyNodeId": "mitm", "verdict": "VERIFIED",
                "via": "mqtt", "handler": "EXACT", "dup": False, "packetId": d["packetId"],
                "qos": 1, "retain": False}
    v = checkers()["auth_admission"](from_lines(renumbered(lines)))
    assert v.value is Value.FALSE and v.rules["verdict_is_honest"]["violations"] == 1, v.rules


def test_a_retry_later_than_its_backoff_allows_turns_the_retry_rule_false(
        runs: dict[str, Lines]) -> None:
    """retries_keep_the_profile's later half (A2M-RETRY-1: a retry no later than its backoff
    allows, where no fault acted on the requester) on a real history: a2a_restart's first
    retry, moved 3 s later on its record and its clock, is FALSE — the responder's restart
    names another node and excuses nothing; unmoved, the same history is TRUE."""
    lines = copy.deepcopy(runs["a2a_restart"])
    checker = checkers()[OWNER["retries_keep_the_profile"]]
    assert checker(from_lines(renumbered(lines))).rules["retries_keep_the_profile"][
        "violations"] == 0
    e = lines[where(lines, "a2m_attempt", lambda e: e["attempt"] == 2)]
    e["tMs"] += 3_000
    e["sentMs"] += 3_000
    v = checker(from_lines(renumbered(lines)))
    assert v.value is Value.FALSE and v.rules["retries_keep_the_profile"]["violations"] == 1
    assert any("the profile retries within" in c["why"] for c in v.counterexamples)
    # on a substrate whose timers may fire 2 s late (a live run says so in run_started),
    # a retry 1 s past its time is the machine's, 3 s past it the requester's
    started = next(e for e in lines if e["kind"] == "run_started")
    started["timersLateMs"] = 2_000.0
    assert checker(from_lines(renumbered(lines))).value is Value.FALSE
    e["tMs"] -= 2_000
    e["sentMs"] -= 2_000
    assert checker(from_lines(renumbered(lines))).rules["retries_keep_the_profile"][
        "violations"] == 0


def test_a_pool_whose_accepted_requests_reach_no_member_is_false(runs: dict[str, Lines]) -> None:
    """pooled_requests_reach_the_pool's second half, on a2a_pool's real history: every
    request the pool's members took taken out (the broker said success and delivered
    none, as moat-lib-mqtt 0.8.7 was seen to) is FALSE."""
    lines = [e for e in copy.deepcopy(runs["a2a_pool"])
             if not (e["kind"] == "a2m_request_taken" and "/pool/" in e["topic"])]
    v = checkers()["a2a_broker"](from_lines(renumbered(lines)))
    assert v.value is Value.FALSE, v.rules
    assert any("not one reached a member" in c["why"] for c in v.counterexamples)


def test_a_broker_is_judged_from_the_wire_of_a_responder_the_bench_did_not_write() -> None:
    """a2a_broker's reply-path rule on a recorded live run of the EMQX SDK's responder
    (a2a_quickstart on Mosquitto, 2026-12-06): the SDK keeps no record of the requests it
    takes, so the rule reads the PUBLISHes its wire tap saw reach it. Judged as recorded:
    TRUE, every request counted (it was UNKNOWN, "none reached a responder", while the rule
    read only the reference responder's own record). One request's Response Topic taken off
    the wire, as a broker that drops it would deliver it: FALSE, naming the responder."""
    import gzip
    from pathlib import Path

    from bench.history import loads_line
    recorded = Path(__file__).parents[1] / "data" / "live" / \
        "a2a_quickstart.emqx-sdk.s1.live.mosquitto.jsonl.gz"
    with gzip.open(recorded, "rt") as fh:
        lines = [loads_line(line) for line in fh if line.strip()]
    judge = checkers()["a2a_broker"]
    v = judge(from_lines(lines))
    assert v.value is Value.TRUE, v.note
    sent = sum(1 for e in lines if e["kind"] == "a2m_attempt")
    assert v.counts["requests_taken"] == sent > 10
    first = where(lines, "wire", lambda e: e["direction"] == "in" and e["packet"] == "PUBLISH"
                  and e["topic"].startswith("$a2a/v1/request/"))
    del lines[first]["properties"]["responseTopic"]
    v = judge(from_lines(lines))
    assert v.value is Value.FALSE
    assert any(f"{lines[first]['node']} took a request on" in c["why"]
               and "without its Response Topic" in c["why"] for c in v.counterexamples)


def test_a_drop_that_names_no_message_is_matched_to_the_packet_the_tap_saw() -> None:
    """The contract leaves a drop's messageId optional (a node that refuses an envelope may
    not have read it): the Rust executors refuse hostile_input's empty_conversation as
    MALFORMED and name none (live, Mosquitto, 2026-12-07). Judged as recorded, the rules
    that match a drop to its message read the messageId off the PUBLISH the tap saw reach
    the node on that topic with that packet id: TRUE (four were FALSE while they read only
    the drop). The tap's PUBLISH taken out, or the drop naming another packet id: the
    refusal is no longer the attack's, and robustness is FALSE again."""
    import gzip

    from bench.history import loads_line
    recorded = Path(__file__).parents[1] / "data" / "live" / \
        "hostile_input.rust-node.s1.live.mosquitto.jsonl.gz"
    with gzip.open(recorded, "rt") as fh:
        lines = [loads_line(line) for line in fh if line.strip()]
    rules = ("robustness", "auth_admission", "wire_evidence", "silent_loss")
    history = from_lines(lines)
    assert {r: checkers()[r](history).value for r in rules} == dict.fromkeys(rules, Value.TRUE)
    drop = lines[where(lines, "inbound_dropped", lambda e: e["reason"] == "MALFORMED"
                       and e["messageId"] is None)]
    attack = lines[where(lines, "attack_sent", lambda e: e["how"] == "empty_conversation")]
    tapped = where(lines, "wire", lambda e: e["direction"] == "in" and e["packet"] == "PUBLISH"
                   and e.get("messageId") == attack["messageId"])
    assert (lines[tapped]["node"], lines[tapped]["packetId"]) == (drop["node"], drop["packetId"])

    def refused(mutated: Lines) -> int:
        v = checkers()["robustness"](from_lines(mutated))
        return int(v.rules["hostile_input_refused"]["violations"])

    assert refused(lines) == 0
    assert refused(lines[:tapped] + lines[tapped + 1:]) == 1
    other = copy.deepcopy(lines)
    other[where(other, "inbound_dropped", lambda e: e["seq"] == drop["seq"])]["packetId"] += 1
    assert refused(other) == 1


def test_a_method_the_responder_does_not_serve_is_no_error_about_a_new_context() -> None:
    """A2M-CTX-2 on a recorded run of the example responder (a2a_multiturn, live,
    Mosquitto, 2026-12-07), which serves SendMessage only and answers every
    SendStreamingMessage -32601: a refusal of a method it does not serve says nothing of the
    request's context (four violations before 2026-12-07). Judged as recorded: no
    violation, contexts opened by its SendMessages judged. The same refusals said as an
    internal error (-32603) instead: FALSE, a new context answered with an error."""
    import gzip

    from bench.history import loads_line
    recorded = Path(__file__).parents[1] / "data" / "live" / \
        "a2a_multiturn.example-responder.s1.live.mosquitto.jsonl.gz"
    with gzip.open(recorded, "rt") as fh:
        lines = [loads_line(line) for line in fh if line.strip()]
    v = checkers()["a2a_replies"](from_lines(lines))
    assert v.rules["new_contexts_are_welcome"]["violations"] == 0, v.counterexamples
    assert v.counts["refused_for_its_method"] >= 1 and v.counts["contexts_opened"] >= 1
    for e in lines:
        if e["kind"] == "wire" and e.get("rpcError") == -32601:
            e["rpcError"] = -32603
    v = checkers()["a2a_replies"](from_lines(lines))
    assert v.rules["new_contexts_are_welcome"]["violations"] >= 1
    assert any("with error -32603" in c["why"] for c in v.counterexamples
               if c["rule"] == "new_contexts_are_welcome")
