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
    VERIFIED = "verified"   # produced on this node
    CLAIMED = "claimed"     # relayed: the sender says so
