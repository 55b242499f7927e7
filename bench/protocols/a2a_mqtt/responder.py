"""The reference responder of the A2A-over-MQTT profile: `Responder.handle(input) ->
list[command]`, sans-IO like the seed's node (bench/protocols/seed/node.py), keeping every MUST of
docs/profiles/a2a-mqtt.md that binds a responder.

What it promises, and where:
- a task exists once per Task.id, durably (the task table), across restarts and retries:
  a request for a Task.id it has returns that task's state and executes nothing
  (A2M-RETRY-3, A2M-DUP-1); the driver acknowledges a request only once the batch that took
  it in is on disk (io.py's contract), so a crash before that gets it redelivered;
- every reply and stream item goes to the request's Response Topic with its Correlation
  Data unchanged (A2M-RR-3, A2M-STREAM-1), carries the Task.id and context it was given
  (A2M-RR-6, A2M-CTX-1), and a pooled one names this responder (A2M-RSP-5);
- bad input is answered with the JSON-RPC error the profile prescribes, on the reply path
  when there is one (A2M-RSP-2..4, A2M-CTX-3, A2M-ERR-1..2), and never executed;
- presence: a retained card online after the SUBACK, a will that makes it offline
  (A2M-PRES-1..2), and the card offline, said by itself, when it is stopped (A2M-PRES-3);
- handover (user story 07): a card owner configured to hand its tasks over records each new
  Task.id as its delegate's, durably, and sends the request on to the delegate's direct
  topic with its Response Topic, Correlation Data and User Properties unchanged — and so
  every later request for that Task.id, after a restart too; the delegate answers the
  requester itself, naming itself in `a2a-responder-agent-id` on every reply (A2M-HAND-1),
  so the requester's follow-ups go to it (A2M-HAND-2).
No I/O, no clock, no randomness.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, assert_never

from bench.core import events as ev
from bench.core.commands import Table
from bench.core.config import NodeConfig, OAuth
from bench.core.machine import Machine
from bench.core.vocabulary import FlowKind
from bench.protocols.a2a_mqtt import oauth
from bench.protocols.a2a_mqtt.io import (
    INPUT_REQUIRED,
    AgentEmitted,
    Command,
    Connect,
    ConnectionUp,
    Effects,
    Execute,
    MessageReceived,
    PersistRecord,
    Publish,
    ResponderInput,
    Started,
    Stopping,
    Subscribe,
    Subscribed,
    TaskFinished,
)
from bench.protocols.a2a_mqtt.wire import (
    AUTHORIZATION,
    RESPONDER_AGENT_ID,
    STATUS,
    STATUS_SOURCE,
    TERMINAL,
    Call,
    ErrorCode,
    Json,
    Method,
    Props,
    Refusal,
    TaskState,
    Topics,
    artifact_item,
    error_body,
    parse_call,
    result_body,
    status_item,
    task_object,
)


class TaskEvent(Enum):
    START = "start"
    FINISH = "finish"
    FAIL = "fail"
    ASK = "ask"                  # the agent needs the requester's next turn
    CONTINUE = "continue"        # the next turn came
    CANCEL = "cancel"
    INTERRUPT = "interrupt"      # found unfinished after a restart


# Theory of operation. A task is created SUBMITTED by the first request carrying its
# Task.id and starts WORKING in the same batch (the agent is asked to run). The agent ends
# the turn COMPLETED or FAILED, or asks for input (INPUT_REQUIRED: not terminal; the next
# SendMessage with the same Task.id continues it). CancelTask cancels anything not terminal.
# A restart finds SUBMITTED or WORKING tasks whose work died with the process: they end
# FAILED, and whoever was waiting is told. Terminal states take no event.
S, E = TaskState, TaskEvent
TASK: Machine[TaskState, TaskEvent] = Machine("a2a task", {
    (S.SUBMITTED, E.START): S.WORKING,
    (S.WORKING, E.FINISH): S.COMPLETED,
    (S.WORKING, E.FAIL): S.FAILED,
    (S.WORKING, E.ASK): S.INPUT_REQUIRED,
    (S.INPUT_REQUIRED, E.CONTINUE): S.WORKING,
    (S.SUBMITTED, E.CANCEL): S.CANCELED,
    (S.WORKING, E.CANCEL): S.CANCELED,
    (S.INPUT_REQUIRED, E.CANCEL): S.CANCELED,
    (S.SUBMITTED, E.INTERRUPT): S.FAILED,
    (S.WORKING, E.INTERRUPT): S.FAILED,
}, frozenset(TERMINAL))


@dataclass(frozen=True, slots=True)
class Watcher:
    """A correlation waiting for the task's next answer: the reply path of one request."""

    topic: str
    correlation: bytes
    rpc_id: Json
    streaming: bool
    pooled: bool

    @property
    def path(self) -> str:
        """Its reply path as one string: the topic and the Correlation Data, hex."""
        return f"{self.topic} {self.correlation.hex()}"

    def to_json(self) -> dict[str, Json]:
        return {"topic": self.topic, "correlation": self.correlation.hex(), "rpcId": self.rpc_id,
                "streaming": self.streaming, "pooled": self.pooled}

    @staticmethod
    def from_json(raw: Json) -> Watcher:
        return Watcher(str(raw["topic"]), bytes.fromhex(str(raw["correlation"])), raw["rpcId"],
                       bool(raw["streaming"]), bool(raw["pooled"]))


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """One row of the task table, keyed by the requester's Task.id."""

    task_id: str
    context_id: str | None
    state: TaskState
    turn: int
    result: str | None = None
    chunks: int = 0                     # stream items of the current turn already sent
    watchers: tuple[Watcher, ...] = ()
    #: the reply paths ("topic hex-correlation") of the requests of the current turn: one
    #: of them again while the task waits for input is a redelivery, not the next turn
    asked_by: tuple[str, ...] = ()
    #: the agent it was handed over to: the task is that agent's, its state unknown here
    handed_to: str | None = None

    def to_json(self) -> dict[str, Json]:
        return {"taskId": self.task_id, "contextId": self.context_id, "state": self.state.value,
                "turn": self.turn, "result": self.result, "chunks": self.chunks,
                "watchers": [w.to_json() for w in self.watchers],
                "askedBy": list(self.asked_by),
                **({"handedTo": self.handed_to} if self.handed_to else {})}

    @staticmethod
    def from_json(raw: Json) -> TaskRecord:
        """Raises KeyError/TypeError/ValueError on a damaged record (the caller records it)."""
        if not isinstance(raw, dict):
            raise TypeError("task record is not an object")
        return TaskRecord(str(raw["taskId"]), raw.get("contextId"), TaskState(raw["state"]),
                          int(raw["turn"]), raw.get("result"), int(raw.get("chunks", 0)),
                          tuple(Watcher.from_json(w) for w in raw.get("watchers", [])),
                          tuple(str(a) for a in raw.get("askedBy", [])),
                          str(raw["handedTo"]) if raw.get("handedTo") else None)


@dataclass(frozen=True, slots=True)
class ResponderConfig:
    topics: Topics
    agent_id: str
    card: Mapping[str, Json] = field(default_factory=dict)
    pool_id: str | None = None
    #: bearer tokens it requires on requests (A2M-RSP-7; None: none)
    oauth: OAuth | None = None
    #: the agent of its unit it hands every new task over to (None: it runs them itself)
    hands_over_to: str | None = None
    #: it serves tasks handed over to it: every reply names it (A2M-HAND-1)
    delegate: bool = False
    #: False: its pool's only member, it subscribes the pool's topic itself (the profile's
    #: MAY; a broker that serves no shared subscription on $a2a/... still has a pool)
    pool_shared: bool = True
    #: the tasks it runs at once: a new one beyond them is refused -32004
    #: responder_unavailable, and nothing of it runs (None: no bound)
    capacity: int | None = None


class Responder:
    """One responder agent: its task table, its reply paths and its presence."""

    @classmethod
    def for_node(cls, config: NodeConfig) -> Responder:
        """The responder a topology's node is: org from its [a2a], unit its namespace,
        agent id its one agent."""
        assert config.a2a is not None, f"node {config.node_id} is not an A2A-over-MQTT agent"
        return cls(ResponderConfig(Topics(config.a2a.org_id, config.namespace), config.agents[0],
                                   {"name": config.agents[0], "nodeId": config.node_id},
                                   config.a2a.pool_id, config.a2a.oauth,
                                   config.a2a.hands_over_to, config.a2a.delegate,
                                   config.a2a.pool_shared, config.a2a.capacity))

    def __init__(self, config: ResponderConfig) -> None:
        self.config = config
        self.agent_id = config.agent_id
        t = config.topics
        self.request_topic = t.request(config.agent_id)
        self.pool_topic = t.pool(config.pool_id) if config.pool_id else None
        self.filters = (self.request_topic,) + (
            () if not config.pool_id else (t.shared_pool(config.pool_id),) if config.pool_shared
            else (t.pool(config.pool_id),))
        self.card = json.dumps(dict(config.card) or {"name": config.agent_id},
                               sort_keys=True).encode()
        self.tasks: dict[str, TaskRecord] = {}
        self.late_results = 0
        #: flow events with no A2A stream item (thinking, steps): counted, not sent
        self.unstreamed = 0

    # -- the one entry point --------------------------------------------------------------------
    def handle(self, inp: ResponderInput) -> list[Command]:
        fx = Effects(inp.now_ms)
        match inp:
            case Started():
                self._on_started(fx, inp)
            case Stopping():
                # leaving on purpose: the card says so before the connection closes (the
                # will, which says the same, is not published on a clean DISCONNECT)
                fx.add(Publish(self.config.topics.discovery(self.agent_id), self.card, 1, True,
                               props=Props(user_properties=((STATUS, "offline"),
                                                            (STATUS_SOURCE, "agent")))))
            case ConnectionUp():
                fx.add(Subscribe(self.filters, 1))
            case Subscribed():
                # the generic record of a node routable for its agents (after its SUBACK)
                fx.record(ev.ExecutorsRegistered(registered=1, expected=1,
                                                 agents=[self.agent_id],
                                                 subscribed=list(inp.filters)))
                self._announce(fx)
            case MessageReceived():
                self._on_request(fx, inp)
            case AgentEmitted():
                self._on_streamed(fx, inp)
            case TaskFinished():
                self._on_ended(fx, inp)
            case _:
                assert_never(inp)
        return list(fx.commands)

    # -- life and presence ------------------------------------------------------------------------
    def _on_started(self, fx: Effects, inp: Started) -> None:
        for key, raw in sorted(inp.restored.tasks.items()):
            try:
                task = TaskRecord.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                fx.record(ev.NodeWarning(what=ev.WarningKind.RESTORE_TASKS, task_id=key,
                                         reason=f"task record unreadable: {exc}"))
                continue
            self.tasks[task.task_id] = task
        for task in sorted(self.tasks.values(), key=lambda t: t.task_id):
            if task.state in (S.SUBMITTED, S.WORKING) and task.handed_to is None:
                # its work died with the process: the task ends, and whoever waits is told
                self._end(fx, task, E.INTERRUPT, None, "interrupted by a restart")
        fx.add(Connect(self.config.topics.client_id(self.agent_id),
                       self.config.topics.discovery(self.agent_id), self.card, True, False,
                       Props(user_properties=((STATUS, "offline"), (STATUS_SOURCE, "lwt")))))

    def _announce(self, fx: Effects) -> None:
        """The retained card, online — after the SUBACK, so nobody is invited to a request
        topic not yet routed to this agent."""
        fx.add(Publish(self.config.topics.discovery(self.agent_id), self.card, 1, True,
                       props=Props(user_properties=((STATUS, "online"), (STATUS_SOURCE, "agent")))))

    # -- requests ---------------------------------------------------------------------------------
    def _on_request(self, fx: Effects, msg: MessageReceived) -> None:
        props = msg.props or Props()
        taken: dict[str, Any] = dict(topic=msg.topic, qos=msg.qos, dup=msg.dup, retain=msg.retain,
                                     packet_id=msg.packet_id, response_topic=props.response_topic,
                                     correlation=None if props.correlation_data is None
                                     else props.correlation_data.hex())
        if msg.topic not in (self.request_topic, self.pool_topic):
            fx.record(ev.A2mRequestTaken(intake=ev.Intake.DROPPED, reason="not a request topic "
                                         "of this agent", **taken))
            return
        no_path = self.no_reply_path(props.response_topic)
        if no_path is not None or props.response_topic is None:
            fx.record(ev.A2mRequestTaken(intake=ev.Intake.DROPPED,
                                         reason=no_path or "no Response Topic", **taken))
            return
        pooled = msg.topic == self.pool_topic
        call = parse_call(msg.payload, props)
        if props.correlation_data is None:
            rpc_id = call.rpc_id
            call = Refusal(rpc_id, ErrorCode.TRANSPORT_PROTOCOL_ERROR,
                           "no Correlation Data (A2M-RR-2)")
        if isinstance(call, Refusal):
            self._refuse(fx, props.response_topic, props.correlation_data, call, pooled, taken)
            return
        if self.config.oauth is not None and not self._copy_of_one_taken(call, props) \
                and (why := self.unauthorized(props, msg.now_ms)):
            # before anything of it is processed (A2M-RSP-7); its token is echoed nowhere
            self._refuse(fx, props.response_topic, props.correlation_data, Refusal(
                call.rpc_id, ErrorCode.UNAUTHORIZED, f"unauthorized: {why}"), pooled,
                {**taken, "method": call.method.value, "task_id": call.task_id})
            return
        to = self._delegate_of(call)
        if to is not None:
            self._hand_over(fx, msg, call, to, taken)
            return
        here = Watcher(props.response_topic, props.correlation_data or b"", call.rpc_id,
                       call.method is Method.SEND_STREAMING, pooled)
        match call.method:
            case Method.SEND | Method.SEND_STREAMING:
                self._on_send(fx, call, here, taken)
            case Method.GET_TASK:
                self._on_get(fx, call, here, taken)
            case Method.CANCEL_TASK:
                self._on_cancel(fx, call, here, taken)
            case _:
                assert_never(call.method)

    def no_reply_path(self, response_topic: str | None) -> str | None:
        """Why a request's Response Topic is no reply path (None: it is one). None given,
        or one nobody can publish to: empty ([MQTT-4.7.3-1]) or with a wildcard
        ([MQTT-3.3.2-14]; a broker drops the connection that tries) — the request is
        dropped, never run (A2M-RSP-2; it replied to wildcards until the a2a_bad_properties
        scenario sent one)."""
        if not response_topic:
            return "no Response Topic: no reply path (A2M-RSP-2)"
        if any(c in response_topic for c in "+#\0"):
            return "Response Topic with a wildcard: no reply path (A2M-RSP-2)"
        return None

    def _copy_of_one_taken(self, call: Call, props: Props) -> bool:
        """The request is a copy (a QoS1 redelivery) of one of its task's current turn, taken
        in and authorized before: its token, expired since, is not judged again — a refusal
        now would be a second final answer on a correlation whose task still runs
        (A2M-STREAM-2; explore, seed 7 run 999: ERROR, then the task's RESULT)."""
        task = self.tasks.get(call.task_id)
        path = f"{props.response_topic} {(props.correlation_data or b'').hex()}"
        return task is not None and path in task.asked_by

    def _delegate_of(self, call: Call) -> str | None:
        """The agent this request's task is (or, a new task, becomes) handed over to."""
        task = self.tasks.get(call.task_id)
        if task is not None:
            return task.handed_to
        if self.config.hands_over_to and call.method in (Method.SEND, Method.SEND_STREAMING):
            return self.config.hands_over_to
        return None

    def _hand_over(self, fx: Effects, msg: MessageReceived, call: Call, to: str,
                   taken: dict[str, Any]) -> None:
        """The task is `to`'s: recorded so (before the request is acknowledged, and so
        across a restart), and the request sent on to its direct topic as it came — its
        Response Topic, Correlation Data and User Properties: `to` answers the requester."""
        if call.task_id not in self.tasks:
            self._put(fx, TaskRecord(call.task_id, call.context_id, S.SUBMITTED, 1,
                                     handed_to=to))
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.HANDED_OVER, method=call.method.value,
                                     task_id=call.task_id, context_id=call.context_id,
                                     handed_to=to, **taken))
        fx.add(Publish(self.config.topics.request(to), msg.payload, 1, False,
                       props=self._forwarded(msg.props or Props())))

    def _forwarded(self, props: Props) -> Props:
        """The properties of a request sent on to its delegate: all of them, as they came."""
        return props

    def unauthorized(self, props: Props, now_ms: float) -> str | None:
        """Why the request's bearer token does not let it be processed (None: it does)."""
        assert self.config.oauth is not None
        value = next((v for k, v in props.user_properties if k == AUTHORIZATION), None)
        return oauth.refused(self.config.oauth, value, now_ms)

    def _on_send(self, fx: Effects, call: Call, here: Watcher, taken: dict[str, Any]) -> None:
        task = self.tasks.get(call.task_id)
        ids: dict[str, Any] = dict(method=call.method.value, task_id=call.task_id,
                                   context_id=call.context_id)
        if task is None and self._full():
            self._refuse(fx, here.topic, here.correlation, Refusal(
                call.rpc_id, ErrorCode.RESPONDER_UNAVAILABLE,
                f"{self.config.capacity} tasks running, as many as it runs at once"),
                here.pooled, {**taken, **ids})
            return
        if task is None:
            task = TaskRecord(call.task_id, call.context_id, S.SUBMITTED, 1, watchers=(here,),
                              asked_by=(here.path,))
            self._state(fx, task, None, "a new Task.id")
            fx.record(ev.A2mRequestTaken(intake=ev.Intake.NEW, **ids, **taken))
            fx.record(ev.TaskExecuted(task_id=call.task_id, agent_id=self.agent_id,
                                      conversation_id=call.context_id,
                                      message_id=here.correlation.hex()))
            self._start(fx, task, E.START, call.text)
            return
        if call.context_id is not None and task.context_id is not None \
                and call.context_id != task.context_id:
            self._refuse(fx, here.topic, here.correlation, Refusal(
                call.rpc_id, ErrorCode.INVALID_PARAMS,
                f"contextId differs from the one of task {call.task_id} (A2M-CTX-3)"),
                here.pooled, {**taken, **ids})
            return
        if task.state is S.INPUT_REQUIRED and here.path not in task.asked_by:
            # the same task's next turn (a request of the turn that asked, come again, is
            # no answer to the question): no second execution of it (the turn is recorded)
            fx.record(ev.A2mRequestTaken(intake=ev.Intake.CONTINUED, **ids, **taken))
            self._start(fx, replace(task, turn=task.turn + 1, chunks=0, watchers=(here,),
                                    asked_by=(here.path,)), E.CONTINUE, call.text)
            return
        # a Task.id it has: its state, and nothing runs again (A2M-RETRY-3)
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.DUPLICATE, **ids, **taken))
        self._answer(fx, task, here)
        # the answer to come reaches this attempt too — once: a redelivered copy of a
        # request it already watches for (the same reply path) is no second watcher, or its
        # correlation would get a second final answer (A2M-STREAM-2)
        if task.state not in TERMINAL and task.state is not S.INPUT_REQUIRED and not any(
                (w.topic, w.correlation) == (here.topic, here.correlation) for w in task.watchers):
            self._put(fx, replace(task, watchers=(*task.watchers, here),
                                  asked_by=(*task.asked_by, here.path)))

    def _full(self) -> bool:
        """It runs as many tasks as its capacity: a new one would be one too many."""
        cap = self.config.capacity
        return cap is not None and sum(
            t.state in (S.SUBMITTED, S.WORKING) and t.handed_to is None
            for t in self.tasks.values()) >= cap

    def _on_get(self, fx: Effects, call: Call, here: Watcher, taken: dict[str, Any]) -> None:
        task = self.tasks.get(call.task_id)
        if task is None:
            self._refuse(fx, here.topic, here.correlation, Refusal(
                call.rpc_id, ErrorCode.TASK_NOT_FOUND, f"no task {call.task_id}"), here.pooled,
                {**taken, "method": call.method.value, "task_id": call.task_id})
            return
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.QUERY, method=call.method.value,
                                     task_id=call.task_id, context_id=task.context_id, **taken))
        self._reply(fx, here, result_body(here.rpc_id, self._task_json(task)), ev.ReplyKind.RESULT,
                    task)

    def _on_cancel(self, fx: Effects, call: Call, here: Watcher, taken: dict[str, Any]) -> None:
        task = self.tasks.get(call.task_id)
        ids = {**taken, "method": call.method.value, "task_id": call.task_id}
        if task is None or task.state in TERMINAL:
            code = ErrorCode.TASK_NOT_FOUND if task is None else ErrorCode.TASK_NOT_CANCELABLE
            why = f"no task {call.task_id}" if task is None else f"task is {task.state.value}"
            self._refuse(fx, here.topic, here.correlation, Refusal(call.rpc_id, code, why),
                         here.pooled, ids)
            return
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.CANCEL, context_id=task.context_id, **ids))
        # the agent's work may still end later: a late result, recorded and not answered
        done = self._end(fx, task, E.CANCEL, None, "CancelTask")
        self._reply(fx, here, result_body(here.rpc_id, self._task_json(done)),
                    ev.ReplyKind.RESULT, done)

    # -- the agent's work --------------------------------------------------------------------------
    def _start(self, fx: Effects, task: TaskRecord, event: TaskEvent, text: str) -> None:
        working = self._move(fx, task, event, None)
        for w in working.watchers:
            if w.streaming:
                self._status(fx, w, working)
        fx.add(Execute(task.task_id, self.agent_id,
                       {"text": text, "turn": working.turn,
                        "streaming": any(w.streaming for w in working.watchers)},
                       task.context_id, working.turn))

    def _on_streamed(self, fx: Effects, inp: AgentEmitted) -> None:
        task = self.tasks.get(inp.task_id)
        if task is None or task.state is not S.WORKING:
            self._late(fx, inp.task_id, task, True)
            return
        if inp.kind not in (FlowKind.TOKEN, FlowKind.ARTIFACT):
            self.unstreamed += 1      # no A2A stream item says "thinking" or "step"
            return
        for w in task.watchers:
            if w.streaming:
                self._reply(fx, w, artifact_item(w.rpc_id, task.task_id, task.context_id,
                                                 task.chunks, inp.text),
                            ev.ReplyKind.ARTIFACT, task)
        self._put(fx, replace(task, chunks=task.chunks + 1))

    def _on_ended(self, fx: Effects, inp: TaskFinished) -> None:
        task = self.tasks.get(inp.task_id)
        if task is None or task.state is not S.WORKING:
            self._late(fx, inp.task_id, task, inp.ok)
            return
        result = inp.result
        if inp.ok and isinstance(result, dict) and INPUT_REQUIRED in result:
            self._end(fx, task, E.ASK, None, str(result[INPUT_REQUIRED]))
        elif inp.ok:
            text = result if isinstance(result, str) else json.dumps(result, sort_keys=True)
            self._end(fx, task, E.FINISH, text, None)
        else:
            self._end(fx, task, E.FAIL, None, inp.error or "the agent failed")

    def _late(self, fx: Effects, task_id: str, task: TaskRecord | None, ok: bool) -> None:
        """Work that ended after its task did (cancelled, or interrupted by a restart)."""
        self.late_results += 1
        fx.record(ev.TaskLateResult(task_id=task_id, ok=ok, state=None,
                                    reason="no such task" if task is None
                                    else f"task is {task.state.value}"))

    def _end(self, fx: Effects, task: TaskRecord, event: TaskEvent, result: str | None,
             reason: str | None) -> TaskRecord:
        """Move the task on and answer everyone waiting; the answer is stream-final for
        their correlations (terminal, or INPUT_REQUIRED: A2M-STREAM-2, A2M-STREAM-3)."""
        done = self._move(fx, replace(task, result=result if result is not None else task.result),
                          event, reason)
        for w in done.watchers:
            self._answer(fx, done, w)
        return self._put(fx, replace(done, watchers=()))

    def _answer(self, fx: Effects, task: TaskRecord, w: Watcher) -> None:
        """The task as it stands, to one correlation: a Task for SendMessage; for a stream,
        the result as an artifact if it has one no item carried yet, then the status."""
        if not w.streaming:     # A2A v1.0: SendMessageResponse {task | message}
            self._reply(fx, w, result_body(w.rpc_id, {"task": self._task_json(task)}),
                        ev.ReplyKind.RESULT, task)
            return
        if task.result is not None and task.chunks == 0:
            self._reply(fx, w, artifact_item(w.rpc_id, task.task_id, task.context_id, 0,
                                             task.result), ev.ReplyKind.ARTIFACT, task)
        self._status(fx, w, task)

    # -- the task table ----------------------------------------------------------------------------
    def _move(self, fx: Effects, task: TaskRecord, event: TaskEvent,
              reason: str | None) -> TaskRecord:
        moved = replace(task, state=TASK.next(task.state, event, task.task_id))
        self._state(fx, moved, task.state, reason)
        return self._put(fx, moved)

    def _state(self, fx: Effects, task: TaskRecord, previous: TaskState | None,
               reason: str | None) -> None:
        self._put(fx, task)
        fx.record(ev.A2mTaskState(task_id=task.task_id, agent_id=self.agent_id,
                                  state=task.state.value,
                                  previous=None if previous is None else previous.value,
                                  context_id=task.context_id, reason=reason))

    def _put(self, fx: Effects, task: TaskRecord) -> TaskRecord:
        self.tasks[task.task_id] = task
        fx.add(PersistRecord(Table.TASKS, task.task_id, task.to_json()))
        return task

    @staticmethod
    def _task_json(task: TaskRecord) -> dict[str, Json]:
        return task_object(task.task_id, task.context_id, task.state, task.result)

    # -- replies ------------------------------------------------------------------------------------
    def _status(self, fx: Effects, w: Watcher, task: TaskRecord) -> None:
        self._reply(fx, w, status_item(w.rpc_id, task.task_id, task.context_id, task.state),
                    ev.ReplyKind.STATUS, task)

    def _refuse(self, fx: Effects, topic: str, correlation: bytes | None, refusal: Refusal,
                pooled: bool, taken: Mapping[str, Any]) -> None:
        fx.record(ev.A2mRequestTaken(intake=ev.Intake.REFUSED, code=refusal.code,
                                     reason=refusal.message, **taken))
        self._publish(fx, topic, correlation, error_body(refusal.rpc_id, refusal.code,
                                                         refusal.message), pooled,
                      ev.ReplyKind.ERROR, None, None, refusal.code, None)

    def _reply(self, fx: Effects, w: Watcher, body: bytes, kind: ev.ReplyKind,
               task: TaskRecord) -> None:
        self._publish(fx, w.topic, w.correlation, body, w.pooled, kind, task.task_id,
                      task.state.value, None, task.context_id)

    def _names_itself(self, pooled: bool) -> bool:
        """Whether a reply says who answers: a pool member's, and that of an agent the card
        owner hands its tasks over to (A2M-RSP-5, A2M-HAND-1)."""
        return pooled or self.config.delegate

    def _publish(self, fx: Effects, topic: str, correlation: bytes | None, body: bytes,
                 pooled: bool, kind: ev.ReplyKind, task_id: str | None, state: str | None,
                 code: int | None, context_id: str | None) -> None:
        names = self._names_itself(pooled)
        named = ((RESPONDER_AGENT_ID, self.agent_id),) if names else ()
        fx.add(Publish(topic, body, 1, False, props=Props(
            correlation_data=correlation, user_properties=named, content_type="application/json")))
        fx.record(ev.A2mReplied(topic=topic, reply=kind,
                                correlation=None if correlation is None else correlation.hex(),
                                task_id=task_id, state=state, code=code,
                                responder_agent_id=self.agent_id if names else None,
                                context_id=context_id))
