"""Outbound: every message ends in exactly one of LOCAL_CONSUMED, PUBLISHED, UNDELIVERABLE,
FAILED (DESIGN §3, seed 002 §5), and each state change lands in the node's message store.

Signing happens here, at the one exit (seed 002 §8). An unresolvable target is
UNDELIVERABLE with its reason and a warning; there is no broadcast fallback. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from bench.core import events as ev
from bench.core.auth import AuthConfig, sign
from bench.core.commands import PersistRecord, Publish, Table
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, encode
from bench.core.frozen import quick_init_module, replace
from bench.core.machine import Machine
from bench.core.topics import TopicError, Topics
from bench.core.vocabulary import OutboundState as OutboundState
from bench.protocols.seed.directory import Directory, Resolution, Target


class OutboundEvent(StrEnum):
    TARGET_IS_LOCAL = "TARGET_IS_LOCAL"
    HANDED_TO_CLIENT = "HANDED_TO_CLIENT"
    UNRESOLVED = "UNRESOLVED"
    ERROR = "ERROR"
    BROKER_ACCEPTED = "BROKER_ACCEPTED"
    SEND_FAILED = "SEND_FAILED"


# Theory of operation: a message is NEW while it is routed. A local target is consumed in
# place (no MQTT). A remote one is handed to the client (SENDING) and ends PUBLISHED when
# the driver reports the broker took it, FAILED if sending broke. UNDELIVERABLE means "we
# know it was not sent": its reason says why. The four right-hand states are terminal.
_S, _E = OutboundState, OutboundEvent
OUTBOUND = Machine[OutboundState, OutboundEvent]("outbound message", {
    (_S.NEW, _E.TARGET_IS_LOCAL): _S.LOCAL_CONSUMED,
    (_S.NEW, _E.HANDED_TO_CLIENT): _S.SENDING,
    (_S.NEW, _E.UNRESOLVED): _S.UNDELIVERABLE,
    (_S.NEW, _E.ERROR): _S.FAILED,
    (_S.SENDING, _E.BROKER_ACCEPTED): _S.PUBLISHED,
    (_S.SENDING, _E.SEND_FAILED): _S.FAILED,
}, terminal=frozenset({_S.LOCAL_CONSUMED, _S.PUBLISHED, _S.UNDELIVERABLE, _S.FAILED}))


@dataclass(frozen=True, slots=True)
class Outbound:
    envelope: Envelope
    state: OutboundState
    reason: str = ""
    topic: str | None = None


LocalDelivery = Callable[[Effects, Envelope], None]
#: How a part of the node sends through its outbox: (effects, envelope, explicit target
#: only — never resolved through the directory) -> the state the message is in.
Sender = Callable[[Effects, Envelope, bool], object]


class Outbox:
    """Routes, signs and publishes; tracks messages until their terminal state."""

    def __init__(self, node_id: str, topics: Topics, directory: Directory, auth: AuthConfig,
                 qos: int, deliver_local: LocalDelivery) -> None:
        self.node_id = node_id
        self.topics = topics
        self.directory = directory
        self.auth = auth
        self.qos = qos
        self.deliver_local = deliver_local
        self.in_flight: dict[str, Outbound] = {}
        self.counts: dict[OutboundState, int] = {s: 0 for s in OUTBOUND.terminal}

    def sign(self, envelope: Envelope) -> Envelope:
        """The envelope as it leaves: signed with this node's key (variants override)."""
        return sign(envelope, self.auth.keys, self.node_id, self.auth.version)

    def send(self, fx: Effects, envelope: Envelope, *, explicit_target_only: bool = False) -> OutboundState:
        """Send a targeted message; returns the state it is in when this call returns."""
        envelope = envelope.with_headers(**{Header.ORIGIN_NODE_ID.value: self.node_id})
        if explicit_target_only and not envelope.target_node_id:
            target = Target(Resolution.UNRESOLVED, None,
                            "no targetNodeId (the request carried no headers.replyNodeId)")
        else:
            target = self.resolve(envelope)
        msg = Outbound(envelope, OutboundState.NEW)
        if target.how is Resolution.UNRESOLVED or target.node_id is None:
            return self.on_unresolved(fx, msg, target.reason)
        node_id = target.node_id
        envelope = replace(envelope, target_node_id=node_id)
        if node_id == self.node_id:
            msg = replace(msg, envelope=envelope)
            done = self._move(fx, msg, OutboundEvent.TARGET_IS_LOCAL, f"local ({target.reason})")
            self.deliver_local(fx, envelope)
            return done
        try:
            topic = self.topics.inbox(node_id)
        except TopicError as exc:
            # A peer named it (a replyNodeId, a targetNodeId): never a topic of its making
            return self.on_unresolved(fx, msg, f"{exc}")
        return self._publish(fx, replace(msg, envelope=envelope), topic, target.reason)

    def resolve(self, envelope: Envelope) -> Target:
        """Explicit targetNodeId, else the directory (variants override to break this)."""
        return self.directory.resolve(envelope.to_agent_id, envelope.target_node_id)

    def on_unresolved(self, fx: Effects, msg: Outbound, reason: str) -> OutboundState:
        """Never a broadcast: the message is UNDELIVERABLE, with its reason and a warning."""
        env = msg.envelope
        fx.record(ev.NodeWarning(what=ev.WarningKind.UNDELIVERABLE, message_id=env.message_id,
                             to_agent_id=env.to_agent_id, reason=reason))
        return self._move(fx, msg, OutboundEvent.UNRESOLVED, reason)

    def multicast(self, fx: Effects, envelope: Envelope) -> OutboundState:
        group = envelope.scene_group_id
        if not group:
            return self._move(fx, Outbound(envelope, OutboundState.NEW), OutboundEvent.UNRESOLVED,
                              "multicast without a sceneGroupId")
        envelope = envelope.with_headers(**{Header.ORIGIN_NODE_ID.value: self.node_id})
        return self._publish(fx, Outbound(envelope, OutboundState.NEW), self.topics.group(group),
                             "group multicast")

    def _publish(self, fx: Effects, msg: Outbound, topic: str, reason: str) -> OutboundState:
        signed = self.sign(msg.envelope)
        try:
            payload = encode(signed)
        except (TypeError, ValueError) as exc:
            # A payload that is not JSON-encodable (NaN, a non-JSON object): an error while
            # sending, which the seed's FAILED state exists for.
            return self._move(fx, msg, OutboundEvent.ERROR, f"encode failed: {exc}")
        msg = replace(msg, envelope=signed, topic=topic)
        self._move(fx, msg, OutboundEvent.HANDED_TO_CLIENT, reason)
        fx.add(Publish(topic, payload, self.qos, False, signed.message_id))
        return OutboundState.SENDING

    def settle(self, fx: Effects, message_id: str, ok: bool, error: str | None,
               reason_code: int | None = None) -> None:
        msg = self.in_flight.get(message_id)
        if msg is None:
            fx.record(ev.NodeWarning(what=ev.WarningKind.UNKNOWN_SETTLEMENT,
                                 message_id=message_id, ok=ok))
            return
        if ok:
            self._move(fx, msg, OutboundEvent.BROKER_ACCEPTED, msg.reason, reason_code)
        else:
            self._move(fx, msg, OutboundEvent.SEND_FAILED, error or "send failed", reason_code)

    def _move(self, fx: Effects, msg: Outbound, event: OutboundEvent, reason: str,
              reason_code: int | None = None) -> OutboundState:
        env = msg.envelope
        state = OUTBOUND.next(msg.state, event, env.message_id)
        moved = replace(msg, state=state, reason=reason)
        if state in OUTBOUND.terminal:
            self.in_flight.pop(env.message_id, None)
            self.counts[state] += 1
            fx.record(ev.OutboundSettled(message_id=env.message_id,
                                         message_type=env.message_type, state=state,
                                         reason=reason, to_agent_id=env.to_agent_id,
                                         target_node_id=env.target_node_id,
                                         request_id=env.header(Header.REQUEST_ID), topic=msg.topic,
                                         reason_code=reason_code))
        else:
            self.in_flight[env.message_id] = moved
        fx.add(PersistRecord(Table.MESSAGES, f"SEND|{env.message_id}", {
            "direction": "SEND", "messageId": env.message_id,
            "messageType": env.message_type.value, "fromAgentId": env.from_agent_id,
            "toAgentId": env.to_agent_id, "targetNodeId": env.target_node_id,
            "conversationId": env.conversation_id, "requestId": env.header(Header.REQUEST_ID),
            "state": state.value, "reason": reason, "atMs": fx.now_ms}))
        return state


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
