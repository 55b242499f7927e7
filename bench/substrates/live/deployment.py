"""The live deployment: a real broker (amqtt or Mosquitto as a child process, or an external
one), real nodes (on this deployment's event loop, or one OS process each), optionally an
MQTT-aware fault proxy in front of every node, in wall-clock time. Every event lands in one
history, stamped with milliseconds since the run started.

It owns its asyncio loop: the run loop lets time pass with `run_until`, and everything due
meanwhile — node callbacks, paho's messages, fault steps — runs on it. Fault primitives
that take time (killing a process, restarting the broker) run as tasks and report when
done; the ones this deployment cannot carry out (a link fault with no proxy, a restart of
an external broker with no command) are refused with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, assert_never

from bench.core import events as ev
from bench.core.config import NodeConfig
from bench.core.directory import ROSTER_DOCUMENT
from bench.core.events import from_fields
from bench.faults.primitives import (
    Boot,
    Broke,
    BrokerStart,
    BrokerStop,
    Capture,
    Crash,
    Crashed,
    Done,
    DuplicatePublish,
    FailPublishes,
    Firing,
    Freeze,
    Inject,
    Intercept,
    LinkDown,
    LinkLatency,
    LinkLoss,
    LinkUp,
    Outcome,
    Primitive,
    Redeliver,
    Refused,
    RotateKeys,
    SecondConnection,
    SkewClock,
    StripReplyNode,
    UseClientId,
    WipeRoster,
    WithholdPuback,
)
from bench.history import Line, Recorder
from bench.spec.distribution import rng_for
from bench.spec.scenario import Mode, Scenario
from bench.spec.topology import Topology
from bench.substrates import Hosting, Options, SelfCheckFailed, node_configs, run_started
from bench.substrates.live import tap as wire_tap
from bench.substrates.live.brokers import Broker, make_broker
from bench.substrates.live.control import LaunchSpec, apply_op, keys_to_json
from bench.substrates.live.host import Clock, LiveHost
from bench.substrates.live.mqtt import Delivery, MqttLink
from bench.substrates.live.proxy import FaultProxy
from bench.substrates.live.takeovers import TakeoverWatch
from bench.substrates.log import RunLog
from bench.variants import Variant
from bench.workload import Op, RequestOp, TabOp, click_of, op_kind, op_to_json

#: How long a deployment waits for every node's self-check, beyond its expected start-up.
#: It ends as soon as the last node registers, so only a node that never comes up costs
#: it: 20 s was once too little for a container on a 2-core machine running the suite's
#: eight workers beside docker (seen: memory_dedup_60s in docker, exec-3).
SELF_CHECK_TIMEOUT_S = 45.0
#: How long the history must have been quiet before a drain stops.
QUIET_MS = 300
#: How long a restarted node may take to register its executors again.
REBOOT_TIMEOUT_S = 20.0
#: How long an external broker's restart command may take to stop it, then to bring it back.
RESTART_COMMAND_S = 30.0


class LiveNode(Protocol):
    node_id: str
    spec: LaunchSpec

    @property
    def up(self) -> bool: ...

    async def start(self) -> None: ...
    async def crash(self) -> str: ...
    async def stop(self) -> None: ...
    def send(self, op: dict[str, Any]) -> bool: ...

    async def freeze(self, on: bool) -> str | None:
        """Freeze (on) or thaw the node's process; a reason if this hosting cannot."""
        ...

    @property
    def freezer(self) -> str:
        """How it freezes (journaled with the fault)."""
        ...


class InprocNode:
    """A node on the deployment's event loop; a crash discards the node object and the next
    start rebuilds it from the files in its data dir."""

    def __init__(self, spec: LaunchSpec, log: RunLog) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.log = log
        self.host: LiveHost | None = None

    @property
    def up(self) -> bool:
        return self.host is not None

    async def start(self) -> None:
        self.host = self.spec.host(lambda node, event: self.log.record(node, event),
                                   Clock(self.spec.t0))
        self.host.boot()

    async def crash(self) -> str:
        if self.host is not None:
            self.host.crash()
        self.host = None
        return "node object discarded"

    async def stop(self) -> None:
        if self.host is not None:
            self.host.stop()
        self.host = None

    freezer = "-"

    async def freeze(self, on: bool) -> str | None:
        return ("an inproc node shares the bench's process and event loop: freezing it "
                "would freeze the run; pause needs --nodes process (or --mode docker)")

    def send(self, op: dict[str, Any]) -> bool:
        if self.host is None or self.host.node is None:
            return False
        apply_op(self.host, op)
        return True


class ProcessNode:
    """A node in its own OS process (`python -m bench.substrates.live.node_process`, or the
    node's own `command`: anyone's node speaking the node-process protocol); a crash is
    SIGKILL, and the next start is a new process on the same data dir. A process that
    ends when the bench did not end it crashed: that is journaled (`node_crashed` with its
    exit status), never lost.

    The next process is started as soon as the old one is dead and waits, its Python and
    modules loaded, for its launch spec: a restart then costs a node's boot, as in the
    simulator and inproc, not a Python start-up too (0.2-0.5 s more down time, which
    showed as extra UNDELIVERABLE requests on the restart scenarios)."""

    def __init__(self, spec: LaunchSpec, log: RunLog, command: tuple[str, ...] = ()) -> None:
        self.node_id = spec.config.node_id
        self.spec = spec
        self.log = log
        self.command = command or (sys.executable, "-m", "bench.substrates.live.node_process")
        self.agents = BenchAgents(self) if spec.agents_by == "bench" else None
        self.proc: asyncio.subprocess.Process | None = None
        self._standby: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ending = False     # the bench is ending this process (a crash fault, a stop)

    @property
    def up(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def _spawn(self) -> asyncio.subprocess.Process:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # a session of its own: a Ctrl-C at the terminal goes to the bench, which stops its
        # nodes itself, and never kills a node it would then journal as a crash of the node
        return await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=None, env=env, start_new_session=True)

    async def _drop_standby(self) -> None:
        standby, self._standby = self._standby, None
        if standby is not None and standby.returncode is None:
            standby.kill()
            await standby.wait()

    async def start(self) -> None:
        standby, self._standby = self._standby, None
        self.proc = standby if standby is not None and standby.returncode is None \
            else await self._spawn()
        self._ending = False
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(self.spec.to_json()) + "\n").encode())
        await self.proc.stdin.drain()
        self._reader = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while True:
            line = await proc.stdout.readline()
            if not line:
                code = await proc.wait()
                if not self._ending:
                    self.log.record(self.node_id, ev.NodeCrashed(
                        None, f"its process ended by itself (exit status {code})", None,
                        f"exit status {code}"))
                return
            try:   # the node-process protocol: one event per line, checked against the schema
                e = json.loads(line)
                event = from_fields(e["kind"], e["fields"])
                node, t_ms = str(e["node"]), float(e["tMs"])
            except (ValueError, KeyError, TypeError) as exc:
                self.log.record(self.node_id, ev.HarnessError(
                    "unparsable output line",
                    {"why": str(exc)[:200], "line": line[:200].decode(errors="replace")}))
                continue
            self.log.record(node, event, t_ms)
            if self.agents is not None and node == self.node_id:
                self.agents.saw(event)

    async def crash(self) -> str:
        self._ending = True
        if self.agents is not None:
            self.agents.forget()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()  # SIGKILL
            await self.proc.wait()
        if self._reader is not None:
            await self._reader
        self.proc = None
        if self._standby is None:
            self._standby = await self._spawn()   # loads while the node is down
        return "SIGKILL"

    async def stop(self) -> None:
        self._ending = True
        await self._drop_standby()
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

    freezer = "SIGSTOP"

    async def freeze(self, on: bool) -> str | None:
        """SIGSTOP / SIGCONT: the process keeps its sockets and does nothing."""
        if self.proc is None or self.proc.returncode is not None:
            return f"{self.node_id} is down"
        os.kill(self.proc.pid, signal.SIGSTOP if on else signal.SIGCONT)
        return None

    def send(self, op: dict[str, Any]) -> bool:
        if self.proc is None or self.proc.returncode is not None or self.proc.stdin is None:
            return False
        self.proc.stdin.write((json.dumps(op) + "\n").encode())
        return True


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

    def forget(self) -> None:
        self.generation += 1

    def saw(self, event: ev.Event) -> None:
        node_id = self.node.node_id
        match event:
            case ev.AgentCalled():
                plan = self.behaviour.task_plan(event.task_id, node_id, event.agent_id)
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


def _registered(node_id: str) -> Callable[[str, ev.Event], bool]:
    return lambda node, event: node == node_id and isinstance(event, ev.ExecutorsRegistered)


class LiveDeployment:
    mode = Mode.LIVE
    jitter_ms = 50.0
    poll_ms = 50.0
    proxy_host = "127.0.0.1"     # where the fault proxies listen for their nodes

    @property
    def node_hosting(self) -> str:
        return self.options.hosting.value

    def __init__(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
                 options: Options, say: Callable[[str], None] = lambda line: None) -> None:
        self.scenario = scenario
        self.variant = variant
        self.seed = scenario.seed
        self.topology: Topology = scenario.topology
        self.workdir = workdir
        self.options = options
        self.say = say
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(self._loop_error)
        asyncio.set_event_loop(self.loop)
        self.clock = Clock(time.time())
        self.clock_origin_ms = self.clock.origin_ms
        self.log = RunLog(recorder, self.clock.now_ms)
        self.broker: Broker = make_broker(options.broker, workdir / "broker",
                                          restart_command=options.restart_command,
                                          ca_file=options.broker_ca)
        #: on an external broker, this run's names: in every client id and the topic prefix
        self.run_id = secrets.token_hex(3) if self.broker.kind == "external" \
            and options.isolate else None
        self.nodes: dict[str, LiveNode] = {}
        self.proxies: dict[str, FaultProxy] = {}
        self.links: dict[int, MqttLink] = {}          # fault index -> the nemesis's own client
        self._counters: dict[tuple[int, str], Any] = {}   # (fault, node) -> counter at arming
        self._crashed_at: dict[str, float] = {}
        #: node -> operation -> the client-side fault state last set there, re-applied after
        #: a restart (a skewed clock or a refusing client outlives the node's process)
        self._client_state: dict[str, dict[str, dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False
        #: the broker's health as the watch sees it; `_planned` while a fault stops it
        self._broker_up = asyncio.Event()
        self._broker_gone = asyncio.Event()
        self._planned = False
        self._replays_due = 0      # redeliveries the nemesis scheduled, still to come
        self._restart: asyncio.subprocess.Process | None = None
        self.takeovers = TakeoverWatch(self.record, self.call_later)
        self.log.observers.append(self.takeovers.observe)
        #: every client id a node connected with (an isolated run clears their sessions)
        self.client_ids: set[str] = set()
        self.log.observers.append(self._note_client)

    def _note_client(self, _node: str, event: ev.Event, _t_ms: float) -> None:
        if isinstance(event, ev.MqttConnected):
            self.client_ids.add(event.client_id)

    # -- the Deployment interface ----------------------------------------------------------------
    def start(self) -> list[str]:
        self._started = True
        self.loop.run_until_complete(self.loop.run_in_executor(
            None, lambda: self.broker.start(on_second=True)))
        self._broker_up.set()
        self.clock.t0 = time.time()   # the run's clock starts with the broker up
        self.loop.run_until_complete(self._watch_broker())
        self.log.nodes = {n.id for n in self.topology.nodes}
        self.record("bench", run_started(
            self.scenario, self.variant, self.mode, broker=self.broker.kind,
            broker_url=self.broker.url, node_hosting=self.node_hosting,
            run_id=self.run_id))
        specs = [LaunchSpec(config, self.variant.name, self.workdir / "data" / node_id,
                            self._node_broker(), self.clock.t0, self.seed,
                            self.scenario.workload.to_json(), login=self._login(),
                            tls=self.broker.tls,
                            agents_by="bench" if self.topology.node(node_id).external else "node")
                 for node_id, config in node_configs(self.scenario, self.run_id).items()]
        tapped = {n.id for n in self.topology.nodes if n.external or self.options.wire_tap}
        if self.options.link_faults or tapped:
            specs = self.loop.run_until_complete(self._start_proxies(specs, tapped))
        if (at := self.broker.in_phase(lead_s=self._startup_s(len(specs)))) is not None:
            # the workload starts as soon as the nodes are up: they start early by about
            # how long they take, so that the workload starts in phase with the broker's
            # sweep. (Waiting for the phase after they came up would put their own timers,
            # counted from their boot, out of the simulator's phase: flush windows.)
            self.loop.run_until_complete(asyncio.sleep(max(0.0, at - time.monotonic())))
        elif self.broker.sweeps:
            self.say(f"{self.broker.kind}'s start straddled a second: its keepalive sweep is "
                     "not in the simulator's phase in this run (a silent node may be given "
                     "up up to 6 s apart from a simulation's)")
        lines = self.loop.run_until_complete(self._start_nodes(specs))
        for line in lines:
            self.say(line)
        return lines

    def now_ms(self) -> float:
        return self.clock.now_ms()

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.loop.call_later(max(0.0, delay_ms / 1000), fn)

    def run_until(self, t_ms: float) -> None:
        delay = self.clock.at(t_ms) - time.time()
        self.loop.run_until_complete(asyncio.sleep(max(0.0, delay)))

    def issue(self, op: Op) -> None:
        if isinstance(op, RequestOp):
            self.log.issuing(op.message_id)
        if isinstance(op, TabOp):   # tabs outlive the node's process: a new one is told
            node = self.nodes[op.node_id]
            tabs = dict(node.spec.tabs)
            if op.attach:
                tabs[op.subscriber_id] = op.conversation_id
            else:
                tabs.pop(op.subscriber_id, None)
            node.spec = replace(node.spec, tabs=tuple(sorted(tabs.items())))
        if not self.nodes[op.node_id].send(op_to_json(op)):
            self.record(op.node_id, ev.OpNotIssued(op_kind(op), op.message_id, "node is down"))

    def config(self, node: str) -> NodeConfig:
        return self.nodes[node].spec.config

    def booted_at_ms(self, node: str) -> float:
        return self.log.booted_at.get(node, 0.0)

    def record(self, node: str, event: ev.Event) -> None:
        self.log.record(node, event)

    def settled(self) -> bool:
        """Quiet, and for a moment: the lines of one batch of a node process arrive one
        by one, and between two of them the history can look quiet when it is not. Never
        while a redelivery the nemesis scheduled is still to come (the simulator's broker
        makes those within the drain too)."""
        return not self._replays_due and self.log.quiet and \
            self.clock.now_ms() - self.log.last_recorded_ms >= QUIET_MS

    def close(self) -> dict[str, Any]:
        """Nodes, proxies, the nemesis's clients and the broker are stopped, whatever
        happened before; the loop is closed."""
        try:
            if self._started:
                self.takeovers.flush()
                self.record("bench", ev.RunStopping())
                self.loop.run_until_complete(self._stop_all())
        finally:
            self.loop.close()
            asyncio.set_event_loop(None)
        return {"broker": self.broker.kind, "outstanding_at_end": len(self.log.outstanding),
                "running_at_end": len(self.log.running),
                "undelivered_at_end": len(self.log.undelivered)}

    async def _stop_all(self) -> None:
        """Stop everything; what cannot be stopped is a harness error in the history, and
        the broker is stopped whatever else failed."""
        try:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self._planned = True    # the end of the run is not an outage
            stops: list[tuple[str, Callable[[], Any]]] = [
                *((f"nemesis client {i}", link.close) for i, link in self.links.items()),
                *((f"node {n}", node.stop) for n, node in self.nodes.items()),
                *((f"proxy of {n}", proxy.close) for n, proxy in self.proxies.items())]
            for what, stop in stops:
                try:
                    result = stop()
                    if asyncio.iscoroutine(result):
                        await result
                except Exception as exc:   # recorded; the others must still be stopped
                    self.record("bench", ev.HarnessError(f"could not stop {what}: {exc!r}"))
            if self.run_id is not None:
                await self._leave_nothing_behind()
        finally:
            await self.loop.run_in_executor(None, self.broker.stop)

    async def _leave_nothing_behind(self) -> None:
        """An isolated run on an external broker clears what it left there: the persistent
        session of every client id it connected with (a clean connection discards it) and
        the retained announcement of every node."""
        from bench.substrates.live.facts import RawClient
        b = self.broker
        ids = set(self.client_ids)
        ids |= {link.client_id for link in self.links.values()}
        retained = [n.spec.config.directory_topic for n in self.nodes.values()]

        async def clear(client_id: str, topics: list[str]) -> None:
            c = await RawClient.connect(b.host, b.port, client_id, clean=True,
                                        username=b.username, password=b.password, tls=b.tls)
            for topic in topics:
                await c.publish(topic, b"", retain=True)
            await c.disconnect()
        cleared = await asyncio.gather(*(clear(cid, retained if i == 0 else [])
                                         for i, cid in enumerate(sorted(ids))),
                                       return_exceptions=True)
        failed = [(cid, r) for cid, r in zip(sorted(ids), cleared, strict=True)
                  if isinstance(r, BaseException)]
        if failed:
            self.record("bench", ev.HarnessError(
                f"could not clear {len(failed)} of {len(ids)} sessions of run {self.run_id} "
                f"on the broker: {failed[0][0]}: {failed[0][1]!r}"))

    def _loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A callback that threw: in the history (a harness error), never only on stderr."""
        exc = context.get("exception")
        self.log.record("bench", ev.HarnessError(
            repr(exc) if exc else str(context.get("message", "?")),
            {"where": "".join(traceback.format_exception(exc))[-800:] if exc else ""}))

    # -- start-up --------------------------------------------------------------------------------
    async def _start_proxies(self, specs: list[LaunchSpec], tapped: set[str]) -> list[LaunchSpec]:
        """A fault proxy in front of every node that a link fault may act on, or whose
        wire is tapped (a node not written here, or every node with --wire-tap); each such
        node connects to its proxy."""
        out = []
        for spec in specs:
            node_id = spec.config.node_id
            if not self.options.link_faults and node_id not in tapped:
                out.append(spec)
                continue
            proxy = FaultProxy((self.broker.host, self.broker.port),
                               rng_for(self.seed, f"proxy/{node_id}"), self.broker.tls,
                               host=self.proxy_host,
                               tap=self._tap(node_id) if node_id in tapped else None)
            await proxy.start()
            self.proxies[node_id] = proxy
            self.record(node_id, ev.FaultProxy(f"{proxy.host}:{proxy.port}", self.broker.url))
            out.append(replace(spec, broker=(proxy.host, proxy.port), tls=None))
        return out

    def _tap(self, node_id: str) -> Callable[[bool, bytes], None]:
        def seen(to_broker: bool, packet: bytes) -> None:
            event = wire_tap.read(packet, to_broker)
            if event is not None:
                self.record(node_id, event)
        return seen

    def _node_broker(self) -> tuple[str, int]:
        """Where the nodes reach the broker (the docker substrate: inside its network)."""
        return self.broker.host, self.broker.port

    def _startup_s(self, nodes: int) -> float:
        """About how long `nodes` nodes take to come up here (measured on this machine:
        inproc 0.04 s for 4, 3.0 s for 100; processes 0.6 s for 4, started side by side)."""
        per = 0.03 * nodes
        return per if self.options.hosting is Hosting.INPROC else 0.5 + per

    def _make_node(self, spec: LaunchSpec) -> LiveNode:
        command = self.topology.node(spec.config.node_id).command
        if command:     # anyone's node: a process whatever --nodes says
            return ProcessNode(spec, self.log, command)
        return InprocNode(spec, self.log) if self.options.hosting is Hosting.INPROC \
            else ProcessNode(spec, self.log)

    async def _start_nodes(self, specs: list[LaunchSpec]) -> list[str]:
        """Start every node and wait for its self-check; returns the lines, or raises."""
        for spec in specs:
            self.nodes[spec.config.node_id] = self._make_node(spec)
        ready = {n: self._watch(_registered(n)) for n in self.nodes}
        seen: list[Line] = []    # the start-up's lines (the recorder keeps none)
        self.log.recorder.observers.append(seen.append)
        try:
            # side by side: a container or a process takes a moment to start, and a 60-node
            # deployment started one by one took 21 s in docker
            await asyncio.gather(*(node.start() for node in self.nodes.values()))
            # a start returns once the process or container is launched, not running: the
            # self-check waits as long again as the nodes are expected to take to come up,
            # twice (100 containers on a loaded machine came up over 37 s)
            _done, pending = await asyncio.wait(
                ready.values(), timeout=SELF_CHECK_TIMEOUT_S + 2 * self._startup_s(len(specs)))
        finally:
            self.log.recorder.observers.remove(seen.append)
        events = [e.to_json() for e in seen]
        lines: list[str] = []
        failed = []
        for n in self.nodes:
            node_lines = self_check_lines(events, n)
            lines += node_lines
            regs = [e for e in events if e["node"] == n and e["kind"] == "executors_registered"]
            if len(node_lines) < 4 or not regs or regs[-1]["registered"] != regs[-1]["expected"]:
                failed.append(n)
                self.record(n, ev.SelfCheckFailed(lines=node_lines, missing=4 - len(node_lines)))
        for fut in pending:
            fut.cancel()
        if failed:
            raise SelfCheckFailed(f"self-check failed on {failed}: "
                                  f"see self_check_failed in the history")
        return lines

    def _watch(self, pred: Callable[[str, ev.Event], bool]) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self.loop.create_future()
        cancel = self.log.watch(pred, lambda: None if fut.done() else fut.set_result(None))
        fut.add_done_callback(lambda _f: cancel())
        return fut

    # -- fault primitives ------------------------------------------------------------------------
    def act(self, step: Primitive, done: Callable[[Outcome], None]) -> None:
        """Carry the primitive out as a task; `done` gets its outcome (a primitive that
        throws may have happened or not: Broke, journaled as a fault error)."""
        async def run() -> None:
            try:
                outcome: Outcome = await self._act(step)
            except Exception as exc:
                outcome = Broke(f"{type(step).__name__} failed: {exc!r}"[:300],
                                traceback.format_exc(limit=4)[-600:])
            done(outcome)
        task = self.loop.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _act(self, step: Primitive) -> Outcome:
        match step:
            case Crash():
                if not self.nodes[step.node].up:
                    return Refused(f"{step.node} is already down")
                how = await self.nodes[step.node].crash()
                self._crashed_at[step.node] = self.clock.now_ms()
                return Done(crashed=Crashed(how))
            case Boot():
                return await self._boot(step)
            case WipeRoster():
                (self.nodes[step.node].spec.data_dir / ROSTER_DOCUMENT).unlink(missing_ok=True)
                return Done()
            case SkewClock():
                return self._send(step.node, {"op": "clock_skew", "skew_ms": step.skew_ms})
            case RotateKeys():
                node = self.nodes[step.node]
                config = node.spec.config
                # kept in the launch spec too: a restarted process comes back with these keys
                node.spec = replace(node.spec, config=replace(
                    config, auth=replace(config.auth, keys=step.keys)))
                return self._send(step.node, keys_to_json(step.keys))
            case SecondConnection():
                return self._send(step.node, {"op": "second_connection", "on": step.on,
                                              "overlapping": step.overlapping,
                                              "fault": [step.fault.index, step.fault.kind]})
            case UseClientId():
                return self._send(step.node, {"op": "client_id", "value": step.client_id,
                                              "fault": [step.fault.index, step.fault.kind]})
            case FailPublishes():
                return self._send(step.node, {"op": "publish_failure",
                                              "probability": step.probability, "seed": step.seed,
                                              "fault": [step.fault.index, step.fault.kind]})
            case StripReplyNode():
                return self._send(step.node, {"op": "strip_reply_node",
                                              "probability": step.probability, "seed": step.seed,
                                              "fault": [step.fault.index, step.fault.kind]})
            case BrokerStop():
                return await self._broker_stop(step)
            case BrokerStart():
                return await self._broker_start()
            case Redeliver():
                return await self._redeliver(step)
            case LinkDown():
                return self._link_down(step)
            case LinkUp():
                return self._link_up(step)
            case LinkLatency():
                return self._proxy_setting(step, step.nodes, "latency_ms", step.latency_ms,
                                           None, "delayed")
            case LinkLoss():
                return self._proxy_setting(step, step.nodes, "loss", step.probability, 0.0,
                                           "retransmitted")
            case WithholdPuback():
                return self._withhold(step)
            case DuplicatePublish():
                return self._duplicate(step)
            case Intercept():
                proxies = self._proxies((step.node,))
                if isinstance(proxies, Refused):
                    return proxies
                proxies[0].faults.rewrite = step.rewrite
                return Done()
            case Inject():
                link = await self._client(step.fault.index)
                link.publish(step.topic, step.payload, 1, step.retain)
                return Done()
            case Capture():
                return await self._capture(step)
            case Freeze():
                node = self.nodes[step.node]
                refused = await node.freeze(step.on)
                if refused:
                    return Refused(refused)
                return Done((Firing(f"frozen ({node.freezer})" if step.on else "thawed",
                                   step.node),))
            case _:
                assert_never(step)

    def _send(self, node: str, op: dict[str, Any]) -> Outcome:
        """A client-side fault's state: sent to the node now if it is up, and kept to be
        set again when it next boots (as the simulator's host keeps it)."""
        self._client_state.setdefault(node, {})[op["op"]] = op
        self.nodes[node].send(op)
        return Done()

    async def _boot(self, step: Boot) -> Outcome:
        node = self.nodes[step.node]
        if node.up:
            return Refused(f"{step.node} is already up")
        if step.config is not None:
            node.spec = replace(node.spec, config=step.config)
        crashed_at = self._crashed_at.pop(step.node, self.clock.now_ms())
        up = self._watch(_registered(step.node))
        await node.start()
        for op in self._client_state.get(step.node, {}).values():
            node.send(op)
        try:
            await asyncio.wait_for(up, REBOOT_TIMEOUT_S)
        except TimeoutError:
            self.record(step.node, ev.SelfCheckFailed(after="restart"))
            return Done()
        return Done((Firing("restarted", step.node,
                            {"downMs": self.clock.now_ms() - crashed_at}),))

    # -- the broker's health ------------------------------------------------------------------
    async def _watch_broker(self) -> None:
        """Watch the broker for the whole run and journal when it goes away and comes back:
        the process the bench started (polled), or, for an external broker, a client of the
        bench's own (its connection lost and not regained; keepalive 2 s). Checkers then
        name a broker outage instead of blaming the nodes."""
        if self.broker.kind == "external":
            def lost(reason: str) -> None:
                self._broker_went(f"the watch client lost its connection ({reason})")

            def back(_present: bool) -> None:
                self._broker_back()
            link = MqttLink(self.loop, self.broker.host, self.broker.port,
                            f"a2a-bench-watch-{secrets.token_hex(3)}",
                            on_message=lambda _d: None, on_connected=back,
                            on_disconnected=lost, on_published=lambda _m: None,
                            keepalive_s=2, clean_session=True, login=self._login(),
                            tls=self.broker.tls)
            self.links[-1] = link
            link.connect()
            return

        async def poll() -> None:
            while True:
                proc = self.broker.proc
                if proc is not None and proc.poll() is not None:
                    self._broker_went(f"its process exited with {proc.returncode}")
                await asyncio.sleep(0.05)
        task = self.loop.create_task(poll())
        self._tasks.add(task)

    def _broker_went(self, how: str) -> None:
        if self._broker_up.is_set():
            self._broker_up.clear()
            self._broker_gone.set()
            self.record("broker", ev.BrokerDown(how, self._planned))

    def _broker_back(self) -> None:
        if not self._broker_up.is_set():
            self._broker_gone.clear()
            self._broker_up.set()
            self.record("broker", ev.BrokerUp(self._planned))

    async def _broker_stop(self, step: BrokerStop) -> Outcome:
        broker = self.broker
        if not broker.controllable:
            return Refused("external broker without a restart command")
        self._planned = True
        if broker.kind == "external":
            return await self._external_restart()
        stop = broker.stop if step.graceful else broker.kill
        await self.loop.run_in_executor(None, stop)
        self._broker_went("stopped gracefully (SIGTERM)" if step.graceful else "killed (SIGKILL)")
        return Done((Firing(ev.FaultAction.BROKER_STOPPED if step.graceful
                              else ev.FaultAction.BROKER_KILLED,
                            details={"broker": broker.kind,
                                     "brokerPersistence": "none" if broker.kind == "amqtt"
                                     else "file"}),))

    async def _external_restart(self) -> Outcome:
        """The user's command restarts an external broker: run it, and say the broker
        stopped when the watch sees it go (not when the command returns); if it never
        goes, the fault did nothing and says so."""
        assert self.broker.restart_command is not None
        self._restart = proc = await asyncio.create_subprocess_shell(
            self.broker.restart_command, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        gone = self.loop.create_task(self._broker_gone.wait())
        ended = self.loop.create_task(proc.wait())
        await asyncio.wait({gone, ended}, timeout=RESTART_COMMAND_S,
                           return_when=asyncio.FIRST_COMPLETED)
        if not gone.done() and ended.done():   # the command ended first: a moment more
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(gone), 3.0)
        if not gone.done():
            gone.cancel()
            self._planned = False
            out = await self._command_output(proc)
            return Refused(f"the restart command {'exited with ' + str(proc.returncode) if ended.done() else 'ran ' + str(RESTART_COMMAND_S) + ' s'}"
                           f" and the broker never went away (its watch client stayed "
                           f"connected){out}")
        return Done((Firing(ev.FaultAction.BROKER_STOPPED, details={
            "broker": "external", "how": "the user's restart command",
            "brokerPersistence": "unknown"}),))

    async def _command_output(self, proc: asyncio.subprocess.Process) -> str:
        if proc.returncode is None or proc.stdout is None:
            return ""
        text = (await proc.stdout.read()).decode(errors="replace").strip()
        return f": {text[-300:]}" if text else ""

    async def _broker_start(self) -> Outcome:
        if self.broker.kind != "external":
            await self.loop.run_in_executor(None, self.broker.start)
            self._broker_back()
        else:
            try:   # the user's command brings it back by itself: wait for the watch to see it
                await asyncio.wait_for(self._broker_up.wait(), RESTART_COMMAND_S)
            except TimeoutError:
                self._planned = False
                return Broke(f"the broker did not come back within {RESTART_COMMAND_S} s of "
                             "its restart command", "broker_restart")
            finally:
                if self._restart is not None and self._restart.returncode is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._restart.wait(), 5.0)
        self._planned = False
        return Done((Firing(ev.FaultAction.BROKER_STARTED, details={"broker": self.broker.kind}),))

    async def _client(self, index: int,
                      on_message: Callable[[Delivery], None] | None = None) -> MqttLink:
        """The nemesis's own MQTT client for a fault (an attacker, a replayer)."""
        link = self.links.get(index)
        if link is not None:
            return link
        up: asyncio.Future[None] = self.loop.create_future()
        client_id = f"nemesis-{index}" + (f"-{self.run_id}" if self.run_id else "")
        link = MqttLink(self.loop, self.broker.host, self.broker.port, client_id,
                        on_message=on_message or (lambda _d: None),
                        on_connected=lambda _p: up.done() or up.set_result(None),
                        on_disconnected=lambda _r: None, on_published=lambda _m: None,
                        login=self._login(), tls=self.broker.tls)
        self.links[index] = link
        link.connect()
        await asyncio.wait_for(up, 10)
        return link

    def _login(self) -> tuple[str, str | None] | None:
        """An external broker's user and password, for every client the run opens."""
        b = self.broker
        return (b.username, b.password) if b.username is not None else None

    def _inbox_filter(self, node: str | None) -> str:
        topics = next(iter(self.nodes.values())).spec.config.topics
        return topics.inbox(node) if node else topics.inbox_filter()

    async def _redeliver(self, step: Redeliver) -> Outcome:
        """A capture client sees every targeted PUBLISH and, with the fault's probability,
        publishes the very same bytes again after the fault's delay (what a broker's
        delayed QoS1 redelivery looks like to the receiver)."""
        index = step.fault.index
        flt = self._inbox_filter(step.node)
        if step.probability <= 0 or step.delay_ms is None:
            link = self.links.get(index)
            if link is not None:
                link.client.unsubscribe(flt)   # replays already due still happen
            return Done()
        rng = rng_for(step.seed, f"fault/{index}")
        delay_ms, p = step.delay_ms, step.probability
        holder: list[MqttLink] = []

        def replay(topic: str, payload: bytes) -> None:
            self._replays_due -= 1
            if holder and not holder[0].closed:
                holder[0].publish(topic, payload, 1, False)
                self.record("nemesis", ev.FaultFired(step.fault.kind, index, "replayed",
                                                     {"topic": topic, "bytes": len(payload)}))

        def on_message(d: Delivery) -> None:
            holder[0].ack(d.mid, d.qos)
            if rng.random() < p:
                self._replays_due += 1     # the run is not settled before they happen
                self.loop.call_later(delay_ms.sample(rng) / 1000, replay, d.topic, d.payload)

        link = await self._client(index, on_message)
        holder.append(link)
        link.subscribe((flt,), 1)
        return Done()

    async def _capture(self, step: Capture) -> Outcome:
        flt = self._inbox_filter(None)
        tap = step.tap
        if tap is None:
            link = self.links.get(step.fault.index)
            if link is not None:
                link.client.unsubscribe(flt)
            return Done()
        holder: list[MqttLink] = []

        def on_message(d: Delivery) -> None:
            holder[0].ack(d.mid, d.qos)
            tap(d.topic, d.payload)
        link = await self._client(step.fault.index, on_message)
        holder.append(link)
        link.subscribe((flt,), 1)
        return Done()

    # -- link faults, through the fault proxy in front of each node ------------------------------
    def _proxies(self, nodes: tuple[str, ...]) -> list[FaultProxy] | Refused:
        proxies = [self.proxies.get(n) for n in nodes]
        found = [p for p in proxies if p is not None]
        if len(found) != len(proxies):
            return Refused("the node is not behind the fault proxy")
        return found

    def _link_down(self, step: LinkDown) -> Outcome:
        proxies = self._proxies(step.nodes)
        if isinstance(proxies, Refused):
            return proxies
        for node, p in zip(step.nodes, proxies, strict=True):
            self._counters[(step.fault.index, node)] = (p.counters.blackholed, p.counters.unanswered)
            p.faults.partitioned = True
            p.faults.unplugged = step.unplug
        return Done()

    def _link_up(self, step: LinkUp) -> Outcome:
        proxies = self._proxies(step.nodes)
        if isinstance(proxies, Refused):
            return proxies
        firings = []
        for node, p in zip(step.nodes, proxies, strict=True):
            bh, rf = self._counters.pop((step.fault.index, node), (0, 0))
            p.faults.partitioned = False
            p.faults.unplugged = False
            cut = p.drop_all()   # connections that lost bytes cannot be trusted again
            lost, unanswered = p.counters.blackholed - bh, p.counters.unanswered - rf
            if lost or unanswered or cut:
                firings.append(Firing("partitioned", node, {
                    "packetsBlackholed": lost, "connectionsUnanswered": unanswered,
                    "connectionsCut": cut}))
        return Done(tuple(firings))

    def _proxy_setting(self, step: Primitive, nodes: tuple[str, ...], field: str, value: Any,
                       off: Any, counter: str) -> Outcome:
        proxies = self._proxies(nodes)
        if isinstance(proxies, Refused):
            return proxies
        firings = []
        for node, p in zip(nodes, proxies, strict=True):
            key = (step.fault.index, node)
            if value != off:
                self._counters[key] = getattr(p.counters, counter)
                setattr(p.faults, field, value)
                continue
            setattr(p.faults, field, off)
            n = getattr(p.counters, counter) - self._counters.pop(key, getattr(p.counters, counter))
            if n:
                firings.append(Firing(f"{counter} under the fault", node, {"count": n}))
        return Done(tuple(firings))

    def _withhold(self, step: WithholdPuback) -> Outcome:
        """QoS1 redelivery by the broker itself: the node's PUBACKs are dropped, then its
        link is cut; on the persistent session the broker must resend what was never acked."""
        proxies = self._proxies((step.node,))
        if isinstance(proxies, Refused):
            return proxies
        proxy, key = proxies[0], (step.fault.index, step.node)
        if step.on:
            self._counters[key] = proxy.counters.pubacks_withheld
            proxy.faults.withhold_puback = True
            return Done()
        proxy.faults.withhold_puback = False
        withheld = proxy.counters.pubacks_withheld - self._counters.pop(key, 0)
        cut = proxy.drop_all()
        if not withheld:
            return Done()
        return Done((Firing("PUBACKs withheld, link cut", step.node,
                            {"withheld": withheld, "connectionsCut": cut}),))

    def _duplicate(self, step: DuplicatePublish) -> Outcome:
        """The proxy writes a PUBLISH to the node twice (same packet id, as a broker or a
        bridge retransmitting would)."""
        proxies = self._proxies((step.node,))
        if isinstance(proxies, Refused):
            return proxies
        proxy, key = proxies[0], (step.fault.index, step.node)
        if step.probability > 0:
            self._counters[key] = proxy.counters.publishes_duplicated
            proxy.faults.duplicate_publish = step.probability
            return Done()
        proxy.faults.duplicate_publish = 0.0
        n = proxy.counters.publishes_duplicated - self._counters.pop(key, 0)
        return Done((Firing("PUBLISH delivered twice", step.node, {"count": n}),) if n else ())
