"""The agents and people of a node that does not play them itself: a node not written in
this package is told, as lines on its stdin, what the reference's agents and people would
do, when they would do it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from bench.core import events as ev
from bench.workload import answer_of, click_of

if TYPE_CHECKING:
    from bench.substrates.live.nodes import ProcessNode


class BenchAgents:
    """The agents and people of a node that does not play them itself (its launch spec says
    `agents_by = "bench"`: a node not written in this package cannot draw from the seed as
    `Behaviour` does). Its `agent_called`, `step_started` and `human_asked` events cue the
    same plans the reference follows in-process, sent as lines after their delays; a click
    is journaled as it is made. A crash or a new boot of the node drops whatever was still
    pending, as the node's own timers would die with it."""

    def __init__(self, node: ProcessNode) -> None:
        self.node = node
        self.behaviour = node.spec.behaviour()
        self.generation = 0
        self.calls: dict[str, int] = {}     # task id -> its agent's calls so far, every boot

    def forget(self) -> None:
        self.generation += 1

    def saw(self, event: ev.Event) -> None:
        node_id = self.node.node_id
        match event:
            case ev.AgentCalled():
                # a node that does not say which turn it is: the how-manieth call for the task
                turn = self.calls[event.task_id] = self.calls.get(event.task_id, 0) + 1
                plan = self.behaviour.task_plan(event.task_id, node_id, event.agent_id,
                                                event.turn or turn)
            case ev.StepStarted():
                plan = self.behaviour.step_plan(event.process_inst_id, event.path, event.attempt)
            case ev.HumanAsked():
                plan = self.behaviour.human_plan(event.gate_id, event.ask)
            case ev.NodeStarted() | ev.NodeCrashed():   # it started again inside its process
                self.forget()
                return
            case _:
                return
        loop = asyncio.get_running_loop()
        for delay_ms, op in plan:
            loop.call_later(delay_ms / 1000.0, self._tell, self.generation, op)

    def _tell(self, generation: int, op: dict[str, Any]) -> None:
        if generation != self.generation:
            return
        if (click := click_of(op)) is not None:
            self.node.log.record(self.node.node_id, click)
        self.node.send(op)
        if (answer := answer_of(op)) is not None:
            self.node.log.record(self.node.node_id, answer)
