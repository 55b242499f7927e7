"""Execution: no requestId runs twice; every task walks its state machine to exactly one
terminal state and stops there."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.checks import Collector, History, Verdict
from bench.core.task import TASK, TaskState


def duplicate_execution(h: History) -> Verdict:
    """No requestId executes twice, on any node, across redeliveries and restarts."""
    c = Collector("duplicate_execution")
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("task_executed"):
        runs[e["taskId"]].append(e)
    c.count("tasks", len(runs))
    c.count("executions", sum(len(v) for v in runs.values()))
    for task_id, events in sorted(runs.items()):
        if len(events) > 1:
            c.count("executed_more_than_once")
            c.violation(f"requestId {task_id} executed {len(events)} times on "
                        f"{sorted({e['node'] for e in events})}", *events, taskId=task_id)
    return c.verdict()


_LEGAL = {(a.value, b.value) for (a, _e), b in TASK.table.items()}
_TERMINAL = {s.value for s in TASK.terminal}


def task_lifecycle(h: History) -> Verdict:
    """Every task starts SUBMITTED, moves only along the task state machine and stops at
    exactly one terminal state."""
    c = Collector("task_lifecycle")
    trails: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for e in h.of("task_state"):
        trails[(e["node"], e["taskId"])].append(e)
    c.count("tasks", len(trails))
    for (node, task_id), events in sorted(trails.items()):
        first = events[0]
        if first["state"] != TaskState.SUBMITTED.value or first.get("previous") is not None:
            c.violation(f"task {task_id} on {node} did not start SUBMITTED", first)
        terminal_seen: dict[str, Any] | None = None
        for prev, cur in zip(events, events[1:], strict=False):
            if terminal_seen is not None:
                c.violation(f"task {task_id} on {node} changed state after terminal "
                            f"{terminal_seen['state']}", terminal_seen, cur)
                break
            if (prev["state"], cur["state"]) not in _LEGAL or cur.get("previous") != prev["state"]:
                c.violation(f"task {task_id} on {node}: illegal {prev['state']} -> {cur['state']}",
                            prev, cur)
            if cur["state"] in _TERMINAL:
                terminal_seen = cur
        last = events[-1]["state"]
        if last in _TERMINAL:
            c.count(f"ended_{last.lower()}")
        else:
            c.unknown("unfinished_at_end")
    return c.verdict()
