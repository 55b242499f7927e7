"""A process instance (seed 000 §5, seed 004): its steps, its copy-on-write context and
versions, the attempts under way — and its status machine. The snapshot form is what the
executor persists and what a restarted executor rehydrates. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import cast

from bench.core.envelope import Json
from bench.core.machine import Machine
from bench.core.vocabulary import InstanceStatus as InstanceStatus
from bench.protocols.seed.context import Snapshot, Write, deep_copy
from bench.protocols.seed.steps import StepDef, parse_steps


class InstanceEvent(StrEnum):
    PAUSE_AT_GATE = "PAUSE_AT_GATE"
    RESUME = "RESUME"
    FINISH = "FINISH"
    FAIL = "FAIL"
    TASK_ENDED = "TASK_ENDED"
    INTERRUPT = "INTERRUPT"


# Theory of operation: an instance RUNs its steps; at a human step it PAUSEs (persisted
# PAUSED before GATE_OPEN leaves: 000 §5.6 #17) and a decision RESUMEs it, once. It ends
# COMPLETED when its last step merged, FAILED when a step or sub-flow failed for good or
# the decision went against it (both while RUNNING), when its task ended from outside
# (RUNNING or PAUSED: the watchdog), or when a restart found it RUNNING mid-step
# (INTERRUPT: a step's work is not resumable). A PAUSED instance survives restarts.
_S, _E = InstanceStatus, InstanceEvent
INSTANCE = Machine[InstanceStatus, InstanceEvent]("process instance", {
    (_S.RUNNING, _E.PAUSE_AT_GATE): _S.PAUSED,
    (_S.PAUSED, _E.RESUME): _S.RUNNING,
    (_S.RUNNING, _E.FINISH): _S.COMPLETED,
    (_S.RUNNING, _E.FAIL): _S.FAILED,
    (_S.RUNNING, _E.TASK_ENDED): _S.FAILED,
    (_S.PAUSED, _E.TASK_ENDED): _S.FAILED,
    (_S.RUNNING, _E.INTERRUPT): _S.FAILED,
}, terminal=frozenset({_S.COMPLETED, _S.FAILED}))

TERMINAL = INSTANCE.terminal


@dataclass
class Attempt:
    scope: str                 # "main" or the sub-flow's step id
    step: StepDef
    number: int
    snapshot: Snapshot         # the pre-attempt snapshot: every retry starts from it
    work: Json                 # the working copy this attempt may change
    ops: list[Write] = field(default_factory=list)   # what it wrote, once finished


@dataclass
class Subflow:
    """A running sub-flow: a child context forked from the parent's current version."""

    step: StepDef
    base: Json
    context: Json
    version: int = 0
    snapshot_id: str = ""
    parent_snapshot_id: str | None = None
    pc: int = 0
    ops: list[Write] = field(default_factory=list)   # what its successful steps wrote


@dataclass
class Instance:
    instance_id: str
    task_id: str
    agent_id: str
    conversation_id: str | None
    home_node_id: str | None
    requester_agent_id: str
    definition: Json
    steps: tuple[StepDef, ...]
    context: Json
    status: InstanceStatus = InstanceStatus.RUNNING
    version: int = 0
    snapshot_id: str = ""
    parent_snapshot_id: str | None = None
    pc: int = 0
    gate_id: str | None = None
    decided_gates: list[str] = field(default_factory=list)
    sub: Subflow | None = None
    running: dict[str, Attempt] = field(default_factory=dict)   # path -> attempt
    branches_done: dict[str, Attempt] = field(default_factory=dict)

    def move(self, event: InstanceEvent) -> InstanceStatus:
        """Take one transition of the status machine; returns the status it left."""
        previous = self.status
        self.status = INSTANCE.next(previous, event, self.instance_id)
        return previous

    def to_json(self) -> dict[str, Json]:
        """The persisted snapshot: enough to rehydrate a PAUSED instance in a new process."""
        return {"processInstId": self.instance_id, "taskId": self.task_id,
                "agentId": self.agent_id, "conversationId": self.conversation_id,
                "homeNodeId": self.home_node_id, "requesterAgentId": self.requester_agent_id,
                "definition": self.definition, "status": self.status.value,
                "context": deep_copy(self.context), "version": self.version,
                "snapshotId": self.snapshot_id, "parentSnapshotId": self.parent_snapshot_id,
                "pc": self.pc, "gateId": self.gate_id,
                "decidedGates": list(self.decided_gates)}

    @staticmethod
    def from_json(raw: Json) -> Instance:
        """Raises KeyError/TypeError/ValueError on a damaged snapshot."""
        if not isinstance(raw, dict):
            raise TypeError("instance snapshot is not an object")
        decided = raw.get("decidedGates", [])
        if not isinstance(decided, list):
            raise TypeError("decidedGates must be a list")
        gate, pc, version = raw.get("gateId"), raw["pc"], raw["version"]
        parent = raw.get("parentSnapshotId")
        if not isinstance(pc, int) or not isinstance(version, int):
            raise TypeError("pc and version must be integers")
        return Instance(
            str(raw["processInstId"]), str(raw["taskId"]), str(raw["agentId"]),
            cast("str | None", raw.get("conversationId")), cast("str | None", raw.get("homeNodeId")),
            str(raw["requesterAgentId"]), raw["definition"], parse_steps(raw["definition"]),
            deep_copy(raw["context"]), InstanceStatus(str(raw["status"])), version,
            str(raw.get("snapshotId", "")), parent if isinstance(parent, str) else None, pc,
            gate if isinstance(gate, str) else None, [str(g) for g in decided])


