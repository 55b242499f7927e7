"""The workload: *what* the users of the mesh ask for, decided up front from the seed.

`plan()` turns a topology and a spec into a time-ordered list of operations — delegated
task requests from every orchestrator to the executors' agents (across namespaces), and
group multicast events — identical for every substrate, so sim and live runs of one seed
ask for the same things. `task_outcome()` decides each task's duration and success from
the seed and the task id alone, so a restarted executor would take as long again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from bench.distribution import Distribution, fixed, rng_for
from bench.topology import Role, Topology


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    rate_per_s: float = 2.0                 # task requests per second, per orchestrator
    task_duration_ms: Distribution = fixed(50.0)
    task_failure_rate: float = 0.0
    request_timeout_ms: int = 30_000
    conversations: int = 4                  # conversations per orchestrator
    group_event_rate_per_s: float = 0.0     # multicast EVENTs per second, per orchestrator
    unknown_agent_fraction: float = 0.0     # requests to an agent no roster has
    misaddressed_fraction: float = 0.0      # requests sent explicitly to a node of another namespace
    explicit_target_fraction: float = 0.0   # requests carrying targetNodeId of the right node

    def to_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "task_duration_ms": self.task_duration_ms.to_json(),
                "task_failure_rate": self.task_failure_rate,
                "request_timeout_ms": self.request_timeout_ms, "conversations": self.conversations,
                "group_event_rate_per_s": self.group_event_rate_per_s,
                "unknown_agent_fraction": self.unknown_agent_fraction,
                "misaddressed_fraction": self.misaddressed_fraction,
                "explicit_target_fraction": self.explicit_target_fraction}


@dataclass(frozen=True, slots=True)
class RequestOp:
    at_ms: float
    node_id: str
    request_id: str
    message_id: str
    from_agent_id: str
    to_agent_id: str
    conversation_id: str
    target_node_id: str | None
    timeout_ms: int
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EventOp:
    at_ms: float
    node_id: str
    message_id: str
    from_agent_id: str
    scene_group_id: str
    conversation_id: str


Op = Union[RequestOp, EventOp]


def plan(topology: Topology, spec: WorkloadSpec, seed: int, duration_ms: float) -> list[Op]:
    """Every operation of the run, sorted by time (ties by node, then id)."""
    executors = [n for n in topology.nodes if n.role is Role.EXECUTOR or
                 (n.role is Role.ORCHESTRATOR and len(n.agents) > 1)]
    placements = [(agent, n) for n in executors for agent in n.agents
                  if not (n.role is Role.ORCHESTRATOR and agent == n.requester_agent)]
    ops: list[Op] = []
    for orch in topology.orchestrators:
        rng = rng_for(seed, f"workload/{orch.id}")
        t, n = 0.0, 0
        while spec.rate_per_s > 0 and placements:
            t += rng.expovariate(spec.rate_per_s) * 1000.0
            if t >= duration_ms:
                break
            n += 1
            agent, home = placements[rng.randrange(len(placements))]
            target: str | None = None
            draw = rng.random()
            if draw < spec.unknown_agent_fraction:
                agent = f"{home.namespace}.unknown-{n}"
            elif draw < spec.unknown_agent_fraction + spec.misaddressed_fraction:
                foreign = [x for x in topology.nodes
                           if x.namespace != home.namespace and x.id != orch.id]
                if foreign:
                    target = foreign[rng.randrange(len(foreign))].id
            elif draw < (spec.unknown_agent_fraction + spec.misaddressed_fraction
                         + spec.explicit_target_fraction):
                target = home.id
            ops.append(RequestOp(
                at_ms=round(t, 3), node_id=orch.id, request_id=f"{orch.id}-r{n}",
                message_id=f"{orch.id}-m{n}", from_agent_id=orch.requester_agent,
                to_agent_id=agent, conversation_id=f"{orch.id}-c{n % max(1, spec.conversations)}",
                target_node_id=target, timeout_ms=spec.request_timeout_ms,
                payload={"ask": f"task {n} from {orch.id}"}))
        t, k = 0.0, 0
        while spec.group_event_rate_per_s > 0 and orch.scene_groups:
            t += rng.expovariate(spec.group_event_rate_per_s) * 1000.0
            if t >= duration_ms:
                break
            k += 1
            group = orch.scene_groups[rng.randrange(len(orch.scene_groups))]
            ops.append(EventOp(round(t, 3), orch.id, f"{orch.id}-e{k}", orch.requester_agent,
                               group, f"{orch.id}-c{k % max(1, spec.conversations)}"))
    ops.sort(key=lambda op: (op.at_ms, op.node_id, op.message_id))
    return ops


def task_outcome(spec: WorkloadSpec, seed: int, task_id: str) -> tuple[float, bool]:
    rng = rng_for(seed, f"task/{task_id}")
    return spec.task_duration_ms.sample(rng), rng.random() >= spec.task_failure_rate
