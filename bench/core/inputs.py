"""Inputs to the core: facts in the past tense, each stamped with `now_ms` by the driver.

The driver owns the clock and the entropy: `now_ms` and `boot_id` (a fresh id per start,
from which the node derives its message ids) come in here, never from inside the core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from bench.core.auth import KeyRing
from bench.core.envelope import Json
from bench.core.frozen import quick_init_module
from bench.core.properties import Props
from bench.core.vocabulary import FlowKind


class TimerKind(StrEnum):
    LEDGER_FLUSH = "ledger-flush"
    TASK_WATCHDOG = "task-watchdog"
    REQUEST_TIMEOUT = "request-timeout"
    THINKING_FLUSH = "thinking-flush"
    REORDER_GAP = "reorder-gap"
    GATE_EXPIRY = "gate-expiry"
    GATE_RETRY = "gate-retry"
    # the A2A-over-MQTT requester (bench/protocols/a2a_mqtt/requester.py)
    FIRST_REPLY = "first-reply"      # no first correlated reply in reply_first_timeout_ms
    BACKOFF = "backoff"              # the wait before a retry
    STREAM_IDLE = "stream-idle"      # a stream stalled past stream_idle_timeout_ms


@dataclass(frozen=True, slots=True)
class TimerId:
    kind: TimerKind
    key: str = ""

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.key}" if self.key else self.kind.value


#: The documents of a node's store that Restored carries back (its roster, its ledger)
ROSTER_DOCUMENT = "a2a-agents.json"
LEDGER_DOCUMENT = "a2a-inbound-ledger.json"


@dataclass(frozen=True, slots=True)
class Restored:
    """What the driver read back from the node's durable store before starting it."""

    roster: Json = None
    ledger: Json = None
    tasks: Mapping[str, Json] = field(default_factory=dict)
    requests: Mapping[str, Json] = field(default_factory=dict)
    streams: Mapping[str, Json] = field(default_factory=dict)
    instances: Mapping[str, Json] = field(default_factory=dict)
    gates: Mapping[str, Json] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Started:
    now_ms: int
    boot_id: str
    restored: Restored = field(default_factory=Restored)


@dataclass(frozen=True, slots=True)
class Stopping:
    """The node is asked to leave (a graceful stop: SIGTERM, the runner's `stop`, the end of
    a run): what it hands out now leaves before its connection closes with a DISCONNECT
    (no will), and nothing is fed after it."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class ConnectionUp:
    """The MQTT connection is up (first time or after a reconnect)."""

    now_ms: int
    session_present: bool = False


@dataclass(frozen=True, slots=True)
class Subscribed:
    """The broker confirmed a Subscribe (SUBACK): from now on it routes those filters here."""

    now_ms: int
    filters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """A PUBLISH the broker delivered, with the flags it carried: the core records them with
    what it made of the message, so a history shows how every delivery came (DUP, QoS, RETAIN
    and the packet id a re-delivery must reuse, MQTT 3.1.1 §3.3.1, §4.4)."""

    now_ms: int
    topic: str
    payload: bytes
    qos: int = 1
    dup: bool = False
    retain: bool = False
    packet_id: int | None = None
    props: Props | None = None     # MQTT 5 properties as the broker forwarded them


@dataclass(frozen=True, slots=True)
class TimerFired:
    now_ms: int
    timer: TimerId


@dataclass(frozen=True, slots=True)
class PublishSettled:
    """The broker accepted (ok) or the client failed to send a tracked Publish."""

    now_ms: int
    message_id: str
    ok: bool
    error: str | None = None
    #: MQTT 5: the PUBACK's reason code (0x10: no matching subscribers); None on 3.1.1
    reason_code: int | None = None


@dataclass(frozen=True, slots=True)
class TaskRequested:
    """The workload (or a northbound caller) asks this node to delegate a task."""

    now_ms: int
    request_id: str
    message_id: str
    from_agent_id: str
    to_agent_id: str
    payload: Json = None
    conversation_id: str | None = None
    scene_group_id: str | None = None
    target_node_id: str | None = None
    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class TaskFinished:
    """The executor's work for a task ended (the driver ran it; the core never does)."""

    now_ms: int
    task_id: str
    ok: bool
    result: Json = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class GroupEventRequested:
    """Multicast an EVENT to a scene group."""

    now_ms: int
    message_id: str
    from_agent_id: str
    scene_group_id: str
    payload: Json = None
    conversation_id: str | None = None


@dataclass(frozen=True, slots=True)
class SubscriberJoined:
    """A browser tab (SSE emitter) on this node starts watching a conversation."""

    now_ms: int
    subscriber_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class SubscriberLeft:
    now_ms: int
    subscriber_id: str


@dataclass(frozen=True, slots=True)
class AgentEmitted:
    """The flow running a task on this node produced an event (token, thinking, ...)."""

    now_ms: int
    task_id: str
    kind: FlowKind
    text: str


@dataclass(frozen=True, slots=True)
class StepReturned:
    """One attempt of a process step ended: what it wrote to its working copy (`ops`, JSON
    writes: set/append at a path) and whether it succeeded."""

    now_ms: int
    instance_id: str
    path: str
    attempt: int
    ok: bool
    ops: tuple[Json, ...] = ()


@dataclass(frozen=True, slots=True)
class HumanDecided:
    """A person clicked approve or reject on a gate (each click is one input)."""

    now_ms: int
    gate_id: str
    decision: str
    click: str


@dataclass(frozen=True, slots=True)
class KeysReplaced:
    """New keys for this node (a key rotation rolled out to it): sign with `keys` from now
    on; `keys.previous` lists the old keys still accepted until the overlap ends."""

    now_ms: int
    keys: KeyRing


Input = (Started | Stopping | ConnectionUp | Subscribed | MessageReceived | TimerFired
         | PublishSettled | TaskRequested | TaskFinished | GroupEventRequested
         | SubscriberJoined | SubscriberLeft | AgentEmitted | StepReturned | HumanDecided
         | KeysReplaced)


# built per message many times over: see bench.core.frozen
quick_init_module(globals())
