"""The core's words that travel: the enums several modules share and that appear on the
wire or in snapshots (their values are what the wire and the store carry).

Values only. A renamed value is a change of the wire protocol.
"""

from __future__ import annotations

from enum import StrEnum


class StepKind(StrEnum):
    """The steps of a process definition (seed 000 §5, seed 004)."""

    WORK = "work"           # the agent does something; retried from its pre-attempt snapshot
    PARALLEL = "parallel"   # branches from one parent snapshot, merged in branch order
    SUBFLOW = "subflow"     # inner work steps on a child context; failing fails the parent
    HUMAN = "human"         # a cross-node gate: the instance pauses for a person


class Decision(StrEnum):
    """What resolves a gate: a person's click, or the gate's timeout policy."""

    APPROVE = "approve"
    REJECT = "reject"
    EXPIRED = "expired"     # the timeout policy "fail": nobody decided in time

    @property
    def by_a_person(self) -> bool:
        return self is not Decision.EXPIRED


class TimeoutPolicy(StrEnum):
    """What a gate's expiry decides (DESIGN §3: expiry applies the policy explicitly)."""

    REJECT = "reject"
    FAIL = "fail"

    @property
    def decision(self) -> Decision:
        return Decision.REJECT if self is TimeoutPolicy.REJECT else Decision.EXPIRED


class DecidedBy(StrEnum):
    """Who decided a gate: a person's click, or its expiry under its timeout policy."""

    HUMAN = "human"
    TIMEOUT = "timeout"


class AckStatus(StrEnum):
    """What an executor answers to a GATE_DECISION. Only RESUMED resumed something."""

    RESUMED = "RESUMED"
    ALREADY_DECIDED = "ALREADY_DECIDED"       # this gate was resumed before (a retry, a click)
    UNKNOWN_INSTANCE = "UNKNOWN_INSTANCE"     # negative: no such instance, in memory or on disk
    NOT_WAITING = "NOT_WAITING"               # negative: the instance is not paused at that gate

    @property
    def negative(self) -> bool:
        return self in (AckStatus.UNKNOWN_INSTANCE, AckStatus.NOT_WAITING)


class FlowKind(StrEnum):
    """The events of a flow's stream (seed 002 §6)."""

    TOKEN = "token"
    THINKING = "thinking"
    STEP = "step"
    ARTIFACT = "artifact"
    COMPLETE = "complete"
    ERROR = "error"


class Trust(StrEnum):
    """Whether a stream frame was made on the node delivering it (verified) or relayed (claimed)."""

    VERIFIED = "verified"   # produced on this node
    CLAIMED = "claimed"     # relayed: the sender says so


class TaskStatus(StrEnum):
    """Where a task is in its state machine (DESIGN §3 Tasks; `bench.protocols.seed.task`)."""

    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"


class OutboundState(StrEnum):
    """Where an outgoing message is (DESIGN §3 Outbound; `bench.protocols.seed.outbox`)."""

    NEW = "NEW"
    SENDING = "SENDING"
    LOCAL_CONSUMED = "LOCAL_CONSUMED"
    PUBLISHED = "PUBLISHED"
    UNDELIVERABLE = "UNDELIVERABLE"
    FAILED = "FAILED"


class RequestOutcome(StrEnum):
    """How a delegated request ended for the requester. NO_RESPONSE is unknown (INFO)."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    UNDELIVERABLE = "UNDELIVERABLE"
    SEND_FAILED = "SEND_FAILED"
    NO_RESPONSE = "NO_RESPONSE"


#: How a request ends when an answer came, but an error: the outcomes besides COMPLETED that
#: have a latency (the plots draw them; `a2a-bench load` counts them apart from the lost)
ANSWERED_WITH_AN_ERROR = frozenset({RequestOutcome.FAILED, RequestOutcome.TIMEOUT,
                                    RequestOutcome.CANCELLED})


class InstanceStatus(StrEnum):
    """Where a process instance is (`bench.protocols.seed.instance`)."""

    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class GateState(StrEnum):
    """Where a gate is in the orchestrator's gate store (`bench.protocols.seed.gate`)."""

    OPEN = "OPEN"
    DECIDED = "DECIDED"     # decision sent, no ACK yet
    ACKED = "ACKED"
    UNACKED = "UNACKED"     # gave up after the last attempt (explicit)


class Handler(StrEnum):
    """Which part of a node took an admitted message in: a task executor (by how the agent
    was routed), or the group, requests, relay or gates service."""

    EXACT = "EXACT"                        # a roster executor with this agentId
    DEFAULT_EXECUTOR = "DEFAULT_EXECUTOR"  # same namespace, served by a2a-local-executor
    GROUP = "group"
    REQUESTS = "requests"
    RELAY = "relay"
    GATES = "gates"


class Via(StrEnum):
    """How a message reached the node: over MQTT, or from itself without the network."""

    MQTT = "mqtt"
    LOCAL = "local"


#: The result key of an agent that needs the requester's next turn (its value: the
#: question): the A2A-over-MQTT responder then ends the turn input-required.
INPUT_REQUIRED = "inputRequired"


class Merge(StrEnum):
    """How a step's result goes back into its parent context."""

    DEEP = "deep"         # three-way: keys the step changed are set, list growth appended
    REPLACE = "replace"   # the step's copy becomes the context (sequential steps only)
