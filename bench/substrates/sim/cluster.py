"""The simulated deployment: a simpy environment, the broker model, one host per node of
the topology, and the history they all write to. Virtual time is in milliseconds; every
random draw comes from streams of the run's one seed (`bench.spec.distribution.rng_for`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy

from bench.core.commands import AskHuman, Execute, RunStep, SettleRequest
from bench.core.config import NodeConfig
from bench.core.inputs import FlowEmitted, HumanDecided, StepFinished, TaskFinished
from bench.core.node import Node
from bench.history import Recorder
from bench.spec.distribution import rng_for
from bench.spec.topology import LinkSpec
from bench.substrates.sim.broker import SimBroker
from bench.substrates.sim.host import SimHost
from bench.substrates.sim.link import Link
from bench.workload import Behaviour


def _flow_input(host: SimHost, task_id: str, kind: str, text: str) -> Callable[[], FlowEmitted]:
    return lambda: FlowEmitted(host.now_ms, task_id, kind, text)


def _click(cluster: SimCluster, host: SimHost, gate_id: str, decision: str,
           click: str) -> Callable[[], HumanDecided]:
    def make() -> HumanDecided:
        cluster.record(host.node_id, "human_clicked", {"gateId": gate_id, "decision": decision,
                                                       "click": click})
        return HumanDecided(host.now_ms, gate_id, decision, click)
    return make


class SimCluster:
    def __init__(self, seed: int, recorder: Recorder, *, per_filter_copies: bool,
                 behaviour: Behaviour) -> None:
        self.seed = seed
        self.env = simpy.Environment()
        self.recorder = recorder
        self.broker = SimBroker(self.env, per_filter_copies=per_filter_copies,
                                record=lambda kind, fields: self.record("broker", kind, fields))
        self.hosts: dict[str, SimHost] = {}
        self.behaviour = behaviour
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
        duration, ok = self.behaviour.task(cmd.task_id)
        for offset, kind, text in self.behaviour.flow(cmd.task_id, duration):
            host.later(offset, _flow_input(host, cmd.task_id, kind, text))
        host.later(duration, lambda: TaskFinished(host.now_ms, cmd.task_id, ok,
                                                  {"by": host.node_id, "agent": cmd.agent_id}
                                                  if ok else None,
                                                  None if ok else "task failed"))

    def on_run_step(self, host: SimHost, cmd: RunStep) -> None:
        duration, ok, ops = self.behaviour.step(cmd.instance_id, cmd.path, cmd.attempt)
        host.later(duration, lambda: StepFinished(host.now_ms, cmd.instance_id, cmd.path,
                                                  cmd.attempt, ok, tuple(ops)))

    def on_ask_human(self, host: SimHost, cmd: AskHuman) -> None:
        """The people watching the conversation on this (home) node answer; if the node
        dies while they think, their click goes nowhere (the gate store asks again)."""
        for k, (delay, decision) in enumerate(self.behaviour.human(cmd.gate_id, cmd.ask)):
            click = f"{cmd.gate_id}/ask{cmd.ask}/click{k + 1}"
            host.later(delay, _click(self, host, cmd.gate_id, decision, click))

    def on_settle(self, host: SimHost, cmd: SettleRequest) -> None:
        self.settled[cmd.request_id] = cmd.outcome.value

    def run(self, until_ms: float) -> None:
        self.env.run(until=until_ms)
