"""The workload: *what* the users of the mesh ask for, decided up front from the seed.

`plan()` turns a topology and a spec into a time-ordered list of operations — delegated
task requests from every orchestrator to the executors' agents (across namespaces), and
group multicast events — identical for every substrate, so sim and live runs of one seed
ask for the same things. `task_outcome()` decides each task's duration and success from
the seed and the task id alone, so a restarted executor would take as long again. An agent
that hangs never answers: its duration is infinite, and only the executor's task watchdog
(`task_timeout_ms`) ends the task.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench.core.events import AgentAnswered, HumanClicked
from bench.core.inputs import (
    AgentEmitted,
    GroupEventRequested,
    HumanDecided,
    Input,
    StepReturned,
    SubscriberJoined,
    SubscriberLeft,
    TaskFinished,
    TaskRequested,
)
from bench.core.vocabulary import INPUT_REQUIRED, FlowKind
from bench.spec.distribution import Distribution, fixed, rng_for
from bench.spec.topology import Role, Topology

#: Simulated people at a gate: how long they think and how they click.
HUMAN_KINDS = ("fast", "slow", "never", "double_click")


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    rate_per_s: float = 2.0                 # task requests per second, per orchestrator
    task_duration_ms: Distribution = fixed(50.0)
    task_failure_rate: float = 0.0
    hang_fraction: float = 0.0              # agent calls (tasks, step attempts) never answered
    task_timeout_ms: int = 60_000           # the executors' task watchdog, unless a request asks
    request_timeout_ms: int = 30_000
    conversations: int = 4                  # conversations per orchestrator
    group_event_rate_per_s: float = 0.0     # multicast EVENTs per second, per orchestrator
    unknown_agent_fraction: float = 0.0     # requests to an agent no roster has
    misaddressed_fraction: float = 0.0      # requests sent explicitly to a node of another namespace
    explicit_target_fraction: float = 0.0   # requests carrying targetNodeId of the right node
    #: A2A over MQTT: share of requests sent to the pool the drawn agent's node serves
    #: (its topology's `pool`), addressed `pool:{pool}`
    pool_fraction: float = 0.0
    #: A2A over MQTT: share of requests sent as SendStreamingMessage (their stream items are
    #: the task's flow: `stream_events`), and of requests followed, later, by a GetTask or a
    #: CancelTask on the same Task.id (`follow_up_ms` after it)
    streaming_fraction: float = 0.0
    get_fraction: float = 0.0
    cancel_fraction: float = 0.0
    follow_up_ms: float = 1_000.0
    #: A2A over MQTT: share of tasks whose agent, on its first turn, asks the requester for
    #: input (input-required) before it answers on the next (multi-turn: A2M-CTX-5)
    multi_turn_fraction: float = 0.0
    no_conversation_fraction: float = 0.0   # requests with no conversationId (it is optional)
    stream_events: int = 0                  # flow events each task streams (0: no streaming)
    thinking_fraction: float = 0.0          # share of them that are thinking
    tabs_per_conversation: int = 0          # browser tabs watching each conversation, at home
    watched_fraction: float = 1.0           # share of conversations anybody watches
    tab_churn: bool = False                 # each tab drops and comes back once, mid-run
    # process instances, copy-on-write context and human gates
    process_fraction: float = 0.0           # share of requests that run as a process instance
    gate_fraction: float = 0.0              # share of those with a human approval step
    parallel_branches: int = 0              # branches of the parallel step (0: none)
    subflow_fraction: float = 0.0           # share of processes with a sub-flow
    step_duration_ms: Distribution = fixed(100.0)
    step_failure_rate: float = 0.0          # per attempt; a failed attempt wrote a draft first
    step_retries: int = 2                   # retries of a top-level work step (sub-flow: 0)
    humans: tuple[tuple[str, float], ...] = (("fast", 1.0),)   # kind -> weight
    reject_fraction: float = 0.0            # share of human decisions that reject
    gate_timeout_ms: int = 20_000
    gate_on_timeout: str = "reject"         # reject | fail

    def __post_init__(self) -> None:
        unknown = [k for k, _w in self.humans if k not in HUMAN_KINDS]
        if unknown or not self.humans or any(w < 0 for _k, w in self.humans) \
                or sum(w for _k, w in self.humans) <= 0:
            raise ValueError(f"humans must weigh kinds from {list(HUMAN_KINDS)} with weights >= 0 "
                             f"and a positive total, got {dict(self.humans)}")
        if self.gate_on_timeout not in ("reject", "fail"):
            raise ValueError(f"gate_on_timeout must be reject or fail, got {self.gate_on_timeout!r}")

    def to_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "task_duration_ms": self.task_duration_ms.to_json(),
                "task_failure_rate": self.task_failure_rate,
                "hang_fraction": self.hang_fraction, "task_timeout_ms": self.task_timeout_ms,
                "request_timeout_ms": self.request_timeout_ms, "conversations": self.conversations,
                "group_event_rate_per_s": self.group_event_rate_per_s,
                "unknown_agent_fraction": self.unknown_agent_fraction,
                "misaddressed_fraction": self.misaddressed_fraction,
                "explicit_target_fraction": self.explicit_target_fraction,
                "pool_fraction": self.pool_fraction,
                "streaming_fraction": self.streaming_fraction,
                "get_fraction": self.get_fraction, "cancel_fraction": self.cancel_fraction,
                "follow_up_ms": self.follow_up_ms,
                "multi_turn_fraction": self.multi_turn_fraction,
                "no_conversation_fraction": self.no_conversation_fraction,
                "stream_events": self.stream_events, "thinking_fraction": self.thinking_fraction,
                "tabs_per_conversation": self.tabs_per_conversation,
                "watched_fraction": self.watched_fraction, "tab_churn": self.tab_churn,
                "process_fraction": self.process_fraction, "gate_fraction": self.gate_fraction,
                "parallel_branches": self.parallel_branches,
                "subflow_fraction": self.subflow_fraction,
                "step_duration_ms": self.step_duration_ms.to_json(),
                "step_failure_rate": self.step_failure_rate, "step_retries": self.step_retries,
                "humans": dict(self.humans), "reject_fraction": self.reject_fraction,
                "gate_timeout_ms": self.gate_timeout_ms, "gate_on_timeout": self.gate_on_timeout}


#: What a workload key's value is, given its name (a spec's field, or a scenario file's value
#: with the default where it has none)
Value = Callable[[str], Any]
_PROCESSES = ("process_fraction > 0", lambda v: v("process_fraction") > 0)
_GATES = ("process_fraction > 0 and gate_fraction > 0",
          lambda v: v("process_fraction") > 0 and v("gate_fraction") > 0)
#: Keys read only where another key asks for what they shape: key -> (what it needs, as a
#: scenario file says it; whether a workload has it). `plan` and the agents read such a key
#: only then (`flow_events`, `_tabs`, `process_definition`, `human_clicks`, the follow-ups):
#: set without it, it changes nothing, so `load_scenario` refuses it and explore draws none.
NEEDS: dict[str, tuple[str, Callable[[Value], bool]]] = {
    "thinking_fraction": ("stream_events > 0", lambda v: v("stream_events") > 0),
    "watched_fraction": ("tabs_per_conversation > 0", lambda v: v("tabs_per_conversation") > 0),
    "tab_churn": ("tabs_per_conversation > 0", lambda v: v("tabs_per_conversation") > 0),
    **dict.fromkeys(("gate_fraction", "parallel_branches", "subflow_fraction",
                     "step_duration_ms", "step_failure_rate", "step_retries"), _PROCESSES),
    **dict.fromkeys(("humans", "reject_fraction", "gate_timeout_ms", "gate_on_timeout"),
                    _GATES),
    "follow_up_ms": ("get_fraction or cancel_fraction > 0",
                     lambda v: v("get_fraction") + v("cancel_fraction") > 0),
}


def idle_keys(value: Value) -> list[str]:
    """The keys of `NEEDS` whose need this workload leaves unmet: what they say is never
    read."""
    return [key for key, (_need, met) in NEEDS.items() if not met(value)]


def file_value(table: dict[str, Any]) -> Value:
    """A scenario file's workload table as `Value`s: its own, else the default's."""
    unset = WorkloadSpec()
    return lambda key: table[key] if key in table else getattr(unset, key)


def workload_from_json(d: dict[str, Any]) -> WorkloadSpec:
    """The inverse of WorkloadSpec.to_json (for node processes)."""
    from bench.spec.distribution import parse_distribution
    fields = dict(d)
    fields["task_duration_ms"] = parse_distribution(d["task_duration_ms"], "task_duration_ms")
    fields["step_duration_ms"] = parse_distribution(d["step_duration_ms"], "step_duration_ms")
    fields["humans"] = tuple(d["humans"].items())
    return WorkloadSpec(**fields)


@dataclass(frozen=True, slots=True)
class RequestOp:
    at_ms: float
    node_id: str
    request_id: str
    message_id: str
    from_agent_id: str
    to_agent_id: str
    conversation_id: str | None
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


@dataclass(frozen=True, slots=True)
class TabOp:
    """A simulated browser tab on a node attaches to (or leaves) a conversation."""

    at_ms: float
    node_id: str
    subscriber_id: str
    conversation_id: str
    attach: bool

    @property
    def message_id(self) -> str:  # for ordering ties, like the other operations
        return self.subscriber_id


Op = RequestOp | EventOp | TabOp


def op_input(op: Op, now_ms: int) -> Input:
    """What the node is told when the workload issues `op`: the one translation, for every
    substrate (a node process receives `op_to_json` and translates it here too)."""
    match op:
        case RequestOp():
            return TaskRequested(now_ms, op.request_id, op.message_id, op.from_agent_id,
                                 op.to_agent_id, op.payload, op.conversation_id, None,
                                 op.target_node_id, op.timeout_ms)
        case EventOp():
            return GroupEventRequested(now_ms, op.message_id, op.from_agent_id,
                                       op.scene_group_id, {"event": op.message_id},
                                       op.conversation_id)
        case TabOp():
            if op.attach:
                return SubscriberJoined(now_ms, op.subscriber_id, op.conversation_id)
            return SubscriberLeft(now_ms, op.subscriber_id)


OP_KINDS: dict[str, type[RequestOp] | type[EventOp] | type[TabOp]] = {
    "request": RequestOp, "event": EventOp, "tab": TabOp}


def op_kind(op: Op) -> str:
    return {RequestOp: "request", EventOp: "event", TabOp: "tab"}[type(op)]


def op_to_json(op: Op) -> dict[str, Any]:
    """An operation as a line of the node-process protocol: {"op": kind, field: value...}."""
    return {"op": op_kind(op), **{f: getattr(op, f) for f in op.__dataclass_fields__}}


def op_from_json(d: dict[str, Any]) -> Op:
    """The inverse of op_to_json; raises KeyError/TypeError/ValueError on a bad line."""
    cls = OP_KINDS.get(d.get("op", ""))
    if cls is None:
        raise ValueError(f"op={d.get('op')!r} must be one of {sorted(OP_KINDS)}")
    return cls(**{k: v for k, v in d.items() if k != "op"})


def plan(topology: Topology, spec: WorkloadSpec, seed: int, duration_ms: float) -> list[Op]:
    """Every operation of the run, sorted by time (ties by node, then id)."""
    delegates = topology.delegates        # served only through the card owner before them
    executors = [n for n in topology.nodes if (n.role is Role.EXECUTOR or
                 (n.role is Role.ORCHESTRATOR and len(n.agents) > 1))
                 and n.id not in delegates]
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
            if spec.pool_fraction > 0 and home.pool and rng.random() < spec.pool_fraction:
                agent = f"pool:{home.pool}"     # the requester asks the pool, not the agent
            payload: dict[str, Any] = {"ask": f"task {n} from {orch.id}"}
            if spec.streaming_fraction > 0 and rng.random() < spec.streaming_fraction:
                payload["method"] = "SendStreamingMessage"
            follow = rng.random() if spec.get_fraction + spec.cancel_fraction > 0 else 1.0
            if spec.process_fraction > 0 and rng.random() < spec.process_fraction:
                payload["process"] = process_definition(spec, rng, n)
                payload["timeoutMs"] = spec.request_timeout_ms
            conversation: str | None = f"{orch.id}-c{n % max(1, spec.conversations)}"
            if spec.no_conversation_fraction > 0 and rng.random() < spec.no_conversation_fraction:
                conversation = None
            ops.append(RequestOp(
                at_ms=round(t, 3), node_id=orch.id, request_id=f"{orch.id}-r{n}",
                message_id=f"{orch.id}-m{n}", from_agent_id=orch.requester_agent,
                to_agent_id=agent, conversation_id=conversation,
                target_node_id=target, timeout_ms=spec.request_timeout_ms,
                payload=payload))
            if follow < spec.get_fraction + spec.cancel_fraction:
                # the same task asked about, or called off, a moment later (A2M-RR-7)
                method = "GetTask" if follow < spec.get_fraction else "CancelTask"
                ops.append(RequestOp(
                    at_ms=round(t + spec.follow_up_ms, 3), node_id=orch.id,
                    request_id=f"{orch.id}-r{n}.{method}", message_id=f"{orch.id}-m{n}.f",
                    from_agent_id=orch.requester_agent, to_agent_id=agent,
                    conversation_id=conversation, target_node_id=target,
                    timeout_ms=spec.request_timeout_ms,
                    payload={"method": method, "ofRequest": f"{orch.id}-r{n}"}))
        t, k = 0.0, 0
        while spec.group_event_rate_per_s > 0 and orch.scene_groups:
            t += rng.expovariate(spec.group_event_rate_per_s) * 1000.0
            if t >= duration_ms:
                break
            k += 1
            group = orch.scene_groups[rng.randrange(len(orch.scene_groups))]
            ops.append(EventOp(round(t, 3), orch.id, f"{orch.id}-e{k}", orch.requester_agent,
                               group, f"{orch.id}-c{k % max(1, spec.conversations)}"))
        ops.extend(_tabs(orch.id, spec, rng, duration_ms))
    ops.sort(key=lambda op: (op.at_ms, op.node_id, op.message_id))
    return ops


def _tabs(node_id: str, spec: WorkloadSpec, rng: Any, duration_ms: float) -> list[Op]:
    tabs: list[Op] = []
    for c in range(max(1, spec.conversations)):
        conversation = f"{node_id}-c{c}"
        if spec.tabs_per_conversation <= 0 or rng.random() >= spec.watched_fraction:
            continue
        for k in range(spec.tabs_per_conversation):
            tab = f"{conversation}-tab{k}"
            tabs.append(TabOp(0.0, node_id, tab, conversation, True))
            if spec.tab_churn:
                gone = round(rng.uniform(0.2, 0.8) * duration_ms, 3)
                tabs.append(TabOp(gone, node_id, tab, conversation, False))
                tabs.append(TabOp(round(gone + 500.0, 3), node_id, tab, conversation, True))
    return tabs


def flow_events(spec: WorkloadSpec, seed: int, task_id: str,
                duration_ms: float) -> list[tuple[float, str, str]]:
    """What a task's flow streams while it runs: (offset ms, kind, text), from the seed."""
    if spec.stream_events <= 0:
        return []
    rng = rng_for(seed, f"flow/{task_id}")
    step = duration_ms / (spec.stream_events + 1)
    return [(round(step * (k + 1), 3),
             "thinking" if rng.random() < spec.thinking_fraction else "token",
             f"{task_id}#{k} ") for k in range(spec.stream_events)]


def task_outcome(spec: WorkloadSpec, seed: int, task_id: str) -> tuple[float, bool]:
    """How long the agent takes over a task (infinite: it hangs) and whether it succeeds."""
    rng = rng_for(seed, f"task/{task_id}")
    duration, ok = spec.task_duration_ms.sample(rng), rng.random() >= spec.task_failure_rate
    return (math.inf if _hangs(spec, rng) else duration), ok


def _hangs(spec: WorkloadSpec, rng: Any) -> bool:
    """Drawn last, and only when hanging is asked for, so that every other draw of a seed
    stays what it was without it."""
    return spec.hang_fraction > 0 and rng.random() < spec.hang_fraction


def process_definition(spec: WorkloadSpec, rng: Any, n: int) -> list[dict[str, Any]]:
    """The steps of one process instance: prepare, [parallel branches], [human gate],
    [sub-flow], finish (merged with `replace`)."""
    r = spec.step_retries
    steps: list[dict[str, Any]] = [{"id": "prepare", "kind": "work", "retries": r}]
    if spec.parallel_branches > 0:
        steps.append({"id": "fan", "kind": "parallel", "merge": "deep",
                      "branches": [{"id": f"b{k}", "kind": "work", "retries": r}
                                   for k in range(1, spec.parallel_branches + 1)]})
    if rng.random() < spec.gate_fraction:
        steps.append({"id": "approve", "kind": "human", "prompt": f"approve task {n}?",
                      "timeoutMs": spec.gate_timeout_ms, "onTimeout": spec.gate_on_timeout})
    if rng.random() < spec.subflow_fraction:
        steps.append({"id": "sub", "kind": "subflow", "merge": "deep",
                      "steps": [{"id": "s1", "kind": "work"}, {"id": "s2", "kind": "work"}]})
    steps.append({"id": "finish", "kind": "work", "retries": r, "merge": "replace"})
    return steps


def step_outcome(spec: WorkloadSpec, seed: int, instance_id: str, path: str,
                 attempt: int) -> tuple[float, bool, list[dict[str, Any]]]:
    """What one attempt of a step does, from the seed: how long it takes, whether it
    succeeds, and what it writes to its working copy. A failing attempt writes a draft
    first — exactly what copy-on-write must keep out of the instance's context. Every
    value names its instance, so a value in another instance's context is a leak. A step
    that succeeds also moves the instance's `progress` on — in a parallel step only its
    first branch does, so the others leave a key a sibling changed untouched (a merge must
    keep the sibling's value, not write the untouched one back over it)."""
    rng = rng_for(seed, f"step/{instance_id}/{path}/{attempt}")
    duration = spec.step_duration_ms.sample(rng)
    ok = rng.random() >= spec.step_failure_rate
    if _hangs(spec, rng):
        duration = math.inf
    key = path.replace("/", ".")
    if ok:
        ops = [{"op": "set", "path": ["facts", key], "value": f"{instance_id}/{path}#{attempt}"},
               {"op": "append", "path": ["log"], "value": f"{instance_id}/{path}"}]
        if not re.search(r"/b(?!1$)\d+$", path):
            ops.append({"op": "set", "path": ["facts", "progress"],
                        "value": f"{instance_id}/{path}"})
    else:
        ops = [{"op": "set", "path": ["facts", f"{key}~draft"],
                "value": f"{instance_id}/{path}#{attempt}/draft"},
               {"op": "append", "path": ["log"], "value": f"{instance_id}/{path}#{attempt}/draft"}]
    return duration, ok, ops


def human_clicks(spec: WorkloadSpec, seed: int, gate_id: str, ask: int) -> list[tuple[float, str]]:
    """How the person shown a gate answers: (delay ms, decision) per click. `never` does not
    click; `double_click` clicks twice in quick succession (the second may differ)."""
    rng = rng_for(seed, f"human/{gate_id}/{ask}")
    total = sum(w for _k, w in spec.humans)
    draw, kind = rng.random() * total, spec.humans[-1][0]
    for k, w in spec.humans:
        if draw < w:
            kind = k
            break
        draw -= w
    decision = "reject" if rng.random() < spec.reject_fraction else "approve"
    if kind == "never":
        return []
    if kind == "slow":
        return [(rng.uniform(3_000, 8_000), decision)]
    first = rng.uniform(100, 600)
    if kind == "fast":
        return [(first, decision)]
    other = decision if rng.random() < 0.5 else ("reject" if decision == "approve" else "approve")
    return [(first, decision), (first + rng.uniform(20, 150), other)]


@dataclass(frozen=True)
class Behaviour:
    """What the simulated agents and people do, decided from the workload and the seed
    alone — the one model every substrate's driver consults, so a task, a step or a
    person behaves the same in simulation and live."""

    spec: WorkloadSpec
    seed: int

    def task(self, task_id: str, turn: int = 1) -> tuple[float, bool]:
        return task_outcome(self.spec, self.seed, task_id if turn == 1 else f"{task_id}/t{turn}")

    def asks_for_input(self, task_id: str, turn: int) -> bool:
        """Whether the agent ends this turn with a question (multi_turn_fraction): on the
        first turn only, so every conversation ends."""
        return turn == 1 and self.spec.multi_turn_fraction > 0 \
            and rng_for(self.seed, f"turns/{task_id}").random() < self.spec.multi_turn_fraction

    def flow(self, task_id: str, duration_ms: float) -> list[tuple[float, str, str]]:
        return flow_events(self.spec, self.seed, task_id, duration_ms)

    def step(self, instance_id: str, path: str,
             attempt: int) -> tuple[float, bool, list[dict[str, Any]]]:
        return step_outcome(self.spec, self.seed, instance_id, path, attempt)

    def human(self, gate_id: str, ask: int) -> list[tuple[float, str]]:
        return human_clicks(self.spec, self.seed, gate_id, ask)

    # -- the same, as what the agents and people tell the node, and when ---------------------
    def task_plan(self, task_id: str, node_id: str, agent_id: str, turn: int = 1) -> Plan:
        """A task's stream and its end, each after its delay from the task's start (an agent
        that hangs says nothing: only the node's watchdog ends its task). An agent that
        asks for input ends its turn well, with `{"inputRequired": question}`."""
        duration, ok = self.task(task_id, turn)
        if math.isinf(duration):
            return []
        plan: Plan = [(offset, {"op": "flow", "task_id": task_id, "kind": kind, "text": text})
                      for offset, kind, text in self.flow(task_id, duration)]
        result: Any = {"by": node_id, "agent": agent_id} if ok else None
        if self.asks_for_input(task_id, turn):
            ok, result = True, {INPUT_REQUIRED: f"which one, for task {task_id}?"}
        plan.append((duration, {"op": "task_finished", "task_id": task_id, "ok": ok,
                                "result": result, "error": None if ok else "task failed"}))
        return plan

    def step_plan(self, instance_id: str, path: str, attempt: int) -> Plan:
        duration, ok, ops = self.step(instance_id, path, attempt)
        if math.isinf(duration):
            return []   # the agent hangs on this attempt
        return [(duration, {"op": "step_finished", "instance_id": instance_id, "path": path,
                            "attempt": attempt, "ok": ok, "ops": ops})]

    def human_plan(self, gate_id: str, ask: int) -> Plan:
        """The clicks of the people asked at a gate; each is journaled (human_clicked) as
        it is made, before the node hears of it."""
        return [(delay, {"op": "human_decided", "gate_id": gate_id, "decision": decision,
                         "click": f"{gate_id}/ask{ask}/click{k + 1}"})
                for k, (delay, decision) in enumerate(self.human(gate_id, ask))]


#: What the agents and people tell a node, as lines of the node-process protocol when the
#: bench plays them (a node whose launch spec says `"agents_by": "bench"`), and what its
#: host tells the core when the node plays them itself: one translation for both.
AGENT_OPS = ("task_finished", "flow", "step_finished", "human_decided")
Plan = list[tuple[float, dict[str, Any]]]


def click_of(op: dict[str, Any]) -> HumanClicked | None:
    """What the journal says of an agent operation as it is made: a person's click (the
    node never reports it; whoever plays the people does)."""
    if op["op"] != "human_decided":
        return None
    return HumanClicked(op["gate_id"], op["decision"], op["click"])


def answer_of(op: dict[str, Any]) -> AgentAnswered | None:
    """What the journal says of an agent's answer to a task as it is given (whoever plays
    the agents, the bench journals it: the node's own word never stands in for it)."""
    if op["op"] != "task_finished":
        return None
    result = op.get("result")
    return AgentAnswered(str(op["task_id"]), bool(op["ok"]), asks_input=bool(
        op["ok"]) and isinstance(result, dict) and INPUT_REQUIRED in result)


def agent_input(op: dict[str, Any], now_ms: int) -> Input:
    """One agent operation as the core's input; raises KeyError/TypeError/ValueError on a
    bad line."""
    def text(key: str) -> str:
        value = op[key]
        if not isinstance(value, str):
            raise TypeError(f"{key} must be a string, not {value!r}")
        return value

    def flag(key: str) -> bool:
        if not isinstance(op[key], bool):
            raise TypeError(f"{key} must be true or false, not {op[key]!r}")
        return bool(op[key])
    match op["op"]:
        case "task_finished":
            error = op.get("error")
            return TaskFinished(now_ms, text("task_id"), flag("ok"), op.get("result"),
                                None if error is None else str(error))
        case "flow":
            return AgentEmitted(now_ms, text("task_id"), FlowKind(op["kind"]), text("text"))
        case "step_finished":
            attempt = op["attempt"]
            if not isinstance(attempt, int) or isinstance(attempt, bool):
                raise TypeError(f"attempt must be an integer, not {attempt!r}")
            return StepReturned(now_ms, text("instance_id"), text("path"), attempt,
                                flag("ok"), tuple(op.get("ops") or ()))
        case "human_decided":
            return HumanDecided(now_ms, text("gate_id"), text("decision"), text("click"))
        case other:
            raise ValueError(f"op={other!r} must be one of {list(AGENT_OPS)}")
