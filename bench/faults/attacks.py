"""The attacker of the security faults (DESIGN §5–§6, seed 002 §8), written once for both
substrates: what it sends and what an honest verifier must say of it.

`forged_sender` sends TASK_REQUESTs that claim to come from the orchestrator's agent:
unsigned; signed with the flat shared token (which the attacker holds: the flat-token
leak); or signed with another agent's per-agent key (a compromised agent). `replay`
re-publishes a captured, validly signed request later. Each attack message is journaled
as `attack_sent` with the verdict the reference verifier gives it (`honestVerdict`), so the
auth checker can tell a weak scheme (the honest verdict lets it in) from a broken node
(it recorded another verdict, or let in what its mode must refuse). No secret is ever put
into a record: kids name keys, keys never appear.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from bench.core.auth import FLAT_KID, KeyRing, SignatureVersion, _mac, signed_string, verify
from bench.core.envelope import Envelope, Header, MessageType, decode, encode
from bench.core.events import AttackSent
from bench.core.ledger import LedgerConfig
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
    env = Envelope(f"{rid}.m", MessageType.TASK_REQUEST, victim_agent, now_ms,
                   to_agent_id=target_agent, target_node_id=target_node,
                   conversation_id=f"attack-{index}",
                   payload={"ask": f"forged request {n} ({how})"},
                   headers={Header.REQUEST_ID.value: rid, Header.REPLY_NODE_ID.value: victim_node,
                            Header.ORIGIN_NODE_ID.value: victim_node,
                            Header.NODE.value: victim_node})
    kid: str | None = None
    if how == "flat_token":
        if keys.flat_token is None:
            return None
        kid = FLAT_KID
        key = keys.flat_token
    elif how == "other_agent_key":
        if compromised is None or compromised not in keys.agent_keys:
            return None
        kid = compromised
        key = keys.agent_keys[compromised]
    elif how != "unsigned":
        raise ValueError(f"forged_sender how={how!r} must be one of {list(FORGE_HOW)}")
    if kid is not None:
        stamped = env.with_headers(**{
            Header.KID.value: kid,
            Header.SIG_VERSION.value: None if version is SignatureVersion.V1 else version.value})
        env = stamped.with_headers(**{
            Header.SIG.value: _mac(key, signed_string(stamped, version)).finalize().hex()})
    honest = verify(env, keys, now_ms, max_skew_ms)
    return AttackMessage(Topics(prefix).inbox(target_node), encode(env), AttackSent(
        "forged_sender", how, index, env.message_id, rid, target_node, target_agent,
        victim_agent, kid, honest.value))


def replayed(payload: bytes, index: int, *, keys: KeyRing, now_ms: int,
             max_skew_ms: int, topic: str) -> AttackMessage | None:
    """A captured TASK_REQUEST re-published as it was (byte for byte)."""
    env = decode(payload)
    if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST:
        return None
    honest = verify(env, keys, now_ms, max_skew_ms)
    age = now_ms - env.timestamp_ms
    how = ("fresh" if honest.value != "STALE" else
           "expired" if age > LedgerConfig().ttl_ms else "stale")   # past the dedup ledger's TTL
    return AttackMessage(topic, payload, AttackSent(
        "replay", how, index, env.message_id, env.header(Header.REQUEST_ID), env.target_node_id,
        env.to_agent_id, env.from_agent_id, env.header(Header.KID), honest.value,
        age_ms=now_ms - env.timestamp_ms))


def victim_and_targets(nodes: list[tuple[str, str, tuple[str, ...]]]) -> tuple[str, str, list[tuple[str, str]], str | None]:
    """From (node id, role, agents): the claimed sender (the first orchestrator's agent),
    its node, every (executor node, agent) to attack, and a compromised executor agent."""
    orch = next((n for n in nodes if n[1] == "orchestrator"), nodes[0])
    targets = [(node, agent) for node, role, agents in nodes if role != "orchestrator"
               for agent in agents]
    compromised = targets[-1][1] if targets else None
    return orch[2][0], orch[0], targets, compromised


TAMPER_WHAT = ("payload", "routing")


def tampered(payload: bytes, what: str, index: int, *, agents_of_node: tuple[str, ...],
             keys: KeyRing, now_ms: int, max_skew_ms: int,
             node: str) -> tuple[bytes, AttackSent] | None:
    """A man in the middle (the node's side of the broker) alters a validly signed
    TASK_REQUEST in flight: its payload, or its toAgentId (to the node's other agent). The
    signature is left as it was. None: not a request worth altering."""
    env = decode(payload)
    if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST:
        return None
    if env.header(Header.SIG) is None:
        return None   # nothing to defeat: an unsigned message is forged_sender's business
    if what == "payload":
        altered = replace(env, payload={"ask": "tampered: transfer everything to the attacker",
                                        "was": env.payload})
    elif what == "routing":
        others = [a for a in agents_of_node if a != env.to_agent_id]
        if not others:
            return None
        altered = replace(env, to_agent_id=others[0])
    else:
        raise ValueError(f"tamper what={what!r} must be one of {list(TAMPER_WHAT)}")
    honest = verify(altered, keys, now_ms, max_skew_ms)
    return encode(altered), AttackSent(
        f"tamper_{what}", what, index, env.message_id, env.header(Header.REQUEST_ID), node,
        altered.to_agent_id, env.from_agent_id, env.header(Header.KID), honest.value)


def rotated(keys: KeyRing, agent: str, new_key: Any, overlap: bool) -> KeyRing:
    """The keyring after `agent`'s key became `new_key`; during the overlap the old key is
    still accepted for that kid."""
    agents = dict(keys.agent_keys)
    old = agents.get(agent)
    agents[agent] = new_key
    previous = {agent: old} if overlap and old is not None else {}
    return KeyRing(keys.flat_token, agents, previous)
