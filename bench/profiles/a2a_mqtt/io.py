"""Inputs to the profile's sans-IO agents (facts in the past tense, each with `now_ms`) and
the commands they return (imperatives), beside the seed core's own: what differs is MQTT 5
— a message with properties, a will with properties, a session that expires — and the
agent's work, which the profile names by Task.id.

Driver contract (as for the seed core, bench/core/commands.py): make every PersistRecord of
one batch durable together before carrying out any Publish5 of it, and acknowledge the
PUBLISH that caused the batch only after that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from bench.core.commands import PersistRecord, Record, Subscribe
from bench.core.events import Event
from bench.profiles.a2a_mqtt.wire import Json, Message5, Method


# -- inputs ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Started:
    now_ms: int
    boot_id: str
    #: the agent's table read back from its durable store: a responder's tasks (Task.id ->
    #: record), a requester's operations (op id -> record)
    table: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConnectionUp:
    now_ms: int
    session_present: bool


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The broker acknowledged the subscription (SUBACK)."""

    now_ms: int
    filters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Received:
    """A PUBLISH the broker delivered, with its flags as the client got them."""

    now_ms: int
    message: Message5
    dup: bool = False
    packet_id: int | None = None


class WorkOutcome(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    INPUT_REQUIRED = "INPUT_REQUIRED"     # the agent asks the requester for its next turn


@dataclass(frozen=True, slots=True)
class WorkStreamed:
    """The agent produced one more chunk of its answer."""

    now_ms: int
    task_id: str
    seq: int
    text: str


@dataclass(frozen=True, slots=True)
class WorkEnded:
    now_ms: int
    task_id: str
    outcome: WorkOutcome
    text: str = ""


class TimerKind(StrEnum):
    FIRST_REPLY = "first-reply"      # no first correlated reply in reply_first_timeout_ms
    BACKOFF = "backoff"              # the wait before a retry
    STREAM_IDLE = "stream-idle"      # a stream stalled past stream_idle_timeout_ms


@dataclass(frozen=True, slots=True)
class Timer:
    kind: TimerKind
    key: str


@dataclass(frozen=True, slots=True)
class TimerFired:
    now_ms: int
    timer: Timer


@dataclass(frozen=True, slots=True)
class PublishSettled:
    """What became of a tracked Publish5 (`key`): accepted by the broker (a PUBACK below
    0x80), or not (refused by the client, or a PUBACK 0x80 and above)."""

    now_ms: int
    key: str
    accepted: bool
    reason_code: int | None = None


@dataclass(frozen=True, slots=True)
class OperationRequested:
    """The workload asks the requester for one logical operation on a task: the Task.id
    (and the context) come from the workload, which owns the entropy (a UUIDv4 each)."""

    now_ms: int
    op_id: str
    method: Method
    task_id: str
    agent_id: str | None = None        # direct: this responder; None: the pool's
    pool_id: str | None = None
    context_id: str | None = None
    text: str = ""


ResponderInput = Started | ConnectionUp | Subscribed | Received | WorkStreamed | WorkEnded
RequesterInput = (Started | ConnectionUp | Subscribed | Received | TimerFired | PublishSettled
                  | OperationRequested)


# -- commands -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Connect5:
    client_id: str
    will: Message5
    session_expiry_s: int
    clean_start: bool = False


@dataclass(frozen=True, slots=True)
class Publish5:
    message: Message5
    key: str | None = None        # set: the driver answers with PublishSettled(key)


@dataclass(frozen=True, slots=True)
class StartTimer:
    timer: Timer
    at_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    timer: Timer


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the agent's business logic for one turn of a task (the bench's scripted agent, or
    a third party's): it answers with WorkStreamed and one WorkEnded."""

    task_id: str
    agent_id: str
    context_id: str | None
    turn: int
    text: str
    streaming: bool


@dataclass(frozen=True, slots=True)
class Abandon:
    """Stop the work of a task (cancelled): a WorkEnded that still comes is late."""

    task_id: str


Command = (Connect5 | Subscribe | Publish5 | PersistRecord | Record | Execute | Abandon
           | StartTimer | CancelTimer)


class Effects:
    """The commands one `handle()` call decides, in order (bench/core/effects.py's twin
    over the profile's commands)."""

    __slots__ = ("now_ms", "commands")

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.commands: list[Command] = []

    def add(self, command: Command) -> None:
        self.commands.append(command)

    def record(self, event: Event) -> None:
        self.commands.append(Record(event))
