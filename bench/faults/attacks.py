"""The attacker of the security faults (DESIGN §5–§6, seed 002 §8), written once for both
substrates: what it sends and what an honest verifier must say of it.

`forged_sender` sends TASK_REQUESTs that claim to come from the orchestrator's agent:
unsigned; signed with the flat shared token (which the attacker holds: the flat-token
leak); or signed with another agent's per-agent key (a compromised agent). `replay`
re-publishes a captured, validly signed request later. `hostile_input` is an insider (a
compromised executor agent, signing as itself, so it passes admission) whose requests
carry what a node must refuse rather than act on: a replyNodeId that is no topic segment
(its answer would go to a topic of the sender's making) or a process definition the
design forbids. Each attack message is journaled
as `attack_sent` with the verdict an honest verifier gives it (`honestVerdict`), so the
auth checker can tell a weak scheme (the honest verdict lets it in) from a broken node
(it recorded another verdict, or let in what its mode must refuse). The attacker signs and
judges with `bench.oracle`, never with the node's own `bench.core.auth`: a weakened core
must not weaken the judge. No secret is ever put into a record: kids name keys, keys
never appear.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from bench import oracle
from bench.core.auth import KeyRing, SignatureVersion
from bench.core.events import AttackSent, SignatureVerdict
from bench.core.topics import Topics

FORGE_HOW = ("unsigned", "flat_token", "other_agent_key")


@dataclass(frozen=True, slots=True)
class AttackMessage:
    topic: str
    payload: bytes
    event: AttackSent          # the journal entry (no secrets)


def forged_request(how: str, n: int, index: int, *, victim_agent: str, victim_node: str,
                   target_node: str, target_agent: str, keys: KeyRing, compromised: str | None,
                   now_ms: int, prefix: str, version: SignatureVersion,
                   max_skew_ms: int) -> AttackMessage | None:
    """One forged TASK_REQUEST claiming `victim_agent`; None if the attacker lacks the key
    this kind of forgery needs (no flat token, no compromised agent key)."""
    rid = f"attack{index}-{how}-{n}"
    message: dict[str, Any] = {
        "messageId": f"{rid}.m", "conversationId": f"attack-{index}", "sceneGroupId": None,
        "fromAgentId": victim_agent, "toAgentId": target_agent, "targetNodeId": target_node,
        "messageType": "TASK_REQUEST", "timestamp": now_ms,
        "payload": {"ask": f"forged request {n} ({how})"},
        "headers": {"requestId": rid, "replyNodeId": victim_node, "originNodeId": victim_node,
                    "x-a2a-node": victim_node}}
    kid: str | None = None
    if how == "flat_token":
        if keys.flat_token is None:
            return None
        kid, key = oracle.FLAT, keys.flat_token
    elif how == "other_agent_key":
        if compromised is None or compromised not in keys.agent_keys:
            return None
        kid, key = compromised, keys.agent_keys[compromised]
    elif how != "unsigned":
        raise ValueError(f"forged_sender how={how!r} must be one of {list(FORGE_HOW)}")
    if kid is not None:
        message = oracle.sign(message, kid, key.reveal(), version.value)
    honest = SignatureVerdict(oracle.verdict(message, accepted_keys(keys), now_ms, max_skew_ms))
    return AttackMessage(Topics(prefix).inbox(target_node), _wire(message), AttackSent(
        "forged_sender", how, index, message["messageId"], rid, target_node, target_agent,
        victim_agent, kid, honest, claimed_node=victim_node))


def predicted_forgery(k: int, index: int, *, victim_agent: str, victim_node: str,
                      target_node: str, target_agent: str, keys: KeyRing, now_ms: int,
                      prefix: str, max_skew_ms: int) -> AttackMessage:
    """A forged, unsigned TASK_REQUEST under the messageId the victim will give its k-th
    request (`{node}-m{k}`: message ids are predictable), sent ahead of it: a node whose
    inbound ledger learns a messageId before admission refuses the forgery, then drops the
    genuine request as its duplicate."""
    rid = f"attack{index}-ahead-{k}"
    message: dict[str, Any] = {
        "messageId": f"{victim_node}-m{k}", "conversationId": f"attack-{index}",
        "sceneGroupId": None, "fromAgentId": victim_agent, "toAgentId": target_agent,
        "targetNodeId": target_node, "messageType": "TASK_REQUEST", "timestamp": now_ms,
        "payload": {"ask": f"forged ahead of the genuine request {k}"},
        "headers": {"requestId": rid, "replyNodeId": victim_node, "originNodeId": victim_node,
                    "x-a2a-node": victim_node}}
    honest = SignatureVerdict(oracle.verdict(message, accepted_keys(keys), now_ms, max_skew_ms))
    return AttackMessage(Topics(prefix).inbox(target_node), _wire(message), AttackSent(
        "ledger_poisoning", "predicted_message_id", index, message["messageId"], rid,
        target_node, target_agent, victim_agent, None, honest, claimed_node=victim_node))


def accepted_keys(keys: KeyRing) -> dict[str, list[bytes]]:
    """The keyring as the oracle reads it: kid -> the keys accepted for it."""
    out = {kid: [key.reveal()] for kid, key in keys.agent_keys.items()}
    for kid, old in keys.previous.items():
        out.setdefault(kid, []).append(old.reveal())
    if keys.flat_token is not None:
        out[oracle.FLAT] = [keys.flat_token.reveal()]
    return out


def _wire(message: dict[str, Any]) -> bytes:
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _request(payload: bytes) -> dict[str, Any] | None:
    """The message, if the bytes are a JSON TASK_REQUEST; else None (not worth attacking)."""
    try:
        message = json.loads(payload)
    except ValueError:
        return None
    ok = (isinstance(message, dict) and message.get("messageType") == "TASK_REQUEST"
          and isinstance(message.get("timestamp"), int)
          and isinstance(message.get("headers"), dict)
          and all(isinstance(message.get(k), str) for k in ("messageId", "fromAgentId")))
    return message if ok else None


def replayed(payload: bytes, index: int, *, keys: KeyRing, now_ms: int,
             max_skew_ms: int, topic: str) -> AttackMessage | None:
    """A captured TASK_REQUEST re-published as it was (byte for byte)."""
    message = _request(payload)
    if message is None:
        return None
    honest = SignatureVerdict(oracle.verdict(message, accepted_keys(keys), now_ms, max_skew_ms))
    age = now_ms - message["timestamp"]
    how = ("fresh" if honest != "STALE" else
           "expired" if age > oracle.LEDGER_TTL_MS else "stale")   # past the dedup ledger's TTL
    headers = message["headers"]
    return AttackMessage(topic, payload, AttackSent(
        "replay", how, index, message["messageId"], headers.get("requestId"),
        message.get("targetNodeId"), message.get("toAgentId"), message["fromAgentId"],
        headers.get(oracle.KID), honest, age_ms=age))


def victim_and_targets(nodes: list[tuple[str, str, tuple[str, ...]]]) -> tuple[str, str, list[tuple[str, str]], str | None]:
    """From (node id, role, agents): the claimed sender (the first orchestrator's agent),
    its node, every (executor node, agent) to attack, and a compromised executor agent."""
    orch = next((n for n in nodes if n[1] == "orchestrator"), nodes[0])
    targets = [(node, agent) for node, role, agents in nodes if role != "orchestrator"
               for agent in agents]
    compromised = targets[-1][1] if targets else None
    return orch[2][0], orch[0], targets, compromised


TAMPER_WHAT = ("payload", "routing", "headers")
#: Where a man in the middle sends the response to a request whose replyNodeId it rewrote:
#: a node of its own (one topic segment), whose inbox it reads.
ATTACKER_NODE = "mitm"


def tampered(payload: bytes, what: str, index: int, *, agents_of_node: tuple[str, ...],
             keys: KeyRing, now_ms: int, max_skew_ms: int,
             node: str) -> tuple[bytes, AttackSent] | None:
    """A man in the middle (the node's side of the broker) alters a validly signed
    TASK_REQUEST in flight: its payload, its toAgentId (to the node's other agent), or its
    headers (replyNodeId to the attacker's own node: the answer goes to the attacker).
    The signature is left as it was. None: not a request worth altering."""
    message = _request(payload)
    if message is None or message["headers"].get(oracle.SIG) is None:
        return None   # nothing to defeat: an unsigned message is forged_sender's business
    if what == "payload":
        altered = {**message, "payload": {"ask": "tampered: transfer everything to the attacker",
                                          "was": message.get("payload")}}
    elif what == "routing":
        others = [a for a in agents_of_node if a != message.get("toAgentId")]
        if not others:
            return None
        altered = {**message, "toAgentId": others[0]}
    elif what == "headers":
        altered = {**message, "headers": {**message["headers"], "replyNodeId": ATTACKER_NODE}}
    else:
        raise ValueError(f"tamper what={what!r} must be one of {list(TAMPER_WHAT)}")
    honest = SignatureVerdict(oracle.verdict(altered, accepted_keys(keys), now_ms, max_skew_ms))
    headers = message["headers"]
    return _wire(altered), AttackSent(
        f"tamper_{what}", what, index, message["messageId"], headers.get("requestId"), node,
        altered.get("toAgentId"), message["fromAgentId"], headers.get(oracle.KID), honest)


#: What a hostile request carries, in the order an attacker cycles through them. The
#: first two are replyNodeIds that are not one MQTT topic segment; then process
#: definitions that seed 004's grammar rules out (a human step only at the top level, the
#: four step kinds, 0..10 retries, unique ids), each one small step from a valid one; then
#: an envelope DESIGN §3 refuses (an optional string field present but empty: a
#: conversationId "" would name the conversation "" a stream goes to) and one at its edge
#: it must not (a timestamp of 0 is a well-formed one, stale: judged by admission); then
#: six more definitions the grammar rules out (no step, a step that is no object, an id
#: that is no path segment, a merge it does not know, a human step's timeout of 0 or
#: policy it does not know) — last, so that the first eight keep their turns.
HOSTILE_WHAT = ("reply_slash", "reply_wildcard", "nested_human", "unknown_step",
                "retries_out_of_range", "duplicate_step_ids", "empty_conversation",
                "timestamp_zero", "no_steps", "step_not_object", "step_id_with_slash",
                "merge_unknown", "human_timeout_zero", "human_policy_unknown")
HOSTILE_REPLY = ("reply_slash", "reply_wildcard")
HOSTILE_ENVELOPE = ("empty_conversation", "timestamp_zero")


def _hostile_process(what: str) -> list[Any]:
    work = {"id": "w", "kind": "work"}
    if what == "nested_human":
        return [{"id": "fan", "kind": "parallel", "branches": [
            work, {"id": "ask", "kind": "human", "prompt": "approve?"}]}]
    if what == "unknown_step":
        return [work, {"id": "x", "kind": "shell", "command": "rm -rf /"}]
    if what == "retries_out_of_range":
        return [{"id": "w", "kind": "work", "retries": 1_000_000}]
    if what == "duplicate_step_ids":
        return [work, {"id": "w", "kind": "work"}]
    if what == "no_steps":
        return []
    if what == "step_not_object":
        return [work, "work"]
    if what == "step_id_with_slash":
        return [{"id": "w/x", "kind": "work"}]
    if what == "merge_unknown":
        return [{"id": "w", "kind": "work", "merge": "shuffle"}]
    if what == "human_timeout_zero":
        return [work, {"id": "ask", "kind": "human", "prompt": "approve?", "timeoutMs": 0}]
    if what == "human_policy_unknown":
        return [work, {"id": "ask", "kind": "human", "prompt": "approve?",
                       "onTimeout": "ignore"}]
    raise ValueError(f"hostile_input what={what!r} must be one of {list(HOSTILE_WHAT)}")


def hostile_request(what: str, n: int, index: int, *, insider: str, insider_node: str,
                    target_node: str, target_agent: str, keys: KeyRing, judge_keys: KeyRing,
                    now_ms: int, prefix: str, version: SignatureVersion,
                    max_skew_ms: int) -> AttackMessage:
    """One TASK_REQUEST from `insider`, signed with what it holds now (`keys`: its own key,
    else the flat token, else nothing), carrying `what`; judged with the keys the target
    holds now (`judge_keys`: a rotation may have reached one and not the other)."""
    rid = f"attack{index}-{what}-{n}"
    reply = {"reply_slash": f"{insider_node}/x",
             "reply_wildcard": f"{insider_node}+#"}.get(what, insider_node)
    payload: dict[str, Any] = {"ask": f"hostile request {n} ({what})"}
    if what not in HOSTILE_REPLY + HOSTILE_ENVELOPE:
        payload["process"] = _hostile_process(what)
    message: dict[str, Any] = {
        "messageId": f"{rid}.m",
        "conversationId": "" if what == "empty_conversation" else f"attack-{index}",
        "sceneGroupId": None,
        "fromAgentId": insider, "toAgentId": target_agent, "targetNodeId": target_node,
        "messageType": "TASK_REQUEST", "timestamp": 0 if what == "timestamp_zero" else now_ms,
        "payload": payload,
        "headers": {"requestId": rid, "replyNodeId": reply, "originNodeId": insider_node,
                    "x-a2a-node": insider_node}}
    kid: str | None = None
    if insider in keys.agent_keys:
        kid, key = insider, keys.agent_keys[insider]
    elif keys.flat_token is not None:
        kid, key = oracle.FLAT, keys.flat_token
    if kid is not None:
        message = oracle.sign(message, kid, key.reveal(), version.value)
    honest = SignatureVerdict(oracle.verdict(message, accepted_keys(judge_keys), now_ms,
                                             max_skew_ms))
    return AttackMessage(Topics(prefix).inbox(target_node), _wire(message), AttackSent(
        "hostile_input", what, index, message["messageId"], rid, target_node, target_agent,
        insider, kid, honest))


def rotated(keys: KeyRing, agent: str, new_key: Any, overlap: bool) -> KeyRing:
    """The keyring after `agent`'s key became `new_key`; during the overlap the old key is
    still accepted for that kid."""
    agents = dict(keys.agent_keys)
    old = agents.get(agent)
    agents[agent] = new_key
    previous = {agent: old} if overlap and old is not None else {}
    return KeyRing(keys.flat_token, agents, previous)
