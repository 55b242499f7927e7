"""What several test modules share: reference cores wired back to back (as h11's tests
wire two connections), small typed histories for checker tests, and real histories to
mutate. Fixtures stay in conftest.py; plain helpers live here."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.core import events as ev
from bench.core.config import NodeConfig
from bench.core.envelope import Json
from bench.history import History

# -- two cores back to back ------------------------------------------------------------------------


def orchestrator(**kw: object) -> NodeConfig:
    base: dict[str, object] = dict(node_id="orch-1", namespace="fin", agents=("fin.orchestrator",))
    base.update(kw)
    return NodeConfig(**base)  # type: ignore[arg-type]


def executor(**kw: object) -> NodeConfig:
    base: dict[str, object] = dict(node_id="exec-1", namespace="llm", agents=("llm.tax",))
    base.update(kw)
    return NodeConfig(**base)  # type: ignore[arg-type]


# -- small typed histories ---------------------------------------------------------------------------
#: Two boots every small history starts with (orchestrator fin, executor llm).
BOOTS = (ev.NodeStarted("b1", "fin", "orch-1", "loose", "1", node="orch-1"),
         ev.NodeStarted("b1", "llm", "exec-1", "loose", "1", node="exec-1"))


#: the step between events where a test gives none: 1 ms, or 0 where a test module runs
#: its histories with every event in one millisecond too (tests/checks/conftest.py)
STEP_MS = [1.0]


def history(*events: ev.Event, boots: bool = True, t0: float = 0.0,
            step_ms: float | None = None) -> History:
    """A history of `events` in order: seq 1.., tMs t0 + i * step_ms, and each event's node
    as given (the two boots first, unless boots=False)."""
    step_ms = STEP_MS[0] if step_ms is None else step_ms
    seq = (*BOOTS, *events) if boots else events
    return History(replace(e, seq=i + 1, t_ms=t0 + i * step_ms) for i, e in enumerate(seq))


def not_true(result: Any) -> str:
    """A run's verdicts other than TRUE, each with its first counterexample in full: as an
    assertion's message (a string, which pytest prints whole; a list it cut at 240
    characters, and a CI failure then hid the rule's own words)."""
    return "\n".join(f"{v.name} {v.value.value}: {json.dumps(v.counterexamples[:1])}"
                     for v in result.verdicts if v.value.value != "true")


def at(node: str, event: ev.Event) -> ev.Event:
    return replace(event, node=node)


def executed(task: str, node: str = "exec-1") -> ev.TaskExecuted:
    return ev.TaskExecuted(task, "llm.tax", "c1", f"m-{task}", node=node)


def task_state(task: str, state: str, previous: str | None,
               error: str | None = None) -> ev.TaskState:
    return ev.TaskState(task, "llm.tax", state, previous, error, node="exec-1")


def request_sent(rid: str, deadline_ms: int = 100, timeout_ms: int = 100) -> ev.RequestSent:
    return ev.RequestSent(rid, f"m-{rid}", "fin.orchestrator", "llm.tax", "c1", deadline_ms,
                          timeout_ms, node="orch-1")


def request_settled(rid: str, outcome: str, latency_ms: int | None = None) -> ev.RequestSettled:
    if latency_ms is None:   # a NO_RESPONSE comes at the timeout, anything else soon
        latency_ms = 100 if outcome == "NO_RESPONSE" else 1
    return ev.RequestSettled(rid, outcome, latency_ms, None, node="orch-1")


def outbound(message_id: str, state: str, *, message_type: str = "TASK_REQUEST",
             target: str | None = None, topic: str | None = None, request_id: str | None = None,
             node: str = "orch-1") -> ev.OutboundSettled:
    return ev.OutboundSettled(message_id, message_type, state, "test", None, target, request_id,
                              topic, node=node)


def admitted(node: str, to: str | None, target: str | None, *, message_type: str = "TASK_REQUEST",
             message_id: str = "m", request_id: str | None = None,
             reply_node_id: str | None = None, verdict: str | None = "UNSIGNED",
             via: str = "mqtt") -> ev.InboundAdmitted:
    return ev.InboundAdmitted(message_id, message_type, "fin.orchestrator", to, target,
                              request_id, "orch-1", reply_node_id, verdict, via, "test",
                              node=node)


def dropped(node: str, reason: str, *, request_id: str | None = None,
            message_id: str | None = "m", verdict: str | None = None) -> ev.InboundDropped:
    return ev.InboundDropped(reason, "test", None, message_id, "TASK_REQUEST", "fin.orchestrator",
                             request_id, verdict, None, node=node)


def fault_start(kind: str, index: int = 0, disrupts: bool = False,
                **params: Json) -> ev.FaultStart:
    return ev.FaultStart(kind, index, 0.0, None, dict(params), disrupts, node="nemesis")


def crashed(node: str = "exec-1") -> ev.NodeCrashed:
    return ev.NodeCrashed(0, "test", None, node=node)


def booted(node: str = "exec-1") -> ev.NodeStarted:
    return ev.NodeStarted("b2", "llm", node, "loose", "1", node=node)


def fault_fired(kind: str, index: int = 0) -> ev.FaultFired:
    return ev.FaultFired(kind, index, "test", node="nemesis")


def fault_healed(kind: str, index: int = 0) -> ev.FaultHealed:
    return ev.FaultHealed(kind, index, node="nemesis")


# -- real histories, as lines to mutate ------------------------------------------------------------
Lines = list[dict[str, Any]]


def run_lines(out: Path, scenario: str, variant: str = "reference") -> Lines:
    """The history of one simulated run of a shipped scenario, as raw lines."""
    from bench.spec.scenario import SCENARIOS
    return _sim_lines(out, SCENARIOS / f"{scenario}.toml", variant)


#: The minimal scenarios explore shrank from false verdicts on the reference (regressions).
EXPLORED = Path(__file__).parent / "data" / "explored"


def explored_lines(out: Path, name: str) -> Lines:
    """The history of one simulated run of an explored regression scenario, as raw lines."""
    return _sim_lines(out, EXPLORED / f"{name}.toml", "reference")


def _sim_lines(out: Path, path: Path, variant: str) -> Lines:
    from bench.run import run_scenario
    from bench.spec.scenario import load_scenario
    from bench.variants import variant as variant_by_name
    run_scenario(load_scenario(path), variant_by_name(variant), out, mode="sim")
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def from_lines(lines: Iterable[dict[str, Any]]) -> History:
    return History.from_lines(lines, "test")


def node_clock_origins(history: Path) -> list[float]:
    """For each request sent, where the requester's clock stood at the run's zero: its
    deadline less its timeout (the node's clock when it sent) less the run's tMs."""
    lines = (json.loads(line) for line in history.read_text().splitlines())
    return [e["deadlineMs"] - e["timeoutMs"] - e["tMs"] for e in lines
            if e["kind"] == "request_sent"]
