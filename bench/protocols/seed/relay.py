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
from bench.core.machine import Machine
from bench.core.vocabulary import FlowKind, Trust
from bench.protocols.seed.outbox import Sender
from bench.protocols.seed.payloads import FlowEventBody


class ReceiverState(StrEnum):
    IN_ORDER = "IN_ORDER"   # everything up to the cursor delivered, nothing held
    HOLDING = "HOLDING"     # a hole: later seqs held while the reorder window runs


class ReceiverEvent(StrEnum):
    CAUGHT_UP = "CAUGHT_UP"            # after an arrival, nothing is held
    HOLE_SEEN = "HOLE_SEEN"            # after an arrival, a seq beyond the cursor is held
    WINDOW_EXPIRED = "WINDOW_EXPIRED"  # the reorder window ran out: the hole is a gap


# Theory of operation (one machine per stream on the home node): frames arrive with their
# seq; the receiver delivers in seq order from its cursor and drops seq <= cursor as
# duplicates. A frame beyond cursor+1 opens a hole: the receiver HOLDs later frames and
# starts one reorder window, counted from when the hole appeared (later arrivals do not
# push it: a busy stream would otherwise never declare its hole). Filling the hole cancels
# the window. When it expires the hole is recorded as an explicit gap, the cursor jumps
# past it, and any further hole gets a window of its own, counted from when that hole
# appeared (it may have run out already: then it is declared at once).
_R, _V = ReceiverState, ReceiverEvent
RECEIVER = Machine[ReceiverState, ReceiverEvent]("relay receiver", {
    (_R.IN_ORDER, _V.CAUGHT_UP): _R.IN_ORDER,
    (_R.IN_ORDER, _V.HOLE_SEEN): _R.HOLDING,
    (_R.HOLDING, _V.HOLE_SEEN): _R.HOLDING,
    (_R.HOLDING, _V.CAUGHT_UP): _R.IN_ORDER,
    (_R.HOLDING, _V.WINDOW_EXPIRED): _R.IN_ORDER,
}, terminal=frozenset())


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
    # seq -> kind, text, lane, conversation, trust
    held: dict[int, tuple[FlowKind, str, str, str, Trust]] = field(default_factory=dict)
    arrived: dict[int, int] = field(default_factory=dict)   # held seq -> when it arrived
    state: ReceiverState = ReceiverState.IN_ORDER




class Relay:
    def __init__(self, node_id: str, config: RelayConfig, send: Sender,
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
                                 agent_id=flow.agent_id, task_id=flow.task_id, flow_kind=kind,
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
        fx.record(ev.RelayFrame(stream=flow.stream, stream_seq=seq, flow_kind=kind, text=text,
                                conversation_id=flow.conversation_id, task_id=flow.task_id))
        local = self.local_watchers(flow.conversation_id)
        if local:   # someone watches here: deliver locally, nothing crosses the network
            for sub in local:
                self._deliver(fx, sub, flow.conversation_id, flow.stream, seq, kind.value, text,
                              flow.lane(kind), Trust.VERIFIED)
            if flow.home_node_id == self.node_id:
                self._home_delivered(fx, flow.stream, seq)
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
        self.send(fx, env, False)

    def _home_delivered(self, fx: Effects, stream: str, seq: int) -> None:
        """The home node delivered its own frame to its tabs directly: its cursor moves
        past it, so a later frame it relays to itself (no tab watching then) is next in
        line, never held behind a hole of frames its tabs already saw."""
        state = self.cursor_for(stream)
        if seq > state.cursor:
            state.cursor = seq
            for old in [s for s in state.held if s <= seq]:
                state.held.pop(old)
                state.arrived.pop(old, None)
            self._advance(fx, stream, state)    # persists the cursor; releases what follows
            self._settle(fx, stream, state)

    # -- receiver side -----------------------------------------------------------------------
    def cursor_for(self, stream: str) -> _Inbound:
        return self.inbound.setdefault(stream, _Inbound())

    def receive(self, fx: Effects, env: Envelope, body: FlowEventBody, local: bool = False) -> None:
        """A relayed FLOW_EVENT (its payload already read: `bench.protocols.seed.payloads`). One this
        node relayed to itself (LOCAL_CONSUMED: it is the conversation's home and had no tab
        watching when it produced the event) is its own, and delivered `verified`."""
        stream, seq = body.stream, body.seq
        state = self.cursor_for(stream)
        if seq <= state.cursor or seq in state.held:
            fx.record(ev.RelayDuplicate(stream=stream, stream_seq=seq, cursor=state.cursor,
                                        message_id=env.message_id))
            return
        state.held[seq] = (body.kind, body.text, body.lane, env.conversation_id or "",
                           Trust.VERIFIED if local else Trust.CLAIMED)
        state.arrived[seq] = fx.now_ms
        self._advance(fx, stream, state)
        self._settle(fx, stream, state)

    def _settle(self, fx: Effects, stream: str, state: _Inbound) -> None:
        """After an arrival (or a gap): one step of the receiver machine; entering HOLDING
        starts the reorder window, leaving it before it expired cancels it. The window
        runs from when the hole appeared — when the first frame held beyond it arrived —
        so a hole left behind by a gap just declared does not wait a window of its own
        after the previous one: a stream with many holes would fall further behind."""
        before = state.state
        event = ReceiverEvent.HOLE_SEEN if state.held else ReceiverEvent.CAUGHT_UP
        state.state = RECEIVER.next(before, event, stream)
        if before is ReceiverState.IN_ORDER and state.state is ReceiverState.HOLDING:
            appeared = min(state.arrived.values(), default=fx.now_ms)
            fx.add(StartTimer(_gap_timer(stream),
                              max(fx.now_ms, appeared + self.config.reorder_window_ms)))
        elif before is ReceiverState.HOLDING and state.state is ReceiverState.IN_ORDER:
            fx.add(CancelTimer(_gap_timer(stream)))

    def on_gap_timer(self, fx: Effects, stream: str) -> None:
        state = self.inbound.get(stream)
        if state is None or state.state is ReceiverState.IN_ORDER:
            return   # the hole was filled, or this stream shares a cursor: nothing to declare
        state.state = RECEIVER.next(state.state, ReceiverEvent.WINDOW_EXPIRED, stream)
        first = min(state.held)
        fx.record(ev.RelayGap(stream=stream, from_seq=state.cursor + 1, to_seq=first - 1,
                              reason=f"not received within the {self.config.reorder_window_ms} ms "
                         "reorder window"))
        state.cursor = first - 1
        self._advance(fx, stream, state)
        self._settle(fx, stream, state)   # a further hole gets its own window

    def _advance(self, fx: Effects, stream: str, state: _Inbound) -> None:
        while state.cursor + 1 in state.held:
            state.cursor += 1
            kind, text, lane, conversation, trust = state.held.pop(state.cursor)
            state.arrived.pop(state.cursor, None)
            fx.record(ev.RelayAccepted(stream=stream, stream_seq=state.cursor, text=text,
                                       conversation_id=conversation))
            for sub in self.deliver_to(conversation):
                self._deliver(fx, sub, conversation, stream, state.cursor, kind.value, text,
                              lane, trust)
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
                                    flow_kind=FlowKind(kind), text=text, lane=lane, trust=trust))

    # -- restart ---------------------------------------------------------------------------------
    def restore(self, fx: Effects, records: dict[str, Json]) -> None:
        """Sequence numbers sent and cursors received, read back after a restart; a record
        that cannot be read is a warning (its stream starts again from 0)."""
        for key, raw in sorted(records.items()):
            direction, _, stream = key.partition("|")
            value = raw.get("seq" if direction == "out" else "cursor") \
                if isinstance(raw, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or not stream \
                    or direction not in ("out", "in"):
                fx.record(ev.NodeWarning(what=ev.WarningKind.STREAM_RECORD_UNREADABLE,
                                     reason=f"record {key!r}: {str(raw)[:120]}"))
            elif direction == "out":
                self.out_seq[stream] = value
            else:
                self.cursor_for(stream).cursor = value
