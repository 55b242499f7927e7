"""Commands from the core: imperatives the driver carries out, in order.

Driver contract: make every Persist* of one `handle()` batch durable together (one
transaction) before carrying out any Publish of the same batch — write-ahead, so a crash
never leaves a response on the wire for a task state that is not on disk. Publish commands
issued while the connection is down are queued by the driver and sent in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from bench.core.envelope import Json
from bench.core.events import Event, to_fields
from bench.core.frozen import quick_init_module
from bench.core.inputs import TimerId
from bench.core.outcome import EventKind
from bench.core.properties import Props
from bench.core.vocabulary import RequestOutcome as RequestOutcome


class Table(StrEnum):
    """Record tables of the node's durable store (SQLite in live, memory in sim)."""

    MESSAGES = "messages"   # the per-node message store: what was sent and received
    TASKS = "tasks"         # the idempotent task table (taskId = requestId)
    REQUESTS = "requests"   # requester side: pending and settled requests
    STREAMS = "streams"     # FLOW-RELAY: last seq sent and receiver cursor, per stream
    INSTANCES = "instances"  # process instance snapshots (executor side)
    GATES = "gates"         # the gate store (orchestrator side)


@dataclass(frozen=True, slots=True)
class Connect:
    client_id: str
    will_topic: str | None         # None: no Last Will
    will_payload: bytes
    will_retain: bool = True
    clean_session: bool = False
    #: MQTT 5: the will's properties and its Will Delay Interval (ignored on 3.1.1)
    will_props: Props | None = None
    will_delay_s: int = 0
    #: use the TLS the node was given to reach the broker, if any (False: plain TCP though
    #: TLS was offered — only a seeded defect asks for that)
    tls: bool = True


@dataclass(frozen=True, slots=True)
class Subscribe:
    filters: tuple[str, ...]
    qos: int = 1


@dataclass(frozen=True, slots=True)
class Publish:
    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = False
    message_id: str | None = None  # set: the driver must answer with PublishSettled
    props: Props | None = None     # MQTT 5 PUBLISH properties (a 3.1.1 client sends none)


@dataclass(frozen=True, slots=True)
class StartTimer:
    timer: TimerId
    at_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    timer: TimerId


@dataclass(frozen=True, slots=True)
class Execute:
    """Run the work of a task; the driver answers later with TaskFinished."""

    task_id: str
    agent_id: str
    payload: Json
    conversation_id: str | None = None
    #: which turn of the task this is: 1, or the next after the agent asked the requester
    #: for input (a multi-turn task of the A2A-over-MQTT profile)
    turn: int = 1


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run one attempt of a process step; the driver answers later with StepReturned."""

    instance_id: str
    task_id: str
    path: str
    attempt: int
    agent_id: str


@dataclass(frozen=True, slots=True)
class AskHuman:
    """Show a gate to the people of its conversation; they answer with HumanDecided."""

    gate_id: str
    conversation_id: str | None
    prompt: str
    ask: int


@dataclass(frozen=True, slots=True)
class SettleRequest:
    """Hand a request's final outcome to whoever is waiting for it (the workload)."""

    request_id: str
    outcome: RequestOutcome
    response: Json = None


@dataclass(frozen=True, slots=True)
class Deliver:
    """Push one flow event to a local subscriber (an SSE emitter of this node)."""

    subscriber_id: str
    conversation_id: str
    stream: str
    seq: int
    kind: str
    text: str
    lane: str
    trust: str


@dataclass(frozen=True, slots=True)
class PersistDocument:
    name: str
    value: Json


@dataclass(frozen=True, slots=True)
class PersistRecord:
    table: Table
    key: str
    value: Json


@dataclass(frozen=True, slots=True)
class Record:
    """One history event (`bench.core.events`). Its fields never contain a secret."""

    event: Event

    @property
    def kind(self) -> EventKind:
        return self.event.KIND

    @property
    def fields(self) -> dict[str, Json]:
        return to_fields(self.event)


Command = (Connect | Subscribe | Publish | StartTimer | CancelTimer | Execute | RunStep
           | AskHuman | SettleRequest | Deliver | PersistDocument | PersistRecord | Record)


class NodeCore(Protocol):
    """What a host drives, whatever protocol it speaks: one sans-IO node that takes an
    input and answers with the commands to carry out (the seed protocol's `Node`, the A2A
    profile's responder and requester; bench/protocols/)."""

    def handle(self, event: Any, /) -> list[Command]: ...


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
