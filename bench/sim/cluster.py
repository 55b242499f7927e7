"""The simulated deployment: a simpy environment, the broker model, one host per node of
the topology, and the history they all write to. Virtual time is in milliseconds; every
random draw comes from streams of the run's one seed (`bench.distribution.rng_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from bench.core.commands import Execute, SettleRequest
from bench.core.config import NodeConfig
from bench.core.inputs import FlowEmitted, TaskFinished
from bench.core.node import Node
from bench.distribution import rng_for
from bench.history import Recorder
from bench.sim.broker import SimBroker
from bench.sim.host import SimHost
from bench.sim.link import Link
from bench.topology import LinkSpec

#: How long a task's work takes, and whether it succeeds: (duration_ms, ok).
TaskModel = Callable[[str, Execute], tuple[float, bool]]
#: What the task's flow streams meanwhile: (offset_ms, kind, text) for a task and duration.
FlowModel = Callable[[str, float], list[tuple[float, str, str]]]


def _flow_input(host: SimHost, task_id: str, kind: str, text: str) -> Callable[[], FlowEmitted]:
    return lambda: FlowEmitted(host.now_ms, task_id, kind, text)


class SimCluster:
    def __init__(self, seed: int, recorder: Recorder, *, per_filter_copies: bool,
                 task_model: TaskModel,
                 flow_model: FlowModel = lambda task_id, duration: []) -> None:
        self.seed = seed
        self.env = simpy.Environment()
        self.recorder = recorder
        self.broker = SimBroker(self.env, per_filter_copies=per_filter_copies,
                                record=lambda kind, fields: self.record("broker", kind, fields))
        self.hosts: dict[str, SimHost] = {}
        self.task_model = task_model
        self.flow_model = flow_model
        self.settled: dict[str, str] = {}

    def record(self, node: str, kind: str, fields: dict[str, Any]) -> None:
        self.recorder.append(round(self.env.now, 3), node, kind, fields)

    def add(self, config: NodeConfig, node_class: type[Node], link: LinkSpec) -> SimHost:
        if config.node_id in self.hosts:
            raise ValueError(f"node {config.node_id} added twice")
        host = SimHost(self, config, node_class, Link(link, rng_for(self.seed, f"link/{config.node_id}")))
        self.hosts[config.node_id] = host
        return host

    def on_execute(self, host: SimHost, cmd: Execute) -> None:
        duration, ok = self.task_model(host.node_id, cmd)
        for offset, kind, text in self.flow_model(cmd.task_id, duration):
            host.later(offset, _flow_input(host, cmd.task_id, kind, text))
        host.later(duration, lambda: TaskFinished(host.now_ms, cmd.task_id, ok,
                                                  {"by": host.node_id, "agent": cmd.agent_id}
                                                  if ok else None,
                                                  None if ok else "task failed"))

    def on_settle(self, host: SimHost, cmd: SettleRequest) -> None:
        self.settled[cmd.request_id] = cmd.outcome.value

    def run(self, until_ms: float) -> None:
        self.env.run(until=until_ms)
