"""Malformed input for a seed-protocol node (DESIGN §3: "malformed or unknown input is a
recorded rejection, never a crash and never silently re-typed"), derived from the envelope
as DESIGN §3 writes it, not from the node's parser: each case is one small step from a valid
TASK_REQUEST (a byte that is no UTF-8, a field missing, a string field given a number, an
unknown field or message type, a header that is no string), sent to a node's inbox; and one
step from a valid directory announcement (DESIGN §3: `{prefix}/directory/{nodeId}`, its
`nodeId`, `online`, `namespace`, `agents`), sent under a node id nobody has. What the
judge expects of each (`ENVELOPE_EXPECT`, `ANNOUNCEMENT_CASES`) is written here, beside the
cases, from the same reading of DESIGN — never from `bench.core.envelope`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from bench.core.events import AttackSent, SignatureVerdict
from bench.core.topics import Topics
from bench.faults.attacks import AttackMessage

#: The envelope's string fields (DESIGN §3), the first two required, the rest optional
#: (null or absent); messageType is required and one of the message types; timestamp is a
#: required count of milliseconds; headers an object of strings.
REQUIRED_TEXT = ("messageId", "fromAgentId")
OPTIONAL_TEXT = ("conversationId", "sceneGroupId", "toAgentId", "targetNodeId")
#: Where an envelope stops being one: what a node must drop as MALFORMED (recorded, with a
#: reason), by case
MALFORMED = "MALFORMED"
#: An envelope at the edge of well-formed that a node must not call malformed (DESIGN §3
#: calls headers optional: null is no headers)
WELL_FORMED = "WELL_FORMED"
#: A message of a size DESIGN sets no bound for: any recorded outcome (a node may bound what
#: it reads, and say so)
ANY_OUTCOME = "ANY_OUTCOME"
ENVELOPE_EXPECT: dict[str, str] = {
    "not_utf8": MALFORMED, "not_json": MALFORMED, "nan": MALFORMED, "huge_number": MALFORMED,
    "array": MALFORMED, "null": MALFORMED, "unknown_field": MALFORMED,
    "unknown_type": MALFORMED, "type_not_string": MALFORMED,
    "timestamp_negative": MALFORMED, "timestamp_string": MALFORMED,
    "headers_array": MALFORMED, "header_number": MALFORMED,
    **{f"missing:{f}": MALFORMED for f in (*REQUIRED_TEXT, "messageType", "timestamp")},
    **{f"empty:{f}": MALFORMED for f in (*REQUIRED_TEXT, *OPTIONAL_TEXT)},
    **{f"number:{f}": MALFORMED for f in (*REQUIRED_TEXT, *OPTIONAL_TEXT)},
    "headers_null": WELL_FORMED, "too_large": ANY_OUTCOME,
}
#: Well-formed envelopes whose payload is not the body their message type carries (DESIGN
#: §3 and seed 002 §6–§7: a FLOW_EVENT's stream, seq > 0, kind and text in a conversation;
#: a gate's ids, timeout and policy; a decision of approve or reject; an answer's status),
#: one field wrong each: MALFORMED too
BODY_CASES = ("body:FLOW_EVENT:no_conversation", "body:FLOW_EVENT:text_number",
              "body:FLOW_EVENT:seq_zero", "body:FLOW_EVENT:kind_unknown",
              "body:GATE_OPEN:no_gate_id", "body:GATE_OPEN:timeout_zero",
              "body:GATE_DECISION:decision_unknown", "body:GATE_ACK:not_object",
              "body:TASK_RESPONSE:status_unknown")
ENVELOPE_EXPECT |= {case: MALFORMED for case in BODY_CASES}
#: A well-formed message a node has no business running (DESIGN §3: route by toAgentId /
#: canHandle, then the handler; a drop on the way is NOT_MINE): a TASK_REQUEST on a scene
#: group's multicast topic, a DATA_REQUEST the seed node has no handler for — dropped with
#: a reason or taken, never run as a task
ROUTED = "ROUTED"
ROUTE_CASES = ("route:request_on_group", "route:no_handler")
ENVELOPE_EXPECT |= {case: ROUTED for case in ROUTE_CASES}
#: An announcement a node must refuse (its directory unchanged, the refusal recorded)
ANNOUNCEMENT_CASES = ("ann:not_json", "ann:array", "ann:node_mismatch", "ann:online_text",
                      "ann:namespace_number", "ann:agents_object", "ann:agent_without_id")
CASES = (*ENVELOPE_EXPECT, *ANNOUNCEMENT_CASES)
#: Larger than any envelope a node needs to take (the payloads of the workload are a few
#: hundred bytes)
LARGE_BYTES = 2 * 1024 * 1024


def _request(message_id: str, target_node: str, target_agent: str, now_ms: int) -> dict[str, Any]:
    return {"messageId": message_id, "conversationId": f"malformed-{message_id}",
            "sceneGroupId": None, "fromAgentId": "bench.attacker", "toAgentId": target_agent,
            "targetNodeId": target_node, "messageType": "TASK_REQUEST", "timestamp": now_ms,
            "payload": {"ask": "malformed"},
            "headers": {"requestId": message_id, "replyNodeId": "bench-attacker"}}


def _text(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def malformed_envelope(case: str, n: int, index: int, *, target_node: str, target_agent: str,
                       now_ms: int, prefix: str, group: str | None = None) -> AttackMessage:
    """The `n`th message of fault `index`, of kind `case`: an envelope to `target_node`'s
    inbox (or, route:request_on_group, to its scene group `group`), or (an `ann:` case) an
    announcement on the directory topic of a node id nobody has. Its messageId (the
    announcement's node id) is its own: `malformed-{index}-{n}`."""
    mid = f"malformed-{index}-{n}"
    topics = Topics(prefix)
    if case in ANNOUNCEMENT_CASES:
        ghost = f"ghost-{index}-{n}"
        good = {"nodeId": ghost, "online": True, "namespace": "fin",
                "agents": [{"agentId": "fin.ghost"}]}
        bodies: dict[str, bytes] = {
            "ann:not_json": b'{"nodeId": ', "ann:array": _text([good]),
            "ann:node_mismatch": _text(good | {"nodeId": f"{ghost}-other"}),
            "ann:online_text": _text(good | {"online": "yes"}),
            "ann:namespace_number": _text(good | {"namespace": 7}),
            "ann:agents_object": _text(good | {"agents": {"agentId": "fin.ghost"}}),
            "ann:agent_without_id": _text(good | {"agents": [{"role": "executor"}]}),
        }
        return AttackMessage(topics.directory(ghost), bodies[case], AttackSent(
            "malformed_envelope", case, index, ghost, None, None, None, "", None,
            SignatureVerdict.UNSIGNED))
    env = _request(mid, target_node, target_agent, now_ms)
    topic = topics.inbox(target_node)
    if case in ROUTE_CASES:
        # (a node in no scene group has no group topic: it gets the DATA_REQUEST instead)
        on_group = case == "route:request_on_group" and group is not None
        topic = topics.group(group) if on_group and group else topic
        body = _text(env if on_group else env | {"messageType": "DATA_REQUEST"})
    elif case in BODY_CASES:
        body = _text(_body(case, env))
    else:
        body = _envelope(case, env, now_ms)
    return AttackMessage(topic, body, AttackSent(
        "malformed_envelope", case, index, mid, mid, target_node, target_agent,
        "bench.attacker", None, SignatureVerdict.UNSIGNED))


def _envelope(case: str, env: dict[str, Any], now_ms: int) -> bytes:
    """The bytes of an envelope case: `env` one step from valid (only the case's bytes are
    made: the 2 MiB one is not built for every message)."""
    field = case.split(":", 1)[1] if ":" in case else ""
    if case.startswith("missing:"):
        env.pop(field)
    elif case.startswith("empty:"):
        env[field] = ""
    elif case.startswith("number:"):
        env[field] = 7
    stamp = b'"timestamp":' + str(now_ms).encode()
    payloads: dict[str, Callable[[], bytes]] = {
        "not_utf8": lambda: b'{"messageId":"\xff\xfe"}', "not_json": lambda: b'{"messageId": ',
        "nan": lambda: _text(env).replace(stamp, b'"timestamp":NaN'),
        "huge_number": lambda: _text(env).replace(stamp, b'"timestamp":1e999'),
        "array": lambda: _text([env]), "null": lambda: b"null",
        "unknown_field": lambda: _text(env | {"priority": "high"}),
        "unknown_type": lambda: _text(env | {"messageType": "TASK_EXPLODE"}),
        "type_not_string": lambda: _text(env | {"messageType": 3}),
        "timestamp_negative": lambda: _text(env | {"timestamp": -1}),
        "timestamp_string": lambda: _text(env | {"timestamp": str(now_ms)}),
        "headers_array": lambda: _text(env | {"headers": ["requestId"]}),
        "header_number": lambda: _text(env | {"headers": {"requestId": 7}}),
        "headers_null": lambda: _text(env | {"headers": None}),
        "too_large": lambda: _text(env | {"payload": {"ask": "x" * LARGE_BYTES}}),
    }
    return payloads.get(case, lambda: _text(env))()


def _body(case: str, env: dict[str, Any]) -> dict[str, Any]:
    """`env` as a message of the case's type whose body has the case's one thing wrong."""
    _, mtype, wrong = case.split(":")
    good: dict[str, dict[str, Any]] = {
        "FLOW_EVENT": {"stream": f"{env['conversationId']}|fin.ghost", "seq": 1,
                       "kind": "token", "text": "t", "lane": "main"},
        "GATE_OPEN": {"gateId": "g-malformed", "processInstId": "p-malformed",
                      "activityId": "ask", "agentId": env["toAgentId"], "prompt": "?",
                      "timeoutMs": 1000, "onTimeout": "fail"},
        "GATE_DECISION": {"gateId": "g-malformed", "processInstId": "p-malformed",
                          "decision": "approve"},
        "GATE_ACK": {"gateId": "g-malformed", "status": "applied"},
        "TASK_RESPONSE": {"status": "COMPLETED", "result": None},
    }
    body: Any = dict(good[mtype])
    match wrong:
        case "no_conversation":
            env = env | {"conversationId": None}
        case "text_number":
            body["text"] = 7
        case "seq_zero":
            body["seq"] = 0
        case "kind_unknown":
            body["kind"] = "shout"
        case "no_gate_id":
            del body["gateId"]
        case "timeout_zero":
            body["timeoutMs"] = 0
        case "decision_unknown":
            body["decision"] = "maybe"
        case "not_object":
            body = ["gateId"]
        case _:     # status_unknown
            body["status"] = "DONE-ISH"
    return env | {"messageType": mtype, "payload": body}
