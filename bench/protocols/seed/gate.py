"""The gate store on the orchestrator (DESIGN §3, seed 002 §7): cross-node human gates.

An executor's instance reaches a HUMAN step and sends GATE_OPEN to the conversation's
home node. Here the gate is persisted OPEN and a person is asked (an AskHuman command;
the workload's simulated humans answer with HumanDecided). The first decision — or the
gate's timeout policy — moves it to DECIDED, persisted, and a GATE_DECISION goes to the
node the directory resolves for the gate's agentId. Every later click is an explicit
ALREADY_DECIDED. The decision is re-sent (a new message each time) until a GATE_ACK
comes back, or recorded UNACKED after the last attempt. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from bench.core import events as ev
from bench.core.commands import AskHuman, CancelTimer, PersistRecord, StartTimer, Table
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, MessageType
from bench.core.frozen import replace
from bench.core.inputs import TimerId, TimerKind
from bench.core.machine import Machine
from bench.core.vocabulary import AckStatus, DecidedBy, Decision, GateState, TimeoutPolicy
from bench.protocols.seed.fields import integer, optional_text, text
from bench.protocols.seed.outbox import Sender
from bench.protocols.seed.payloads import GateAckBody, GateOpenBody


class GateEvent(StrEnum):
    DECIDE = "DECIDE"
    ACK = "ACK"
    GIVE_UP = "GIVE_UP"


# Theory of operation: a gate is OPEN from the GATE_OPEN that created it (persisted, its
# person asked, its expiry timer set) until the first click or its expiry DECIDEs it; the
# decision is persisted and sent, and re-sent (a new message each time, backing off) until
# a GATE_ACK comes back (ACKED) or the last attempt is spent (UNACKED, said so). Later
# clicks find it decided and are answered ALREADY_DECIDED; a restart asks an OPEN gate
# again and re-sends a DECIDED one. ACKED and UNACKED are terminal.
_S, _E = GateState, GateEvent
GATE = Machine[GateState, GateEvent]("gate", {
    (_S.OPEN, _E.DECIDE): _S.DECIDED,
    (_S.DECIDED, _E.ACK): _S.ACKED,
    (_S.DECIDED, _E.GIVE_UP): _S.UNACKED,
}, terminal=frozenset({_S.ACKED, _S.UNACKED}))


@dataclass(frozen=True, slots=True)
class GateConfig:
    retry_ms: int = 2_000
    max_attempts: int = 6


@dataclass(frozen=True, slots=True)
class Gate:
    gate_id: str
    process_inst_id: str
    activity_id: str
    agent_id: str
    requester_agent_id: str
    conversation_id: str | None
    executor_node_id: str | None
    prompt: str
    on_timeout: TimeoutPolicy
    opened_ms: int
    deadline_ms: int
    state: GateState = GateState.OPEN
    decision: Decision | None = None
    decided_by: DecidedBy | None = None
    attempts: int = 0
    asks: int = 0
    ack: AckStatus | None = None

    def move(self, event: GateEvent, **changes: object) -> Gate:
        """The gate after one transition of the gate machine (and the given changes)."""
        return replace(self, state=GATE.next(self.state, event, self.gate_id),
                       **changes)

    def to_json(self) -> dict[str, Json]:
        return {"gateId": self.gate_id, "processInstId": self.process_inst_id,
                "activityId": self.activity_id, "agentId": self.agent_id,
                "requesterAgentId": self.requester_agent_id,
                "conversationId": self.conversation_id, "executorNodeId": self.executor_node_id,
                "prompt": self.prompt, "onTimeout": self.on_timeout.value,
                "openedMs": self.opened_ms, "deadlineMs": self.deadline_ms,
                "state": self.state.value,
                "decision": self.decision.value if self.decision else None,
                "decidedBy": self.decided_by.value if self.decided_by else None,
                "attempts": self.attempts, "asks": self.asks,
                "ack": self.ack.value if self.ack else None}

    @staticmethod
    def from_json(raw: Json) -> Gate:
        if not isinstance(raw, dict):
            raise TypeError("gate record is not an object")
        return Gate(text(raw, "gateId"), text(raw, "processInstId"), text(raw, "activityId"),
                    text(raw, "agentId"), text(raw, "requesterAgentId"),
                    optional_text(raw, "conversationId"), optional_text(raw, "executorNodeId"),
                    text(raw, "prompt"), TimeoutPolicy(text(raw, "onTimeout")),
                    integer(raw, "openedMs"), integer(raw, "deadlineMs"),
                    GateState(text(raw, "state")), _maybe(Decision, raw, "decision"),
                    _maybe(DecidedBy, raw, "decidedBy"), integer(raw, "attempts"),
                    integer(raw, "asks"), _maybe(AckStatus, raw, "ack"))


E = TypeVar("E", bound=StrEnum)


def _maybe(kind: type[E], raw: dict[str, Json], key: str) -> E | None:
    value = optional_text(raw, key)
    return None if value is None else kind(value)


def _expiry(gate_id: str) -> TimerId:
    return TimerId(TimerKind.GATE_EXPIRY, gate_id)


def _retry(gate_id: str) -> TimerId:
    return TimerId(TimerKind.GATE_RETRY, gate_id)




class Gates:
    def __init__(self, node_id: str, config: GateConfig, send: Sender,
                 new_id: Callable[[], str]) -> None:
        self.node_id = node_id
        self.config = config
        self.send = send
        self.new_id = new_id
        self.gates: dict[str, Gate] = {}

    def on_open(self, fx: Effects, env: Envelope, body: GateOpenBody) -> None:
        known = self.gates.get(body.gate_id)
        if known is not None:
            fx.record(ev.GateOpenDuplicate(gate_id=body.gate_id, state=known.state,
                                           message_id=env.message_id))
            return
        gate = Gate(body.gate_id, body.process_inst_id, body.activity_id, body.agent_id,
                    env.to_agent_id or "", env.conversation_id, env.header(Header.ORIGIN_NODE_ID),
                    body.prompt, body.on_timeout, fx.now_ms, fx.now_ms + body.timeout_ms)
        fx.record(ev.GateOpened(gate_id=gate.gate_id, process_inst_id=gate.process_inst_id,
                                activity_id=gate.activity_id, agent_id=gate.agent_id,
                                executor_node_id=gate.executor_node_id,
                                conversation_id=env.conversation_id, deadline_ms=gate.deadline_ms,
                                on_timeout=gate.on_timeout, message_id=env.message_id,
                                timeout_ms=body.timeout_ms))
        fx.add(StartTimer(_expiry(gate.gate_id), gate.deadline_ms))
        self._ask(fx, gate)

    def _ask(self, fx: Effects, gate: Gate) -> None:
        gate = replace(gate, asks=gate.asks + 1)
        self._store(fx, gate)
        fx.record(ev.HumanAsked(gate_id=gate.gate_id, ask=gate.asks,
                                conversation_id=gate.conversation_id))
        fx.add(AskHuman(gate.gate_id, gate.conversation_id, gate.prompt, gate.asks))

    def on_human(self, fx: Effects, gate_id: str, decision: str, click: str) -> None:
        gate = self.gates.get(gate_id)
        by_person = [d.value for d in Decision if d.by_a_person]
        if gate is None or decision not in by_person:
            fx.record(ev.GateClickRejected(
                gate_id=gate_id, click=click, decision=decision,
                reason="unknown gate" if gate is None else f"decision must be one of {by_person}"))
            return
        if gate.state is not GateState.OPEN:
            fx.record(ev.GateAlreadyDecided(
                gate_id=gate_id, click=click, decision=decision, state=gate.state,
                decided=gate.decision))
            return
        self._decide(fx, gate, Decision(decision), DecidedBy.HUMAN, click)

    def on_expiry(self, fx: Effects, gate_id: str) -> None:
        gate = self.gates.get(gate_id)
        if gate is None or gate.state is not GateState.OPEN:
            return
        decision = gate.on_timeout.decision
        fx.record(ev.GateExpired(gate_id=gate_id, policy=gate.on_timeout,
                                 decision=decision))
        self._decide(fx, gate, decision, DecidedBy.TIMEOUT, None)

    def _decide(self, fx: Effects, gate: Gate, decision: Decision, by: DecidedBy,
                click: str | None) -> None:
        fx.add(CancelTimer(_expiry(gate.gate_id)))
        gate = gate.move(GateEvent.DECIDE, decision=decision, decided_by=by)
        fx.record(ev.GateDecided(gate_id=gate.gate_id, decision=decision,
                                 decided_by=by, click=click,
                                 process_inst_id=gate.process_inst_id,
                                 think_ms=fx.now_ms - gate.opened_ms))
        self._send_decision(fx, gate)

    def _send_decision(self, fx: Effects, gate: Gate) -> None:
        gate = replace(gate, attempts=gate.attempts + 1)
        self._store(fx, gate)   # persisted before the decision leaves (write-ahead)
        env = Envelope(self.new_id(), MessageType.GATE_DECISION, gate.requester_agent_id,
                       fx.now_ms, to_agent_id=gate.agent_id,   # routed by the gate's agentId
                       conversation_id=gate.conversation_id,
                       payload={"gateId": gate.gate_id, "processInstId": gate.process_inst_id,
                                "activityId": gate.activity_id,
                                "decision": gate.decision.value if gate.decision else None,
                                "decidedBy": gate.decided_by.value if gate.decided_by else None})
        fx.record(ev.GateDecisionSent(gate_id=gate.gate_id, message_id=env.message_id,
                                      attempt=gate.attempts,
                                      decision=gate.decision,
                                      agent_id=gate.agent_id))
        fx.add(StartTimer(_retry(gate.gate_id), fx.now_ms + self.config.retry_ms * gate.attempts))
        self.send(fx, env, False)

    def on_retry(self, fx: Effects, gate_id: str) -> None:
        gate = self.gates.get(gate_id)
        if gate is None or gate.state is not GateState.DECIDED:
            return
        if gate.attempts >= self.config.max_attempts:
            gate = gate.move(GateEvent.GIVE_UP)
            self._store(fx, gate)
            fx.record(ev.GateUnacked(gate_id=gate_id, attempts=gate.attempts,
                                     reason="no GATE_ACK after the last attempt"))
            return
        self._send_decision(fx, gate)

    def on_ack(self, fx: Effects, env: Envelope, body: GateAckBody) -> None:
        gate_id, status = body.gate_id, body.status
        gate = self.gates.get(gate_id)
        if gate is None or gate.state is not GateState.DECIDED:
            fx.record(ev.GateAcked(gate_id=gate_id, status=status, negative=status.negative,
                                   duplicate=True, message_id=env.message_id))
            return
        fx.add(CancelTimer(_retry(gate_id)))
        self._store(fx, gate.move(GateEvent.ACK, ack=status))
        fx.record(ev.GateAcked(gate_id=gate_id, status=status, negative=status.negative,
                               duplicate=False, message_id=env.message_id,
                               attempts=gate.attempts))

    def resend_after_restart(self, fx: Effects, gate: Gate) -> None:
        """A decision not acknowledged before the restart goes out again now: the ack (or
        the decision itself) may have died with the process."""
        fx.add(StartTimer(_retry(gate.gate_id), fx.now_ms))

    def _store(self, fx: Effects, gate: Gate) -> None:
        self.gates[gate.gate_id] = gate
        fx.add(PersistRecord(Table.GATES, gate.gate_id, gate.to_json()))

    def restore(self, fx: Effects, records: dict[str, Json]) -> None:
        """After a restart: an OPEN gate is asked again (the person's browser was talking to
        the process that died) and keeps its deadline; a DECIDED one is re-sent now."""
        for key, raw in sorted(records.items()):
            try:
                gate = Gate.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                fx.record(ev.NodeWarning(what=ev.WarningKind.GATE_RECORD_UNREADABLE, gate_id=key,
                                     reason=str(exc)[:200]))
                continue
            self.gates[gate.gate_id] = gate
            if gate.state is GateState.OPEN:
                fx.add(StartTimer(_expiry(gate.gate_id), gate.deadline_ms))
                self._ask(fx, gate)
            elif gate.state is GateState.DECIDED:
                self.resend_after_restart(fx, gate)
        if records:
            fx.record(ev.GatesRestored(gates=len(self.gates),
                                       open=sum(g.state is GateState.OPEN for g in self.gates.values()),
                                       decided=sum(g.state is GateState.DECIDED for g in self.gates.values())))
