"""FLOW-RELAY (DESIGN §3, seed 002 §6): streamed flow events from an executor to the
people watching the conversation.

Sender side: every event of a stream (`conversationId|agentId`) gets the next `seq`;
thinking text is coalesced in a window (150 ms, at most 4,096 bytes per frame) and any
pending thinking is flushed before a non-thinking event, so order is kept. If this node
has a subscriber for the conversation, the event is delivered here (trust `verified`) and
nothing crosses the network; only otherwise is a FLOW_EVENT relayed to the conversation's
home node. Receiver side: one cursor per stream; seq ≤ cursor is a duplicate, a gap is
held for a reorder window and then recorded explicitly; delivery goes only to that
conversation's subscribers (trust `claimed`). No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from bench.core import events as ev
from bench.core.commands import CancelTimer, Deliver, PersistRecord, StartTimer, Table
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Json, MessageType
from bench.core.inputs import TimerId, TimerKind


class FlowKind(StrEnum):
    TOKEN = "token"
    THINKING = "thinking"
    STEP = "step"
    ARTIFACT = "artifact"
    COMPLETE = "complete"
    ERROR = "error"


class Trust(StrEnum):
    VERIFIED = "verified"   # produced on this node
    CLAIMED = "claimed"     # relayed: the sender says so


@dataclass(frozen=True, slots=True)
class RelayConfig:
    thinking_interval_ms: int = 150
    thinking_max_bytes: int = 4096
    reorder_window_ms: int = 500


@dataclass(frozen=True, slots=True)
class Flow:
    """Where a task's stream goes: known from the TASK_REQUEST that started it."""

    task_id: str
    conversation_id: str
    agent_id: str
    home_node_id: str | None
    requester_agent_id: str
    process_inst_id: str
    activity_id: str = "act-1"

    @property
    def stream(self) -> str:
        return f"{self.conversation_id}|{self.agent_id}"

    def lane(self, kind: FlowKind) -> str:
        return f"{self.agent_id}:{self.process_inst_id}:{self.activity_id}:{kind.value}"


def _flush_timer(stream: str) -> TimerId:
    return TimerId(TimerKind.THINKING_FLUSH, stream)


def _gap_timer(stream: str) -> TimerId:
    return TimerId(TimerKind.REORDER_GAP, stream)


@dataclass
class _Pending:
    flow: Flow
    text: str = ""


@dataclass
class _Inbound:
    cursor: int = 0
    held: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)  # seq -> kind, text, lane, conv
    window_open: bool = False   # a reorder window is running for the current gap


#: Sends a FLOW_EVENT envelope to a node (the node's outbox, explicit target).
Send = Callable[[Effects, Envelope], object]


class Relay:
    def __init__(self, node_id: str, config: RelayConfig, send: Send,
                 new_id: Callable[[], str]) -> None:
        self.node_id = node_id
        self.config = config
        self.send = send
        self.new_id = new_id
        self.subscribers: dict[str, str] = {}           # subscriber -> conversation
        self.out_seq: dict[str, int] = {}               # stream -> last seq sent
        self.thinking: dict[str, _Pending] = {}         # stream -> coalescing buffer
        self.inbound: dict[str, _Inbound] = {}          # stream -> cursor and held events

    # -- subscribers (SSE emitters on this node) ---------------------------------------------
    def attach(self, fx: Effects, subscriber_id: str, conversation_id: str) -> None:
        self.subscribers[subscriber_id] = conversation_id
        fx.record(ev.SubscriberAttached(subscriber_id=subscriber_id,
                                        conversation_id=conversation_id))

    def detach(self, fx: Effects, subscriber_id: str) -> None:
        conversation = self.subscribers.pop(subscriber_id, None)
        fx.record(ev.SubscriberDetached(subscriber_id=subscriber_id, conversation_id=conversation))

    def local_watchers(self, conversation_id: str) -> list[str]:
        """Subscribers here that make relaying unnecessary (variants override)."""
        return self.watchers(conversation_id)

    def watchers(self, conversation_id: str) -> list[str]:
        """broadcastToConversation: exactly that conversation's subscribers, never another's."""
        return sorted(s for s, c in self.subscribers.items() if c == conversation_id)

    # -- sender side -------------------------------------------------------------------------
    def emit(self, fx: Effects, flow: Flow, kind: FlowKind, text: str) -> None:
        fx.record(ev.FlowEmitted(stream=flow.stream, conversation_id=flow.conversation_id,
                                 agent_id=flow.agent_id, task_id=flow.task_id, flow_kind=kind.value,
                                 text=text))
        if kind is FlowKind.THINKING:
            pending = self.thinking.get(flow.stream)
            if pending is None:
                pending = self.thinking[flow.stream] = _Pending(flow)
                fx.add(StartTimer(_flush_timer(flow.stream),
                                  fx.now_ms + self.config.thinking_interval_ms))
            pending.text += text
            if len(pending.text.encode("utf-8")) >= self.config.thinking_max_bytes:
                self.flush_thinking(fx, flow.stream)
            return
        self.flush_thinking(fx, flow.stream)   # pending thinking first: order is kept
        self._send(fx, flow, kind, text)

    def flush_thinking(self, fx: Effects, stream: str) -> None:
        pending = self.thinking.pop(stream, None)
        if pending is None:
            return
        fx.add(CancelTimer(_flush_timer(stream)))
        self._send(fx, pending.flow, FlowKind.THINKING, pending.text)

    def _send(self, fx: Effects, flow: Flow, kind: FlowKind, text: str) -> None:
        seq = self.out_seq.get(flow.stream, 0) + 1
        self.out_seq[flow.stream] = seq
        fx.add(PersistRecord(Table.STREAMS, f"out|{flow.stream}", {"seq": seq}))
        fx.record(ev.RelayFrame(stream=flow.stream, stream_seq=seq, flow_kind=kind.value, text=text,
                                conversation_id=flow.conversation_id, task_id=flow.task_id))
        local = self.local_watchers(flow.conversation_id)
        if local:   # someone watches here: deliver locally, nothing crosses the network
            for sub in local:
                self._deliver(fx, sub, flow.conversation_id, flow.stream, seq, kind.value, text,
                              flow.lane(kind), Trust.VERIFIED)
            return
        if flow.home_node_id is None:
            fx.record(ev.RelayDropped(stream=flow.stream, stream_seq=seq,
                                      reason="no local subscriber and no home node to relay to"))
            return
        env = Envelope(self.new_id(), MessageType.FLOW_EVENT, flow.agent_id, fx.now_ms,
                       to_agent_id=flow.requester_agent_id, target_node_id=flow.home_node_id,
                       conversation_id=flow.conversation_id,
                       payload={"stream": flow.stream, "seq": seq, "kind": kind.value,
                                "text": text, "lane": flow.lane(kind)})
        fx.record(ev.RelaySent(stream=flow.stream, stream_seq=seq, message_id=env.message_id,
                               conversation_id=flow.conversation_id,
                               home_node_id=flow.home_node_id))
        self.send(fx, env)

    # -- receiver side -----------------------------------------------------------------------
    def cursor_for(self, stream: str) -> _Inbound:
        return self.inbound.setdefault(stream, _Inbound())

    def receive(self, fx: Effects, env: Envelope) -> str | None:
        """Handle a relayed FLOW_EVENT; returns a problem string for a malformed payload."""
        p = env.payload
        if not isinstance(p, dict):
            return "FLOW_EVENT payload is not an object"
        stream, seq, kind, text, lane = (p.get("stream"), p.get("seq"), p.get("kind"),
                                         p.get("text"), p.get("lane"))
        if not (isinstance(stream, str) and isinstance(seq, int) and not isinstance(seq, bool)
                and seq > 0 and isinstance(kind, str) and isinstance(text, str)
                and isinstance(lane, str) and env.conversation_id):
            return "FLOW_EVENT payload needs stream, seq > 0, kind, text, lane and a conversationId"
        state = self.cursor_for(stream)
        if seq <= state.cursor or seq in state.held:
            fx.record(ev.RelayDuplicate(stream=stream, stream_seq=seq, cursor=state.cursor,
                                        message_id=env.message_id))
            return None
        state.held[seq] = (kind, text, lane, env.conversation_id)
        self._advance(fx, stream, state)
        self._window(fx, stream, state)
        return None

    def _window(self, fx: Effects, stream: str, state: _Inbound) -> None:
        """A gap gets one reorder window, counted from when it appeared: later arrivals do
        not push the deadline (a busy stream would otherwise never declare its hole)."""
        if state.held and not state.window_open:
            state.window_open = True
            fx.add(StartTimer(_gap_timer(stream), fx.now_ms + self.config.reorder_window_ms))
        elif not state.held and state.window_open:
            state.window_open = False
            fx.add(CancelTimer(_gap_timer(stream)))

    def on_gap_timer(self, fx: Effects, stream: str) -> None:
        state = self.inbound.get(stream)
        if state is None:
            return
        state.window_open = False
        if not state.held:
            return
        first = min(state.held)
        fx.record(ev.RelayGap(stream=stream, from_seq=state.cursor + 1, to_seq=first - 1,
                              reason=f"not received within the {self.config.reorder_window_ms} ms "
                         "reorder window"))
        state.cursor = first - 1
        self._advance(fx, stream, state)
        self._window(fx, stream, state)   # a further hole gets its own window

    def _advance(self, fx: Effects, stream: str, state: _Inbound) -> None:
        while state.cursor + 1 in state.held:
            state.cursor += 1
            kind, text, lane, conversation = state.held.pop(state.cursor)
            fx.record(ev.RelayAccepted(stream=stream, stream_seq=state.cursor, text=text,
                                       conversation_id=conversation))
            for sub in self.deliver_to(conversation):
                self._deliver(fx, sub, conversation, stream, state.cursor, kind, text, lane,
                              Trust.CLAIMED)
        fx.add(PersistRecord(Table.STREAMS, f"in|{stream}", {"cursor": state.cursor}))

    def deliver_to(self, conversation_id: str) -> list[str]:
        """Who receives a relayed event: that conversation's subscribers (variants override)."""
        return self.watchers(conversation_id)

    def _deliver(self, fx: Effects, subscriber: str, conversation: str, stream: str, seq: int,
                 kind: str, text: str, lane: str, trust: Trust) -> None:
        fx.add(Deliver(subscriber, conversation, stream, seq, kind, text, lane, trust.value))
        fx.record(ev.RelayDelivered(subscriber_id=subscriber,
                                    subscriber_conversation=self.subscribers.get(subscriber),
                                    conversation_id=conversation, stream=stream, stream_seq=seq,
                                    flow_kind=kind, text=text, lane=lane, trust=trust.value))

    # -- restart ---------------------------------------------------------------------------------
    def restore(self, records: dict[str, Json]) -> None:
        for key, raw in records.items():
            if not isinstance(raw, dict):
                continue
            direction, _, stream = key.partition("|")
            if direction == "out" and isinstance(raw.get("seq"), int):
                self.out_seq[stream] = int(raw["seq"])  # type: ignore[arg-type]
            elif direction == "in" and isinstance(raw.get("cursor"), int):
                self.cursor_for(stream).cursor = int(raw["cursor"])  # type: ignore[arg-type]
