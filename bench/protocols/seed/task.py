"""The idempotent task service (DESIGN §3, seed 002 §4): taskId = requestId.

A duplicate request never runs the task again; a finished task's stored result is sent
again. A task found RUNNING at restart ends FAILED("interrupted") and its requester is
told. The response goes to the request's fromAgentId at `headers.replyNodeId`, with
`headers.requestId` echoed; without a replyNodeId it is UNDELIVERABLE with a warning (the
seed's D14 made visible). No I/O, no clock: the watchdog is a timer command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from bench.core import events as ev
from bench.core.commands import CancelTimer, Execute, PersistRecord, StartTimer, Table
from bench.core.effects import Effects
from bench.core.envelope import Envelope, Header, Json, MessageType
from bench.core.frozen import quick_init_module, replace
from bench.core.inputs import TimerId, TimerKind
from bench.core.machine import Machine
from bench.core.vocabulary import TaskStatus
from bench.protocols.seed.fields import integer, optional_text, text
from bench.protocols.seed.outbox import Outbox


class TaskEvent(StrEnum):
    START = "START"
    SUCCEED = "SUCCEED"
    FAIL = "FAIL"
    TIME_OUT = "TIME_OUT"
    CANCEL = "CANCEL"
    INTERRUPT = "INTERRUPT"  # found unfinished after a restart


# Theory of operation: SUBMITTED is persisted before the work starts, RUNNING when it is
# handed to the executor. The watchdog, the executor's result and a cancel race; the first
# to arrive wins and the others find a terminal state (a late result is recorded, not
# applied). INTERRUPT is what a restart does to anything not terminal.
_S, _E = TaskStatus, TaskEvent
TASK = Machine[TaskStatus, TaskEvent]("task", {
    (_S.SUBMITTED, _E.START): _S.RUNNING,
    (_S.SUBMITTED, _E.CANCEL): _S.CANCELLED,
    (_S.SUBMITTED, _E.INTERRUPT): _S.FAILED,
    (_S.RUNNING, _E.SUCCEED): _S.COMPLETED,
    (_S.RUNNING, _E.FAIL): _S.FAILED,
    (_S.RUNNING, _E.TIME_OUT): _S.TIMEOUT,
    (_S.RUNNING, _E.CANCEL): _S.CANCELLED,
    (_S.RUNNING, _E.INTERRUPT): _S.FAILED,
}, terminal=frozenset({_S.COMPLETED, _S.FAILED, _S.TIMEOUT, _S.CANCELLED}))


@dataclass(frozen=True, slots=True)
class TaskRecord:
    task_id: str
    agent_id: str
    state: TaskStatus
    requester_agent_id: str
    reply_node_id: str | None
    conversation_id: str | None
    request_message_id: str
    submitted_ms: int
    deadline_ms: int
    payload: Json = None
    result: Json = None
    error: str | None = None

    def to_json(self) -> dict[str, Json]:
        return {"taskId": self.task_id, "agentId": self.agent_id, "state": self.state.value,
                "requesterAgentId": self.requester_agent_id, "replyNodeId": self.reply_node_id,
                "conversationId": self.conversation_id,
                "requestMessageId": self.request_message_id, "submittedMs": self.submitted_ms,
                "deadlineMs": self.deadline_ms, "payload": self.payload, "result": self.result,
                "error": self.error}

    @staticmethod
    def from_json(raw: Json) -> TaskRecord:
        """Raises KeyError/TypeError/ValueError on a damaged record (the caller records it)."""
        if not isinstance(raw, dict):
            raise TypeError("task record is not an object")
        return TaskRecord(text(raw, "taskId"), text(raw, "agentId"),
                          TaskStatus(text(raw, "state")), text(raw, "requesterAgentId"),
                          optional_text(raw, "replyNodeId"), optional_text(raw, "conversationId"),
                          text(raw, "requestMessageId"), integer(raw, "submittedMs"),
                          integer(raw, "deadlineMs"), raw.get("payload"), raw.get("result"),
                          optional_text(raw, "error"))


def _watchdog(task_id: str) -> TimerId:
    return TimerId(TimerKind.TASK_WATCHDOG, task_id)


class TaskService:
    def __init__(self, node_id: str, outbox: Outbox, new_id: Callable[[], str],
                 default_timeout_ms: int) -> None:
        self.node_id = node_id
        self.outbox = outbox
        self.new_id = new_id
        self.default_timeout_ms = default_timeout_ms
        self.tasks: dict[str, TaskRecord] = {}
        self.executions = 0
        #: Set by the node: runs a request whose payload carries a `process` definition as a
        #: process instance instead of one Execute; told when a task ends from outside.
        self.start_process: Callable[[Effects, TaskRecord], None] | None = None
        self.on_gone: Callable[[Effects, str, str], None] = lambda fx, task_id, why: None

    # -- inbound request ----------------------------------------------------------------
    def on_request(self, fx: Effects, env: Envelope, agent_id: str) -> None:
        request_id = env.header(Header.REQUEST_ID) or env.message_id
        existing = self.existing(request_id)
        if existing is not None:
            finished = existing.state in TASK.terminal
            fx.record(ev.TaskDuplicate(task_id=request_id, message_id=env.message_id,
                                       state=existing.state,
                                       action="resend stored result" if finished else "still running; not re-run"))
            if finished:
                self._respond(fx, existing)
            return
        reply_node = env.header(Header.REPLY_NODE_ID)
        timeout_ms = self.default_timeout_ms
        if isinstance(env.payload, dict):
            asked = env.payload.get("timeoutMs")
            if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
                timeout_ms = asked
        task = TaskRecord(request_id, agent_id, TaskStatus.SUBMITTED, env.from_agent_id,
                          reply_node.strip() if reply_node and reply_node.strip() else None,
                          env.conversation_id, env.message_id, fx.now_ms,
                          fx.now_ms + timeout_ms, env.payload)
        if task.reply_node_id is None:
            fx.record(ev.NodeWarning(what=ev.WarningKind.MISSING_REPLY_NODE, task_id=request_id,
                                 message_id=env.message_id,
                                 reason="request has no headers.replyNodeId: its TASK_RESPONSE cannot be "
                             "routed back across nodes"))
        self._store(fx, task, None)
        task = self._move(fx, task, TaskEvent.START)
        self.executions += 1
        fx.record(ev.TaskExecuted(task_id=request_id, agent_id=agent_id,
                                  conversation_id=env.conversation_id, message_id=env.message_id))
        fx.add(StartTimer(_watchdog(request_id), task.deadline_ms))
        if self.start_process is not None and isinstance(env.payload, dict) \
                and "process" in env.payload:
            self.start_process(fx, task)
        else:
            fx.add(Execute(request_id, agent_id, env.payload, env.conversation_id))

    # -- outcomes -------------------------------------------------------------------------
    def on_finished(self, fx: Effects, task_id: str, ok: bool, result: Json, error: str | None) -> None:
        task = self.tasks.get(task_id)
        if task is None or task.state in TASK.terminal:
            fx.record(ev.TaskLateResult(task_id=task_id, ok=ok,
                                        state=task.state if task else None,
                                        reason="unknown task" if task is None else "task already terminal"))
            return
        fx.add(CancelTimer(_watchdog(task_id)))
        done = self._move(fx, task, TaskEvent.SUCCEED if ok else TaskEvent.FAIL,
                          result=result, error=None if ok else (error or "failed"))
        self._respond(fx, done)

    def on_watchdog(self, fx: Effects, task_id: str) -> None:
        task = self.tasks.get(task_id)
        if task is None or task.state in TASK.terminal:
            return  # the result won the race; its CancelTimer may have crossed this firing
        done = self._move(fx, task, TaskEvent.TIME_OUT, error="timeout")
        self.on_gone(fx, task_id, "task timed out")
        self._respond(fx, done)

    def recover(self, fx: Effects, restored: Mapping[str, Json],
                waiting: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """Load the task table; interrupt what was not finished, except the tasks in
        `waiting` (their instance is paused at a gate, safely on disk): those keep running
        under a re-armed watchdog. Returns problems found."""
        problems: list[str] = []
        for key, raw in sorted(restored.items()):
            try:
                task = TaskRecord.from_json(raw)
            except (KeyError, TypeError, ValueError) as exc:
                problems.append(f"task record {key!r} unreadable: {exc}")
                continue
            self.tasks[task.task_id] = task
        if self.tasks:
            fx.record(ev.TasksRestored(tasks=len(self.tasks), ended=sorted(
                t.task_id for t in self.tasks.values()
                if t.state in TASK.terminal and t.deadline_ms > fx.now_ms)))
        for task in sorted(self.tasks.values(), key=lambda t: t.submitted_ms):
            if task.state is TaskStatus.RUNNING and task.task_id in waiting:
                # never longer than its whole timeout from now: a deadline taken from a clock
                # that was set ahead (and since set right) would hold it far past its
                # timeout, as for a restored request (core/request.py)
                fx.add(StartTimer(_watchdog(task.task_id), min(
                    task.deadline_ms, fx.now_ms + task.deadline_ms - task.submitted_ms)))
            elif task.state not in TASK.terminal:
                done = self._move(fx, task, TaskEvent.INTERRUPT, error="interrupted")
                self.tell_interrupted(fx, done)
        return problems

    def tell_interrupted(self, fx: Effects, task: TaskRecord) -> None:
        """A task a restart found unfinished has ended FAILED("interrupted"): its requester
        is told, as for any end (DESIGN §3)."""
        self._respond(fx, task)

    # -- internals --------------------------------------------------------------------------
    def _move(self, fx: Effects, task: TaskRecord, event: TaskEvent, *, result: Json = None,
              error: str | None = None) -> TaskRecord:
        state = TASK.next(task.state, event, task.task_id)
        moved = replace(task, state=state, result=result if result is not None else task.result,
                        error=error if error is not None else task.error)
        self._store(fx, moved, task.state)
        return moved

    def _store(self, fx: Effects, task: TaskRecord, previous: TaskStatus | None) -> None:
        self.tasks[task.task_id] = task
        fx.add(PersistRecord(Table.TASKS, task.task_id, task.to_json()))
        fx.record(ev.TaskState(task_id=task.task_id, agent_id=task.agent_id, state=task.state,
                               previous=previous, error=task.error))

    def response_target(self, task: TaskRecord) -> str | None:
        """Where the response goes: the node the request named in headers.replyNodeId."""
        return task.reply_node_id

    def existing(self, request_id: str) -> TaskRecord | None:
        """The task this requestId already created, if any (what makes requests idempotent)."""
        return self.tasks.get(request_id)

    def _respond(self, fx: Effects, task: TaskRecord) -> None:
        env = Envelope(
            message_id=self.new_id(), message_type=MessageType.TASK_RESPONSE,
            from_agent_id=task.agent_id, timestamp_ms=fx.now_ms,
            to_agent_id=task.requester_agent_id, target_node_id=self.response_target(task),
            conversation_id=task.conversation_id,
            payload={"status": task.state.value, "result": task.result, "error": task.error},
            headers={Header.REQUEST_ID.value: task.task_id},
        )
        self.outbox.send(fx, env, explicit_target_only=True)


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
