"""The one run loop, for every substrate (the shape of Jepsen's generator interpreter).

The workload decides what users ask for (a time-ordered plan of operations), the nemesis
what breaks (each fault's script), the deployment carries both out on its own clock, and
the history records what happened. The loop only schedules: the next operation when its
time comes (one pending call at a time, however long the plan), every fault at its time.
An operation that throws while being issued is journaled as `op_failed` — an
indeterminate (INFO) operation — and the run goes on.

The run ends after the workload, once every fault script has finished, and — where the
substrate can tell (`settled`) — as soon as nothing is left to settle, else at the drain's
end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench.core.events import OpFailed, WorkloadStarted
from bench.faults.runner import Nemesis
from bench.faults.spec import FaultSpec
from bench.substrates import Deployment
from bench.workload import Op, op_kind

#: (elapsed ms, planned ms) of the run, called as time passes.
Progress = Callable[[float, float], None]


class _Feeder:
    """Issues the plan's operations at their times, one scheduled call at a time."""

    def __init__(self, dep: Deployment, ops: Sequence[Op], origin_ms: float) -> None:
        self.dep = dep
        self.ops = ops
        self.origin_ms = origin_ms
        self.next = 0
        self.stopped = False

    def start(self) -> None:
        if self.ops:
            self.dep.call_later(self.ops[0].at_ms, self._due)

    def stop(self) -> None:
        """Issue nothing more (the run was interrupted: its deployment is stopping)."""
        self.stopped = True

    def _due(self) -> None:
        if self.stopped:
            return
        dep = self.dep
        now = dep.now_ms() - self.origin_ms
        while self.next < len(self.ops) and self.ops[self.next].at_ms <= now:
            op = self.ops[self.next]
            self.next += 1
            try:
                dep.issue(op)
            except Exception as exc:   # an indeterminate operation, not a dead run
                dep.record(op.node_id, OpFailed(op_kind(op), op.message_id, repr(exc)[:300]))
        if self.next < len(self.ops):
            dep.call_later(self.ops[self.next].at_ms - now, self._due)


def run_loop(dep: Deployment, ops: Sequence[Op], faults: tuple[FaultSpec, ...], *,
             duration_ms: float, drain_ms: float,
             progress: Progress | None = None) -> dict[str, Any]:
    """Drive a started deployment through the plan and the faults; returns run statistics."""
    origin = dep.now_ms()          # the workload's clock starts once every node is up
    dep.record("bench", WorkloadStarted(duration_ms, drain_ms))
    nemesis = Nemesis(dep, faults, origin_ms=origin, workload_ms=duration_ms)
    nemesis.schedule()
    feeder = _Feeder(dep, ops, origin)
    feeder.start()
    end, deadline = origin + duration_ms, origin + duration_ms + drain_ms
    step = max(1000.0, (duration_ms + drain_ms) / 50)

    def advance(until: float, stop: Callable[[], bool] = lambda: False, by: float = step) -> None:
        while dep.now_ms() < until and not stop():
            dep.run_until(min(until, dep.now_ms() + by))
            if progress is not None:
                progress(dep.now_ms() - origin, deadline - origin)

    try:
        advance(end)
        advance(deadline, lambda: not nemesis.active, dep.poll_ms)
        advance(deadline, dep.settled, dep.poll_ms)
    except BaseException:
        # interrupted (or broken): while the deployment stops, its clock still runs the
        # calls scheduled on it; no operation is issued and no fault acts any more (a
        # docker run issued requests to stopped nodes for seconds after a Ctrl-C)
        feeder.stop()
        nemesis.halt()
        raise
    nemesis.close()
    return {"simulated_ms": dep.now_ms(), "operations": len(ops)}
