"""Run a scenario live: a real broker, real nodes (in this process on asyncio, or one OS
process each), the same workload plan as the simulator, in wall time. Every event lands in
one history, stamped with milliseconds since the run's start."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from bench.core.config import NodeConfig
from bench.history import Recorder
from bench.substrates.live.brokers import Broker
from bench.substrates.live.control import LaunchSpec, apply_op
from bench.substrates.live.host import Clock, LiveHost
from bench.variants import Variant
from bench.variants import variant as variant_by_name
from bench.workload import EventOp, RequestOp, TabOp

SELF_CHECK_TIMEOUT_S = 20.0


class SelfCheckFailed(RuntimeError):
    """A node did not come up the way seed 002 §11.3's four start-up lines say it must."""


class LiveNode(Protocol):
    node_id: str
    spec: LaunchSpec

    async def start(self) -> None: ...
    async def crash(self) -> None: ...
    async def stop(self) -> None: ...
    def send(self, op: dict[str, Any]) -> None: ...


class InprocNode:
    """A node on this process's event loop; a crash discards the node object and the next
    start rebuilds it from the files in its data dir."""

    def __init__(self, spec: LaunchSpec, sink: Callable[[str, str, dict[str, Any]], None]) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.sink = sink
        self.host: LiveHost | None = None

    async def start(self) -> None:
        self.host = LiveHost(self.spec.config, variant_by_name(self.spec.variant).node_class,
                             self.spec.data_dir, self.spec.broker, self.sink,
                             Clock(self.spec.t0), self.spec.behaviour())
        self.host.boot()

    async def crash(self) -> None:
        if self.host is not None:
            self.host.crash()
        self.host = None

    async def stop(self) -> None:
        if self.host is not None:
            self.host.stop()
        self.host = None

    def send(self, op: dict[str, Any]) -> None:
        if self.host is None or self.host.node is None:
            self.sink(self.node_id, "op_not_issued", {"op": op["op"], "reason": "node is down"})
            return
        apply_op(self.host, op)


class ProcessNode:
    """A node in its own OS process (`python -m bench.substrates.live.node_process`); a crash is
    SIGKILL, and the next start is a new process on the same data dir."""

    def __init__(self, spec: LaunchSpec, sink: Callable[[str, str, dict[str, Any], int], None]) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.sink = sink
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.substrates.live.node_process", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=None, env=env)
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(self.spec.to_json()) + "\n").encode())
        await self.proc.stdin.drain()
        self._reader = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = await proc.stdout.readline()
            if not line:
                return
            try:
                e = json.loads(line)
            except ValueError:
                self.sink(self.node_id, "harness_error", {"error": "unparsable output line",
                                                          "line": line[:200].decode(errors="replace")},
                          -1)
                continue
            self.sink(e["node"], e["kind"], e["fields"], e["tMs"])

    async def crash(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()  # SIGKILL
            await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self.proc = None

    async def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.returncode is None and self.proc.stdin is not None:
            self.send({"op": "stop"})
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self.proc = None

    def send(self, op: dict[str, Any]) -> None:
        if self.proc is None or self.proc.returncode is not None or self.proc.stdin is None:
            self.sink(self.node_id, "op_not_issued", {"op": op["op"], "reason": "node is down"}, -1)
            return
        self.proc.stdin.write((json.dumps(op) + "\n").encode())


class LiveRun:
    """The state of one live run: clock, history, nodes, broker, and request bookkeeping."""

    def __init__(self, recorder: Recorder, broker: Broker, clock: Clock) -> None:
        self.recorder = recorder
        self.broker = broker
        self.clock = clock
        self.nodes: dict[str, LiveNode] = {}
        self.proxies: dict[str, Any] = {}          # node id -> FaultProxy in front of it
        self.outstanding: set[str] = set()               # requests not settled yet
        self.running: set[tuple[str, str]] = set()       # (node, task) not terminal yet
        self.undelivered: set[tuple[str, str]] = set()   # (target node, messageId) in flight
        self._delivered: set[tuple[str, str]] = set()    # PUBACK can come after delivery
        self.watchers: list[tuple[Callable[[str, str, dict[str, Any]], bool], asyncio.Future[None]]] = []

    def record(self, node: str, kind: str, fields: dict[str, Any], t_ms: int | None = None) -> None:
        t = self.clock.now_ms() if t_ms is None or t_ms < 0 else t_ms
        self.recorder.append(t, node, kind, fields)
        if kind == "request_sent":
            self.outstanding.add(fields["requestId"])
        elif kind == "request_settled":
            self.outstanding.discard(fields["requestId"])
        elif kind == "task_state":
            if fields["state"] in ("SUBMITTED", "RUNNING"):
                self.running.add((node, fields["taskId"]))
            else:
                self.running.discard((node, fields["taskId"]))
        elif kind == "outbound_settled" and fields["state"] == "PUBLISHED" \
                and fields["messageType"] != "EVENT" and fields.get("targetNodeId") in self.nodes:
            key = (fields["targetNodeId"], fields["messageId"])
            if key not in self._delivered:
                self.undelivered.add(key)
        elif kind in ("inbound_admitted", "inbound_dropped") and fields.get("messageId"):
            self._delivered.add((node, fields["messageId"]))
            self.undelivered.discard((node, fields["messageId"]))
        for pred, fut in list(self.watchers):
            if not fut.done() and pred(node, kind, fields):
                fut.set_result(None)

    @property
    def quiet(self) -> bool:
        """Nothing left to settle, run or deliver: the drain can stop."""
        return not (self.outstanding or self.running or self.undelivered)

    def record_now(self, node: str, kind: str, fields: dict[str, Any]) -> None:
        """An event stamped on arrival (in-process nodes share this clock)."""
        self.record(node, kind, fields)

    def watch(self, pred: Callable[[str, str, dict[str, Any]], bool]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.watchers.append((pred, fut))
        fut.add_done_callback(lambda f: self.watchers.remove((pred, fut)))
        return fut

    async def until(self, ms: float) -> None:
        delay = self.clock.at(ms) - time.time()
        if delay > 0:
            await asyncio.sleep(delay)


def self_check_lines(events: list[dict[str, Any]], node: str) -> list[str]:
    """Seed 002 §11.3's four start-up lines for one node, from its recorded events."""
    def last(kind: str) -> dict[str, Any] | None:
        found = [e for e in events if e["node"] == node and e["kind"] == kind]
        return found[-1] if found else None
    lines = []
    roster, store = last("roster_loaded"), last("self_check")
    conn, execs = last("connected"), last("executors_registered")
    if roster:
        lines.append(f"[AgentRoster] executors: ids={roster['agents']}, nodeId={node}, "
                     f"domain={roster['namespace']}")
    if store:
        lines.append(f"[A2AMessageStore] ready: sqlite:{store['store']}")
    if conn:
        lines.append(f"[A2A-MQTT] connected: clientId={conn['clientId']}, localNodeId={node}, "
                     f"subscribed {conn['subscriptions']}")
    if execs:
        lines.append(f"[A2aRegistrar] executors registered: {execs['registered']} / "
                     f"{execs['expected']} (nodeId={node})")
    return lines


def _registered(node_id: str) -> Callable[[str, str, dict[str, Any]], bool]:
    return lambda node, kind, _fields: node == node_id and kind == "executors_registered"


async def start_nodes(run: LiveRun, specs: list[LaunchSpec], mode: str) -> list[str]:
    """Start every node and wait for its self-check; returns the lines, or raises."""
    for spec in specs:
        node: LiveNode = InprocNode(spec, run.record_now) if mode == "inproc" else \
            ProcessNode(spec, run.record)
        run.nodes[spec.config.node_id] = node
    ready = {n: run.watch(_registered(n)) for n in run.nodes}
    for node in run.nodes.values():
        await node.start()
    done, pending = await asyncio.wait(ready.values(), timeout=SELF_CHECK_TIMEOUT_S)
    events = [e.to_json() for e in run.recorder.events]
    lines: list[str] = []
    failed = []
    for n in run.nodes:
        node_lines = self_check_lines(events, n)
        lines += node_lines
        regs = [e for e in events if e["node"] == n and e["kind"] == "executors_registered"]
        if len(node_lines) < 4 or not regs or regs[-1]["registered"] != regs[-1]["expected"]:
            failed.append(n)
            run.record(n, "self_check_failed", {"lines": node_lines,
                                                "missing": 4 - len(node_lines)})
    for fut in pending:
        fut.cancel()
    if failed:
        raise SelfCheckFailed(f"self-check failed on {failed}: "
                              f"see self_check_failed in the history")
    return lines


def launch_specs(configs: list[NodeConfig], variant: Variant, workdir: Path, broker: Broker,
                 t0: float, seed: int, workload: dict[str, Any]) -> list[LaunchSpec]:
    return [LaunchSpec(c, variant.name, workdir / "data" / c.node_id, (broker.host, broker.port),
                       t0, seed, workload) for c in configs]


def op_json(op: RequestOp | EventOp | TabOp) -> dict[str, Any]:
    if isinstance(op, RequestOp):
        return {"op": "request", "request_id": op.request_id, "message_id": op.message_id,
                "from_agent_id": op.from_agent_id, "to_agent_id": op.to_agent_id,
                "payload": op.payload, "conversation_id": op.conversation_id,
                "target_node_id": op.target_node_id, "timeout_ms": op.timeout_ms}
    if isinstance(op, TabOp):
        return {"op": "tab", "subscriber_id": op.subscriber_id,
                "conversation_id": op.conversation_id, "attach": op.attach}
    return {"op": "event", "message_id": op.message_id, "from_agent_id": op.from_agent_id,
            "scene_group_id": op.scene_group_id, "conversation_id": op.conversation_id}


def with_config(spec: LaunchSpec, **changes: Any) -> LaunchSpec:
    return replace(spec, config=replace(spec.config, **changes))
