"""The reference requester of the A2A-over-MQTT profile: `Requester.handle(input) ->
list[command]`, sans-IO, keeping every MUST of docs/profiles/a2a-mqtt.md that binds a
requester — the bench's client for the profile, and the one the SDK's is judged beside.

What it promises, and where:
- it publishes only once its reply topic is subscribed (A2M-SESS-2), every request with
  Response Topic and fresh Correlation Data, unique among those in flight (A2M-RR-2,
  A2M-REQ-1), the Task.id the workload gave it (A2M-RR-5, A2M-RR-7);
- the retry profile (A2M-RETRY-1..6): an attempt not accepted, or unanswered for
  `reply_first_ms`, is retried with new Correlation Data and the same Task.id after a
  backoff of 1, 2, 4 s ±20 %, at most `max_attempts` in all; never again once any
  correlated reply or stream item came; a stream stalled for `stream_idle_ms` is followed
  up with GetTask on the Task.id, not by publishing the request again (A2M-RETRY-7);
- a reply with unknown or missing Correlation Data, or a pooled reply that names no
  responder, is a protocol error: recorded and ignored (A2M-REQ-2, A2M-REQ-3); once a reply
  names a responder (a pool's member, or a handover), every later operation on that task
  goes to it directly (A2M-REQ-4, A2M-HAND-2);
- a terminal status, or input-required, ends the correlation's stream (A2M-STREAM-2..3).
No I/O, no clock, no randomness: correlation ids come from the boot id, jitter from a
hash of them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, assert_never

from bench.core import events as ev
from bench.core.commands import Table
from bench.core.config import NodeConfig, OAuth
from bench.core.vocabulary import RequestOutcome
from bench.protocols.a2a_mqtt import oauth
from bench.protocols.a2a_mqtt.io import (
    CancelTimer,
    Command,
    Connect,
    ConnectionUp,
    Effects,
    MessageReceived,
    PersistRecord,
    Publish,
    PublishSettled,
    RequesterInput,
    SettleRequest,
    Started,
    StartTimer,
    Stopping,
    Subscribe,
    Subscribed,
    TaskRequested,
    TimerFired,
    TimerId,
    TimerKind,
)
from bench.protocols.a2a_mqtt.wire import (
    AUTHORIZATION,
    CONTEXT_ID,
    INTERRUPTED,
    RESPONDER_AGENT_ID,
    TERMINAL,
    Json,
    Method,
    Props,
    TaskState,
    Topics,
)


@dataclass(frozen=True, slots=True)
class RetryProfile:
    """A2M-RETRY-1's defaults."""

    reply_first_ms: int = 15_000
    stream_idle_ms: int = 30_000
    max_attempts: int = 3
    backoff_ms: tuple[int, ...] = (1_000, 2_000, 4_000)
    jitter: float = 0.2

    @property
    def budget_ms(self) -> int:
        """The longest an operation nobody answers stays open: every attempt's wait and
        every backoff at its longest."""
        waits = self.max_attempts * self.reply_first_ms
        backoffs = sum(self.backoff_ms[:self.max_attempts - 1]) * (1 + self.jitter)
        return int(waits + backoffs)


@dataclass(frozen=True, slots=True)
class RequesterConfig:
    topics: Topics
    agent_id: str
    #: the reply topic's suffix: collision resistant, from the driver's entropy (A2M-SESS-4)
    reply_suffix: str
    retry: RetryProfile = field(default_factory=RetryProfile)
    #: the Message Expiry Interval set on each request (None: none; A2M-RETRY-9)
    request_expiry_s: int | None = None
    #: bearer tokens it sends on every request (A2M-REQ-5; None: none)
    oauth: OAuth | None = None


class Phase(StrEnum):
    """Where an operation is: waiting to be sent (its reply topic not yet subscribed), waiting
    out a backoff, in flight (no correlated reply yet), answered (a reply came: no retry
    ever again; a stream or a non-final Task may still be coming), or settled."""

    QUEUED = "QUEUED"
    BACKOFF = "BACKOFF"
    IN_FLIGHT = "IN_FLIGHT"
    ANSWERED = "ANSWERED"
    SETTLED = "SETTLED"


@dataclass(frozen=True, slots=True)
class Operation:
    op_id: str
    method: Method
    task_id: str
    agent_id: str | None
    pool_id: str | None
    context_id: str | None
    text: str
    asked_ms: int
    phase: Phase = Phase.QUEUED
    attempt: int = 0
    correlations: tuple[str, ...] = ()      # hex, every attempt's
    chunks: tuple[str, ...] = ()            # artifact text streamed so far
    why: ev.AttemptWhy = ev.AttemptWhy.FIRST   # why the next attempt is sent
    turn: int = 1                           # a multi-turn task's turn this operation sends
    #: the agent the latest reply to it named as answering for its task (A2M-HAND-2): kept
    #: with the operation, so a restart still knows where the task's follow-ups go; and when
    #: (`named_ms`), so the restart takes the latest name among the task's operations
    responder: str | None = None
    named_ms: int | None = None

    def to_json(self) -> dict[str, Json]:
        return {"opId": self.op_id, "method": self.method.value, "taskId": self.task_id,
                "agentId": self.agent_id, "poolId": self.pool_id, "contextId": self.context_id,
                "text": self.text, "askedMs": self.asked_ms, "phase": self.phase.value,
                "attempt": self.attempt, "correlations": list(self.correlations),
                "chunks": list(self.chunks), "why": self.why.value, "turn": self.turn,
                **({"responder": self.responder} if self.responder else {}),
                **({"namedMs": self.named_ms} if self.named_ms is not None else {})}

    @staticmethod
    def from_json(raw: Json) -> Operation:
        if not isinstance(raw, dict):
            raise TypeError("operation record is not an object")
        return Operation(str(raw["opId"]), Method(raw["method"]), str(raw["taskId"]),
                         raw.get("agentId"), raw.get("poolId"), raw.get("contextId"),
                         str(raw.get("text", "")), int(raw["askedMs"]), Phase(raw["phase"]),
                         int(raw["attempt"]), tuple(raw.get("correlations", ())),
                         tuple(raw.get("chunks", ())),
                         ev.AttemptWhy(raw.get("why", ev.AttemptWhy.FIRST.value)),
                         int(raw.get("turn", 1)), raw.get("responder"),
                         None if raw.get("namedMs") is None else int(raw["namedMs"]))


_OUTCOME = {TaskState.COMPLETED: ev.A2mOutcome.COMPLETED, TaskState.FAILED: ev.A2mOutcome.FAILED,
            TaskState.CANCELED: ev.A2mOutcome.CANCELED, TaskState.REJECTED: ev.A2mOutcome.REJECTED,
            TaskState.INPUT_REQUIRED: ev.A2mOutcome.INPUT_REQUIRED,
            TaskState.AUTH_REQUIRED: ev.A2mOutcome.AUTH_REQUIRED,
            TaskState.WORKING: ev.A2mOutcome.WORKING, TaskState.SUBMITTED: ev.A2mOutcome.SUBMITTED}


class Requester:
    """One requester agent: its reply topic, its operations in flight, and who answers
    for each task."""

    @classmethod
    def for_node(cls, config: NodeConfig) -> Requester:
        """The requester a topology's node is; its reply suffix the one its deployment drew
        (collision resistant, A2M-SESS-4), the same across its restarts (its persistent
        session keeps the topic); else its node id."""
        assert config.a2a is not None, f"node {config.node_id} is not an A2A-over-MQTT agent"
        return cls(RequesterConfig(Topics(config.a2a.org_id, config.namespace),
                                   config.agents[0],
                                   config.a2a.reply_suffix or f"r-{config.node_id}",
                                   request_expiry_s=config.a2a.request_expiry_s,
                                   oauth=config.a2a.oauth))

    def __init__(self, config: RequesterConfig) -> None:
        self.config = config
        self.reply_topic = config.topics.reply(config.agent_id, config.reply_suffix)
        self.ops: dict[str, Operation] = {}
        self.by_correlation: dict[str, str] = {}      # hex -> op id
        self.to_a_pool: set[str] = set()              # hex of the attempts sent to a pool
        self.responder_of: dict[str, str] = {}        # Task.id -> the agent answering for it
        self.subscribed = False
        self.boot_id = ""
        self._n = 0
        #: audience -> its bearer token (the header value) and when that expires (ms)
        self.tokens: dict[str, tuple[str, float]] = {}

    def handle(self, inp: RequesterInput) -> list[Command]:
        fx = Effects(inp.now_ms)
        match inp:
            case Started():
                self._on_started(fx, inp)
            case Stopping():
                pass    # not discoverable: nothing to say on leaving
            case ConnectionUp():
                fx.add(Subscribe((self.reply_topic,), 1))
            case Subscribed():
                self.subscribed = True
                # the generic record of a node that is up: a requester serves no agent
                fx.record(ev.ExecutorsRegistered(registered=0, expected=0, agents=[],
                                                 subscribed=list(inp.filters)))
                for op in sorted(self.ops.values(), key=lambda o: o.asked_ms):
                    if op.phase is Phase.QUEUED:
                        self._send(fx, op)
            case TaskRequested():
                self._ask(fx, _operation(inp), inp.message_id)
            case MessageReceived():
                self._on_reply(fx, inp)
            case PublishSettled():
                self._on_settled_publish(fx, inp)
            case TimerFired():
                self._on_timer(fx, inp)
            case _:
                assert_never(inp)
        return list(fx.commands)

    # -- life -------------------------------------------------------------------------------------
    def _on_started(self, fx: Effects, inp: Started) -> None:
        self.boot_id = inp.boot_id
        # a persistent session keeps the reply topic's subscription (A2M-SESS-5); a
        # requester is not discoverable, so it leaves no will
        fx.add(Connect(self.config.topics.client_id(self.config.agent_id), None, b""))
        for key, raw in sorted(inp.restored.requests.items()):
            try:
                op = Operation.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                fx.record(ev.NodeWarning(what=ev.WarningKind.RESTORE_REQUESTS, reason=f"operation "
                                         f"record {key!r} unreadable: {exc}"))
                continue
            self.ops[op.op_id] = op
        # who answers for each task, as the latest reply named it before the restart: by
        # when it was named, not when the operation was asked (a GetTask asked later may hold
        # an older name than its SendMessage's: a pool member's "no such task", then the
        # member that had it answering once it was thawed)
        for op in sorted(self.ops.values(),
                         key=lambda o: (-1 if o.named_ms is None else o.named_ms,
                                        o.asked_ms, o.op_id)):
            if op.responder is not None:
                self.responder_of[op.task_id] = op.responder
        for op in sorted(self.ops.values(), key=lambda o: o.op_id):
            if op.phase is Phase.ANSWERED:
                # a reply came before the process died: never published again (A2M-RETRY-6);
                # its old correlations died with the in-flight map, so it is followed up
                self._follow_up(fx, op)
            elif op.phase is Phase.SETTLED:
                continue
            elif op.attempt >= self.config.retry.max_attempts:
                self._settle(fx, op, ev.A2mOutcome.NO_REPLY, None, None)
            else:   # sent again, on the new reply path, once it is subscribed
                self._put(fx, replace(op, phase=Phase.QUEUED, why=ev.AttemptWhy.RESTART))

    # -- operations ---------------------------------------------------------------------------------
    def _ask(self, fx: Effects, op: Operation, message_id: str) -> None:
        # the profile-neutral record every requester keeps (metrics, reports, generic rules);
        # its message id is the one the workload gave the operation
        budget = self.config.retry.budget_ms
        fx.record(ev.RequestSent(request_id=op.op_id, message_id=message_id,
                                 from_agent_id=self.config.agent_id,
                                 to_agent_id=op.agent_id or f"{POOL}{op.pool_id}",
                                 conversation_id=op.context_id,
                                 deadline_ms=fx.now_ms + budget, timeout_ms=budget))
        self._put(fx, op)
        if self.subscribed:       # A2M-SESS-2: never before the reply topic is routed here
            self._send(fx, op)

    def _target(self, op: Operation) -> str:
        """Where an attempt goes: the responder named for the task by the latest reply
        (A2M-HAND-2, A2M-REQ-4), else the agent asked for, else the pool (A2M-RETRY-8)."""
        agent = self.responder_of.get(op.task_id) or op.agent_id
        if agent is not None:
            return self.config.topics.request(agent)
        assert op.pool_id is not None, f"operation {op.op_id} names neither agent nor pool"
        return self.config.topics.pool(op.pool_id)

    def bearer_for(self, op: Operation, topic: str, now_ms: float) -> str | None:
        """The `a2a-authorization` value for a request to `topic` (None: tokens not in use):
        a token for the responder's unit, minted again when less than REFRESH_AT of its
        life is left — a retry never goes out with an expired one (OAuth item 7)."""
        config = self.config.oauth
        if config is None:
            return None
        unit = topic.split("/")[4]      # $a2a/v1/request/{org}/{unit}/...
        aud = OAuth.audience_of(self.config.topics.org_id, unit)
        held = self.tokens.get(aud)
        if held is None or held[1] - now_ms < config.ttl_s * 1000 * oauth.REFRESH_AT:
            held = self.tokens[aud] = oauth.mint(config, self.config.agent_id, aud, now_ms)
        return held[0]

    def correlation_for(self, op: Operation) -> bytes:
        """Fresh Correlation Data for the next attempt (variants override this)."""
        self._n += 1
        return f"{self.boot_id}.{self._n}".encode()

    def _send(self, fx: Effects, op: Operation) -> None:
        correlation = self.correlation_for(op)
        attempt = op.attempt + 1
        sent = replace(op, phase=Phase.IN_FLIGHT, attempt=attempt,
                       correlations=(*op.correlations, correlation.hex()))
        self.by_correlation[correlation.hex()] = op.op_id
        topic = self._target(op)
        if op.pool_id is not None and topic == self.config.topics.pool(op.pool_id):
            self.to_a_pool.add(correlation.hex())
        users = ((CONTEXT_ID, op.context_id),) if op.context_id else ()
        bearer = self.bearer_for(op, topic, fx.now_ms)
        if bearer is not None:
            users = (*users, (AUTHORIZATION, bearer))
        props = Props(response_topic=self.reply_topic, correlation_data=correlation,
                      user_properties=users, content_type="application/json",
                      message_expiry_s=self.config.request_expiry_s)
        fx.add(Publish(topic, self._body(sent, correlation), 1, False, correlation.hex(), props))
        fx.record(ev.A2mAttempt(op_id=op.op_id, method=op.method.value, task_id=op.task_id,
                                attempt=attempt, correlation=correlation.hex(), topic=topic,
                                why=op.why, expiry_s=self.config.request_expiry_s,
                                context_id=op.context_id if op.method in (
                                    Method.SEND, Method.SEND_STREAMING) else None,
                                sent_ms=fx.now_ms,
                                bearer=None if self.config.oauth is None else bearer is not None))
        fx.add(StartTimer(TimerId(TimerKind.FIRST_REPLY, op.op_id),
                          fx.now_ms + self.config.retry.reply_first_ms))
        self._put(fx, sent)

    def _body(self, op: Operation, correlation: bytes) -> bytes:
        params: dict[str, Json]
        if op.method in (Method.GET_TASK, Method.CANCEL_TASK):
            params = {"id": op.task_id}
        else:
            message: dict[str, Json] = {"messageId": f"{op.op_id}.{op.attempt}",
                                        "role": "ROLE_USER", "taskId": op.task_id,
                                        "parts": [{"text": op.text}]}
            if op.context_id is not None:
                message["contextId"] = op.context_id
            params = {"message": message}
        return json.dumps({"jsonrpc": "2.0", "id": correlation.hex(), "method": op.method.value,
                           "params": params}, separators=(",", ":"), sort_keys=True).encode()

    def _on_settled_publish(self, fx: Effects, inp: PublishSettled) -> None:
        op = self.ops.get(self.by_correlation.get(inp.message_id, ""))
        if op is not None and inp.reason_code:   # more than Success: a fact worth keeping
            fx.record(ev.A2mPuback(op_id=op.op_id, correlation=inp.message_id,
                                   reason_code=inp.reason_code, topic=self._target(op)))
        refused = inp.reason_code is not None and inp.reason_code >= 0x80
        if (inp.ok and not refused) or op is None or op.phase is not Phase.IN_FLIGHT \
                or op.correlations[-1] != inp.message_id:
            return
        # not accepted by the client or the broker: retry-eligible (A2M-RETRY-5)
        fx.add(CancelTimer(TimerId(TimerKind.FIRST_REPLY, op.op_id)))
        self._retry_or_give_up(fx, op, ev.AttemptWhy.NOT_ACCEPTED, ev.A2mOutcome.NOT_SENT)

    def _on_timer(self, fx: Effects, inp: TimerFired) -> None:
        op = self.ops.get(inp.timer.key)
        if op is None or op.phase is Phase.SETTLED:
            return
        match inp.timer.kind:
            case TimerKind.FIRST_REPLY if op.phase is Phase.IN_FLIGHT:
                self._retry_or_give_up(fx, op, ev.AttemptWhy.NO_FIRST_REPLY,
                                       ev.A2mOutcome.NO_REPLY)
            case TimerKind.BACKOFF if op.phase is Phase.BACKOFF:
                if self.subscribed:
                    self._send(fx, op)
                else:
                    self._put(fx, replace(op, phase=Phase.QUEUED))
            case TimerKind.STREAM_IDLE if op.phase is Phase.ANSWERED:
                self._follow_up(fx, op)
            case _:
                pass   # a timer of a phase already left: its firing crossed the move

    def _follow_up(self, fx: Effects, op: Operation) -> None:
        """A2M-RETRY-7: the operation ends without its answer, and GetTask on its Task.id
        asks where the task stands — never the original request again."""
        self._settle(fx, op, ev.A2mOutcome.NO_REPLY, None, None)
        if op.method is not Method.GET_TASK:
            self._ask(fx, Operation(f"{op.op_id}.get", Method.GET_TASK, op.task_id, op.agent_id,
                                    op.pool_id, op.context_id, "", fx.now_ms), f"{op.op_id}.get")

    def _retry_or_give_up(self, fx: Effects, op: Operation, why: ev.AttemptWhy,
                          outcome: ev.A2mOutcome) -> None:
        retry = self.config.retry
        if op.attempt >= retry.max_attempts:
            self._settle(fx, op, outcome, None, None)
            return
        base = retry.backoff_ms[min(op.attempt - 1, len(retry.backoff_ms) - 1)]
        delay = round(base * (1 + retry.jitter * self._unit(op.correlations[-1])))
        fx.add(StartTimer(TimerId(TimerKind.BACKOFF, op.op_id), fx.now_ms + delay))
        self._put(fx, replace(op, phase=Phase.BACKOFF, why=why))

    @staticmethod
    def _unit(key: str) -> float:
        """A number in [-1, 1] drawn from `key` (the jitter, with no randomness in here)."""
        digest = hashlib.sha256(key.encode()).digest()
        return int.from_bytes(digest[:4], "big") / 0xFFFFFFFF * 2 - 1

    # -- replies ------------------------------------------------------------------------------------
    def _on_reply(self, fx: Effects, msg: MessageReceived) -> None:
        props = msg.props or Props()
        corr = None if props.correlation_data is None else props.correlation_data.hex()
        seen: dict[str, Any] = dict(topic=msg.topic, correlation=corr, qos=msg.qos, dup=msg.dup,
                                    retain=msg.retain, packet_id=msg.packet_id,
                                    responder_agent_id=props.user(RESPONDER_AGENT_ID))
        op = self.ops.get(self.by_correlation.get(corr or "", ""))
        if op is None or op.phase is Phase.SETTLED:
            why = "no Correlation Data" if corr is None else "unknown Correlation Data" \
                if op is None else "Correlation Data of an operation already settled"
            fx.record(ev.A2mReplyTaken(reason=f"{why} (A2M-REQ-2): ignored", **seen))
            return
        # A2M-REQ-3 binds a reply to an attempt sent to the pool, not one a follow-up sent
        # to the member the task is known to be on (A2M-REQ-4)
        if corr in self.to_a_pool and props.user(RESPONDER_AGENT_ID) is None:
            fx.record(ev.A2mReplyTaken(op_id=op.op_id, reason="a pooled reply without "
                                       "a2a-responder-agent-id (A2M-REQ-3): ignored", **seen))
            return
        try:
            body = json.loads(msg.payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            fx.record(ev.A2mReplyTaken(op_id=op.op_id, reason=f"not JSON: {str(exc)[:100]}",
                                       **seen))
            return
        named = props.user(RESPONDER_AGENT_ID)
        if named is not None:                 # the latest one holds (A2M-HAND-2)
            self.responder_of[op.task_id] = named
            op = replace(op, responder=named,   # kept with it by the _put that follows
                         named_ms=int(fx.now_ms))
        fx.add(CancelTimer(TimerId(TimerKind.FIRST_REPLY, op.op_id)))
        read = _read_reply(body)
        fx.record(ev.A2mReplyTaken(op_id=op.op_id, reply=read.kind, state=read.state, **seen))
        if read.kind is ev.ReplyKind.ERROR:
            self._settle(fx, op, ev.A2mOutcome.ERROR, read.code, read.text)
            return
        if read.kind is ev.ReplyKind.ARTIFACT:
            self._answered(fx, replace(op, chunks=(*op.chunks, read.text or "")))
            return
        state = TaskState(read.state) if read.state is not None \
            and read.state in TaskState._value2member_map_ else None
        if state is None:
            fx.record(ev.A2mReplyTaken(op_id=op.op_id, reason=f"no task state in the reply "
                                       f"({str(body)[:80]})", **seen))
            self._answered(fx, op)
            return
        final = state in TERMINAL or state in INTERRUPTED \
            or op.method in (Method.GET_TASK, Method.CANCEL_TASK)
        if final:
            text = "".join(op.chunks) + (read.text or "") if read.kind is ev.ReplyKind.RESULT \
                else "".join(op.chunks)
            self._settle(fx, op, _OUTCOME[state], None, text or None)
            if state is TaskState.INPUT_REQUIRED and op.method in (Method.SEND,
                                                                   Method.SEND_STREAMING):
                self._next_turn(fx, op)
        else:
            self._answered(fx, op)

    def _next_turn(self, fx: Effects, op: Operation) -> None:
        """The agent asked a question: the person behind the requester answers it at once,
        as the task's next turn — the same Task.id and context, a new operation (new
        Correlation Data: A2M-CTX-5), sent where the task is (A2M-HAND-2). At most
        MAX_TURNS turns, so an agent that keeps asking cannot keep the run talking."""
        if op.turn >= MAX_TURNS:
            return
        turn = op.turn + 1
        op_id = f"{op.op_id.rsplit('.t', 1)[0] if op.turn > 1 else op.op_id}.t{turn}"
        self._ask(fx, Operation(op_id, op.method, op.task_id, op.agent_id, op.pool_id,
                                op.context_id, f"the answer, turn {turn}", fx.now_ms,
                                turn=turn), op_id)

    def _answered(self, fx: Effects, op: Operation) -> None:
        """A correlated reply came and the operation goes on (a stream, or a Task not
        finished): never retried again (A2M-RETRY-4, A2M-RETRY-6); a stall is followed up."""
        fx.add(StartTimer(TimerId(TimerKind.STREAM_IDLE, op.op_id),
                          fx.now_ms + self.config.retry.stream_idle_ms))
        self._put(fx, replace(op, phase=Phase.ANSWERED))

    def _settle(self, fx: Effects, op: Operation, outcome: ev.A2mOutcome, code: int | None,
                text: str | None) -> None:
        for kind in REQUESTER_TIMERS:
            fx.add(CancelTimer(TimerId(kind, op.op_id)))
        fx.record(ev.A2mSettled(op_id=op.op_id, method=op.method.value, task_id=op.task_id,
                                outcome=outcome, attempts=op.attempt,
                                latency_ms=fx.now_ms - op.asked_ms, code=code, text=text,
                                responder_agent_id=self.responder_of.get(op.task_id)))
        self._put(fx, replace(op, phase=Phase.SETTLED))
        # GetTask asks where a task stands: any state it is told answers it
        generic = RequestOutcome.COMPLETED if op.method is Method.GET_TASK \
            and outcome in _STATES else SETTLED_AS[outcome]
        fx.record(ev.RequestSettled(request_id=op.op_id, outcome=generic,
                                    latency_ms=fx.now_ms - op.asked_ms, response_message_id=None))
        fx.add(SettleRequest(op.op_id, generic, text))

    def _put(self, fx: Effects, op: Operation) -> Operation:
        self.ops[op.op_id] = op
        fx.add(PersistRecord(Table.REQUESTS, op.op_id, op.to_json()))
        return op


@dataclass(frozen=True, slots=True)
class _Reply:
    kind: ev.ReplyKind
    state: str | None = None
    code: int | None = None
    text: str | None = None


def _read_reply(body: Json) -> _Reply:
    """What a reply says: an error (its code), a status item (its state), an artifact item
    (its text), or a Task — SendMessage's wrapped as `{"task": …}` (A2A v1.0
    SendMessageResponse), GetTask's and CancelTask's bare — (its state, its artifacts' text)."""
    if not isinstance(body, dict):
        return _Reply(ev.ReplyKind.RESULT)
    error = body.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        return _Reply(ev.ReplyKind.ERROR, code=code if isinstance(code, int) else None,
                      text=str(error.get("message", ""))[:200])
    result = body.get("result")
    if not isinstance(result, dict):
        return _Reply(ev.ReplyKind.RESULT)
    if isinstance(result.get("statusUpdate"), dict):
        status = result["statusUpdate"].get("status")
        return _Reply(ev.ReplyKind.STATUS, state=_state_of(status))
    if isinstance(result.get("artifactUpdate"), dict):
        return _Reply(ev.ReplyKind.ARTIFACT, text=_texts(result["artifactUpdate"].get("artifact")))
    if isinstance(result.get("task"), dict):     # SendMessageResponse; GetTask's is the Task
        result = result["task"]
    artifacts = result.get("artifacts")
    text = "".join(_texts(a) for a in artifacts) if isinstance(artifacts, list) else None
    return _Reply(ev.ReplyKind.RESULT, state=_state_of(result.get("status")), text=text or None)


def _state_of(status: Json) -> str | None:
    state = status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None


def _texts(artifact: Json) -> str:
    parts = artifact.get("parts") if isinstance(artifact, dict) else None
    return "".join(p["text"] for p in parts if isinstance(p, dict)
                   and isinstance(p.get("text"), str)) if isinstance(parts, list) else ""


#: The outcomes that are a task's state as a responder told it.
_STATES = frozenset(_OUTCOME.values())
#: The turns of one task a requester takes part in, at most (its first included).
MAX_TURNS = 3

#: The requester's timers, every one keyed by its operation.
REQUESTER_TIMERS = (TimerKind.FIRST_REPLY, TimerKind.BACKOFF, TimerKind.STREAM_IDLE)

#: How an operation's end reads to whoever asked for it (the workload's request outcomes).
SETTLED_AS = {ev.A2mOutcome.COMPLETED: RequestOutcome.COMPLETED,
              ev.A2mOutcome.FAILED: RequestOutcome.FAILED,
              ev.A2mOutcome.REJECTED: RequestOutcome.FAILED,
              ev.A2mOutcome.ERROR: RequestOutcome.FAILED,
              ev.A2mOutcome.CANCELED: RequestOutcome.CANCELLED,
              ev.A2mOutcome.INPUT_REQUIRED: RequestOutcome.COMPLETED,
              ev.A2mOutcome.AUTH_REQUIRED: RequestOutcome.FAILED,
              ev.A2mOutcome.WORKING: RequestOutcome.NO_RESPONSE,
              ev.A2mOutcome.SUBMITTED: RequestOutcome.NO_RESPONSE,
              ev.A2mOutcome.NO_REPLY: RequestOutcome.NO_RESPONSE,
              ev.A2mOutcome.NOT_SENT: RequestOutcome.SEND_FAILED}

#: A to_agent_id of `pool:{pool_id}` asks the pool, not one agent.
POOL = "pool:"


def task_uuid(seed: str) -> str:
    """A UUIDv4-shaped id drawn from `seed` (a request id: the workload's entropy), the same
    for every attempt and across restarts (A2M-RR-5, A2M-RETRY-2)."""
    h = bytearray(hashlib.sha256(seed.encode()).digest()[:16])
    h[6] = (h[6] & 0x0F) | 0x40
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def _operation(asked: TaskRequested) -> Operation:
    """The operation a TaskRequested asks for: SendMessage to `to_agent_id` (or the pool it
    names), unless its payload says otherwise (`method`, `taskId`, `contextId`, `text`)."""
    payload = asked.payload if isinstance(asked.payload, dict) else {"text": asked.payload}
    method = Method(str(payload.get("method", Method.SEND.value)))
    pooled = asked.to_agent_id.startswith(POOL)
    given = payload.get("contextId")
    context = str(given) if given else task_uuid(asked.conversation_id) \
        if asked.conversation_id else None
    text = payload.get("text")
    if not isinstance(text, str):      # the seed workload's payload, as the message's text
        text = json.dumps(asked.payload, sort_keys=True)
    # a follow-up names the request whose task it is about (the workload's GetTask, Cancel)
    of = payload.get("ofRequest")
    task_id = payload.get("taskId") or task_uuid(str(of) if of else asked.request_id)
    return Operation(asked.request_id, method, str(task_id),
                     None if pooled else asked.to_agent_id,
                     asked.to_agent_id.removeprefix(POOL) if pooled else None,
                     context, text, asked.now_ms)
