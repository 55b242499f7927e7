"""The requester side: pending delegated requests, matched to responses by requestId.

Every request ends in exactly one outcome — the executor's status, UNDELIVERABLE or
SEND_FAILED from the outbox, or NO_RESPONSE when the timeout (30 s) fires first — and that
end is both a SettleRequest command and a history event. Pending requests are persisted so
a restarted requester still recognises its late responses. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bench.core import events as ev
from bench.core.commands import (
    CancelTimer,
    PersistRecord,
    RequestOutcome,
    SettleRequest,
    StartTimer,
    Table,
)
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, MessageType
from bench.core.frozen import quick_init_module, replace
from bench.core.inputs import TaskRequested, TimerId, TimerKind
from bench.protocols.seed.fields import integer, optional_text, text
from bench.protocols.seed.outbox import OutboundState, Outbox
from bench.protocols.seed.payloads import TaskResponseBody

_STATUS = {o.value: o for o in (RequestOutcome.COMPLETED, RequestOutcome.FAILED,
                                RequestOutcome.TIMEOUT, RequestOutcome.CANCELLED)}


@dataclass(frozen=True, slots=True)
class Pending:
    request_id: str
    message_id: str
    to_agent_id: str
    sent_ms: int
    deadline_ms: int
    outcome: RequestOutcome | None = None

    def to_json(self) -> dict[str, Json]:
        return {"requestId": self.request_id, "messageId": self.message_id,
                "toAgentId": self.to_agent_id, "sentMs": self.sent_ms,
                "deadlineMs": self.deadline_ms,
                "outcome": self.outcome.value if self.outcome else None}

    @staticmethod
    def from_json(raw: dict[str, Json]) -> Pending:
        """Raises KeyError/TypeError/ValueError on a damaged record (the caller records it)."""
        outcome = optional_text(raw, "outcome")
        return Pending(text(raw, "requestId"), text(raw, "messageId"), text(raw, "toAgentId"),
                       integer(raw, "sentMs"), integer(raw, "deadlineMs"),
                       RequestOutcome(outcome) if outcome else None)


def _asked_timeout(payload: Json) -> int | None:
    """The task timeout a request asks of its executor (payload.timeoutMs), if it asks one."""
    asked = payload.get("timeoutMs") if isinstance(payload, dict) else None
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None


def _timer(request_id: str) -> TimerId:
    return TimerId(TimerKind.REQUEST_TIMEOUT, request_id)


class Requests:
    def __init__(self, node_id: str, outbox: Outbox, default_timeout_ms: int) -> None:
        self.node_id = node_id
        self.outbox = outbox
        self.default_timeout_ms = default_timeout_ms
        self.pending: dict[str, Pending] = {}
        self.settled: dict[str, RequestOutcome] = {}

    def send(self, fx: Effects, req: TaskRequested) -> None:
        if req.request_id in self.pending or req.request_id in self.settled:
            raise ValueError(f"requestId {req.request_id!r} was already used on node {self.node_id}")
        timeout = req.timeout_ms or self.default_timeout_ms
        pending = Pending(req.request_id, req.message_id, req.to_agent_id, fx.now_ms,
                          fx.now_ms + timeout)
        self._store(fx, pending)
        env = Envelope(
            message_id=req.message_id, message_type=MessageType.TASK_REQUEST,
            from_agent_id=req.from_agent_id, timestamp_ms=fx.now_ms, to_agent_id=req.to_agent_id,
            target_node_id=req.target_node_id, conversation_id=req.conversation_id,
            scene_group_id=req.scene_group_id, payload=req.payload,
            headers={Header.REQUEST_ID.value: req.request_id,
                     Header.REPLY_NODE_ID.value: self.node_id},
        )
        fx.record(ev.RequestSent(request_id=req.request_id, message_id=req.message_id,
                                 from_agent_id=req.from_agent_id, to_agent_id=req.to_agent_id,
                                 conversation_id=req.conversation_id,
                                 deadline_ms=pending.deadline_ms, timeout_ms=timeout,
                                 task_timeout_ms=_asked_timeout(req.payload),
                                 target_node_id=req.target_node_id))
        fx.add(StartTimer(_timer(req.request_id), pending.deadline_ms))
        state = self.outbox.send(fx, env)
        if state is OutboundState.UNDELIVERABLE:
            self._settle(fx, req.request_id, RequestOutcome.UNDELIVERABLE, None)
        elif state is OutboundState.FAILED:
            self._settle(fx, req.request_id, RequestOutcome.SEND_FAILED, None)

    def on_publish_failed(self, fx: Effects, message_id: str) -> None:
        for p in self.pending.values():
            if p.message_id == message_id:
                self._settle(fx, p.request_id, RequestOutcome.SEND_FAILED, None)
                return

    def on_response(self, fx: Effects, env: Envelope, body: TaskResponseBody) -> None:
        request_id = env.header(Header.REQUEST_ID)
        if request_id is None or request_id not in self.pending:
            earlier = self.settled.get(request_id) if request_id else None
            fx.record(ev.ResponseUnmatched(request_id=request_id, message_id=env.message_id,
                                           reason=f"already settled as {earlier.value}" if earlier else
                              "no requestId header" if request_id is None else "unknown requestId"))
            return
        self._settle(fx, request_id, _STATUS[body.status], body.payload,
                     response_message_id=env.message_id)

    def on_timeout(self, fx: Effects, request_id: str) -> None:
        if request_id in self.pending:
            self._settle(fx, request_id, RequestOutcome.NO_RESPONSE, None)

    def recover(self, fx: Effects, restored: Mapping[str, Json]) -> list[str]:
        problems: list[str] = []
        recent: dict[str, str] = {}
        for key, raw in sorted(restored.items()):
            if not isinstance(raw, dict):
                problems.append(f"request record {key!r} is not an object")
                continue
            try:
                p = Pending.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(f"request record {key!r} unreadable: {exc}")
                continue
            if p.outcome is not None:
                self.settled[p.request_id] = p.outcome
                if p.deadline_ms > fx.now_ms:
                    recent[p.request_id] = p.outcome.value
            elif p.deadline_ms <= fx.now_ms:
                self.pending[p.request_id] = p
                self._settle(fx, p.request_id, RequestOutcome.NO_RESPONSE, None)
            else:
                # never longer than its whole timeout from now: a deadline taken from a clock
                # that was set ahead (and since set right) would hold it far past its timeout
                self.pending[p.request_id] = p
                fx.add(StartTimer(_timer(p.request_id),
                                  min(p.deadline_ms, fx.now_ms + p.deadline_ms - p.sent_ms)))
        if restored:
            fx.record(ev.RequestsRestored(requests=len(restored), settled=recent))
        return problems

    def _store(self, fx: Effects, p: Pending) -> None:
        fx.add(PersistRecord(Table.REQUESTS, p.request_id, p.to_json()))
        if p.outcome is None:
            self.pending[p.request_id] = p

    def _settle(self, fx: Effects, request_id: str, outcome: RequestOutcome, response: Json,
                response_message_id: str | None = None) -> None:
        p = self.pending.pop(request_id)
        self.settled[request_id] = outcome
        self._store(fx, replace(p, outcome=outcome))
        fx.add(CancelTimer(_timer(request_id)))
        fx.record(ev.RequestSettled(request_id=request_id, outcome=outcome,
                                    latency_ms=fx.now_ms - p.sent_ms,
                                    response_message_id=response_message_id))
        fx.add(SettleRequest(request_id, outcome, response))


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
