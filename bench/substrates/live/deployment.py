"""The live deployment: a real broker (amqtt or Mosquitto as a child process, or an external
one), real nodes (on this deployment's event loop, or one OS process each, or — placed by
the docker substrate — containers), optionally an MQTT-aware fault proxy in front of every
node, in wall-clock time. Every event lands in one history, stamped with milliseconds
since the run started.

It owns its asyncio loop: the run loop lets time pass with `run_until`, and everything due
meanwhile — node callbacks, paho's messages, fault steps — runs on it. Its parts, each in a
module of its own: where things run (`placement`), the nodes (`nodes`), the agents the
bench plays for a node (`agents`), the broker's watch (`watch`), the fault primitives
(`actions`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from bench.core import events as ev
from bench.core.config import NodeConfig
from bench.faults.primitives import Broke, Outcome, Primitive
from bench.history import Line, Recorder
from bench.protocols import protocol
from bench.spec.distribution import rng_for
from bench.spec.scenario import Scenario
from bench.spec.topology import Topology
from bench.substrates import BrokerRefused, Options, SelfCheckFailed, node_configs, run_started
from bench.substrates.live import tap as wire_tap
from bench.substrates.live.actions import LiveFaults
from bench.substrates.live.brokers import Broker, BrokerError
from bench.substrates.live.certs import run_ca
from bench.substrates.live.control import LaunchSpec
from bench.substrates.live.host import Clock
from bench.substrates.live.mqtt import Tls
from bench.substrates.live.nodes import LiveNode, ProcessNode, registered, stderr_sink
from bench.substrates.live.placement import LocalPlacement, Placement
from bench.substrates.live.proxy import FaultProxy
from bench.substrates.live.takeovers import TakeoverWatch
from bench.substrates.live.watch import BrokerWatch
from bench.substrates.log import RunLog
from bench.variants import Variant
from bench.workload import Op, RequestOp, TabOp, op_kind, op_to_json

T = TypeVar("T")

#: How long a deployment waits for every node's self-check, beyond its expected start-up.
#: It ends as soon as the last node registers, so only a node that never comes up costs
#: it: 20 s was once too little for a container on a 2-core machine running the suite's
#: eight workers beside docker (seen: memory_dedup_60s in docker, exec-3).
SELF_CHECK_TIMEOUT_S = 45.0
#: How long the history must have been quiet before a drain stops.
QUIET_MS = 300
#: How long a drain waits on targeted messages not received while every target is
#: connected and nothing happens (`RunLog.only_lost_left`): a keepalive of the bench's
#: clients. Before, such a run waited its whole drain — 17 s of nothing in each of 16 of
#: the suite's live runs (2026-12-05).
LOST_AFTER_MS = 5_000


def _ended(node_id: str) -> Callable[[str, ev.Event], bool]:
    """Matches the record of `node_id`'s process ending (or crashing)."""
    return lambda node, e: node == node_id and isinstance(e, ev.NodeCrashed)


#: how many times a starting node's CONNECT is refused (CONNACK >= 0x80), or its connection
#: closed by the broker, before the self-check stops waiting for it: the broker said no
#: (a will on a topic it keeps, a login, a SUBSCRIBE it answers by closing), and a node that
#: reconnects with backoff would be refused until the self-check's time is up (45 s)
REFUSALS_TO_GIVE_UP = 2
DROPS_TO_GIVE_UP = 3


def _refused(node_id: str) -> Callable[[str, ev.Event], bool]:
    """Matches `node_id`'s REFUSALS_TO_GIVE_UP-th refused CONNECT, or DROPS_TO_GIVE_UP-th
    lost connection, while it starts."""
    refused = dropped = 0

    def seen(node: str, e: ev.Event) -> bool:
        nonlocal refused, dropped
        if node != node_id or not isinstance(e, ev.MqttDisconnected):
            return False
        dropped += 1
        refused += e.reason.startswith("CONNACK")
        return refused >= REFUSALS_TO_GIVE_UP or dropped >= DROPS_TO_GIVE_UP
    return seen


#: how many stops queued by interrupted runs of the loop `complete` steps over
STALE_STOPS = 3


def complete(loop: asyncio.AbstractEventLoop, work: Awaitable[T]) -> T:
    """`loop.run_until_complete(work)`, to the end of `work`. A Ctrl-C raised by a callback
    in the middle of a turn of the loop (a node's commit, say) leaves queued the stop the
    interrupted `run_until_complete` had coming when its own future was done earlier in that
    turn (asyncio takes the callback off the future, not off the loop's queue): that stop
    ends the next call before its future is done ("Event loop stopped before Future
    completed", and the run's close left half done). Such a stop is stepped over."""
    future = asyncio.ensure_future(work, loop=loop)
    for _ in range(STALE_STOPS):
        try:
            return loop.run_until_complete(future)
        except RuntimeError:
            if future.done():
                raise
    return loop.run_until_complete(future)


class LiveDeployment:
    """One deployment for every live placement: this machine's processes (`LocalPlacement`),
    containers (the docker substrate's), whatever comes later. The placement says where the
    broker and each node run and does what only it can (a cable pulled); everything else —
    the loop, the self-check, the proxies and the wire tap, the nemesis's hands
    (`LiveFaults`), the broker's watch, the history — is this one class's."""

    jitter_ms = 50.0
    poll_ms = 50.0

    def __init__(self, scenario: Scenario, variant: Variant, recorder: Recorder, workdir: Path,
                 options: Options, say: Callable[[str], None] = lambda line: None,
                 placement: Placement | None = None) -> None:
        self.placement = placement or LocalPlacement(options)
        self.mode = self.placement.mode
        self.scenario = scenario
        self.mqtt_version = scenario.mqtt.value
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
        self.broker: Broker = self.placement.broker(options, workdir)
        #: on an external broker, this run's names: in every client id and the topic prefix
        self.run_id = secrets.token_hex(3) if self.broker.kind == "external" \
            and options.isolate else None
        self.nodes: dict[str, LiveNode] = {}
        self.proxies: dict[str, FaultProxy] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False
        self.watch = BrokerWatch(self.loop, self.broker, self.record, self.login(),
                                 self.scenario.mqtt)
        self.faults = LiveFaults(self)
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
        from bench.substrates.live import sim_only_refusal, version_refusal
        self._started = True
        refused = version_refusal(self.scenario, self.broker.kind) \
            or sim_only_refusal(self.scenario)
        if refused is not None:
            raise BrokerError(refused)    # (the CLI says so before anything is built)
        self.loop.run_until_complete(self.loop.run_in_executor(
            None, lambda: self.broker.start(on_second=True, version=self.scenario.mqtt)))
        self.clock.t0 = time.time()   # the run's clock starts with the broker up
        self.watch.start()
        self.log.nodes = {n.id for n in self.topology.nodes}
        self.record("bench", run_started(
            self.scenario, self.variant, self.mode, broker=self.broker.kind,
            broker_url=self.broker.url, node_hosting=self.placement.hosting,
            run_id=self.run_id))
        specs = [LaunchSpec(config, self.variant.name, self.workdir / "data" / node_id,
                            self.placement.node_broker(self.broker), self.clock.t0, self.seed,
                            self.scenario.workload.to_json(), login=self.login(),
                            tls=self.broker.tls,
                            agents_by="bench" if self.topology.node(node_id).external else "node",
                            mqtt=self.scenario.mqtt, session_expiry_s=self.scenario.session_expiry_s)
                 for node_id, config in node_configs(self.scenario, self.run_id).items()]
        # where the run offers TLS, every node reaches the broker by a proxy that ends it,
        # and its tap says which of its connections came by TLS
        tapped = {n.id for n in self.topology.nodes
                  if n.external or self.options.wire_tap or self.topology.node_tls}
        if (self.options.link_faults and self.placement.links is None) or tapped:
            specs = self._until_done(self._start_proxies(specs, tapped))
        if (at := self.broker.in_phase(lead_s=self.placement.startup_s(len(specs)))) is not None:
            # the workload starts as soon as the nodes are up: they start early by about
            # how long they take, so that the workload starts in phase with the broker's
            # sweep. (Waiting for the phase after they came up would put their own timers,
            # counted from their boot, out of the simulator's phase: flush windows.)
            self.loop.run_until_complete(asyncio.sleep(max(0.0, at - time.monotonic())))
        elif self.broker.sweeps:
            self.say(f"{self.broker.kind}'s start straddled a second: its keepalive sweep is "
                     "not in the simulator's phase in this run (a silent node may be given "
                     "up up to 6 s apart from a simulation's)")
        lines = self._until_done(self._start_nodes(specs))
        for line in lines:
            self.say(line)
        return lines

    def _until_done(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the loop; if a Ctrl-C stops it half-way, it is cancelled and run
        to its end before the interruption goes on: a process half-spawned is killed by
        its own clean-up, not left to a closed loop (that printed tracebacks, and the
        node, never sent its launch spec, died of reading nothing)."""
        task = self.loop.create_task(work)
        try:
            return complete(self.loop, task)
        except BaseException:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    complete(self.loop, task)
            raise

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
        makes those within the drain too). Messages that can no longer come (`LOST_AFTER_MS`)
        keep it going no longer."""
        if self.faults.replays_due:
            return False
        now = self.clock.now_ms()
        if self.log.quiet:
            return now - self.log.last_recorded_ms >= QUIET_MS
        return self.log.only_lost_left(now - LOST_AFTER_MS)

    def close(self) -> dict[str, Any]:
        """Nodes, proxies, the nemesis's clients and the broker are stopped, whatever
        happened before; the loop is closed."""
        completely = False
        try:
            if self._started:
                self.placement.closing(self)
                self.takeovers.flush()
                self.record("bench", ev.RunStopping())
                complete(self.loop, self._stop_all())
            completely = True
        finally:
            self.loop.close()
            asyncio.set_event_loop(None)
            self.placement.closed(self, completely)
        return {"broker": self.broker.kind, "outstanding_at_end": len(self.log.outstanding),
                "running_at_end": len(self.log.running),
                "undelivered_at_end": len(self.log.undelivered)}

    async def _stop_all(self) -> None:
        """Stop everything; what cannot be stopped is a harness error in the history, and
        the broker is stopped whatever else failed."""
        interrupted: KeyboardInterrupt | None = None
        try:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            stops: list[tuple[str, Callable[[], Any]]] = [
                ("the broker's watch", self.watch.stop),
                *((f"nemesis client {i}", link.close) for i, link in self.faults.links.items()),
                *((f"node {n}", node.stop) for n, node in self.nodes.items()),
                *((f"proxy of {n}", proxy.close) for n, proxy in self.proxies.items())]
            for what, stop in stops:
                try:
                    result = stop()
                    if asyncio.iscoroutine(result):
                        await result
                except KeyboardInterrupt as exc:   # raised again, once everything is stopped
                    interrupted = interrupted or exc
                except Exception as exc:   # recorded; the others must still be stopped
                    self.record("bench", ev.HarnessError(f"could not stop {what}: {exc!r}"))
            if self.run_id is not None:
                await self._leave_nothing_behind()
        finally:
            await self.loop.run_in_executor(None, self.broker.stop)
        if interrupted is not None:
            raise interrupted

    async def _leave_nothing_behind(self) -> None:
        """An isolated run on an external broker clears what it left there: the persistent
        session of every client id it connected with (a clean connection discards it) and
        the retained announcement of every node."""
        from bench.substrates.live.facts import RawClient
        b = self.broker
        ids = set(self.client_ids)
        ids |= {link.client_id for link in self.faults.links.values()}
        if self.watch.link is not None:
            ids.add(self.watch.link.client_id)
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
        await self.placement.proxies_starting()
        ca = run_ca((self.placement.proxy_host, "127.0.0.1")) if self.topology.node_tls \
            else None
        out = []
        for spec in specs:
            node_id = spec.config.node_id
            if not (self.options.link_faults and self.placement.links is None) \
                    and node_id not in tapped:
                out.append(spec)
                continue
            proxy = FaultProxy((self.broker.host, self.broker.port),
                               rng_for(self.seed, f"proxy/{node_id}"), self.broker.tls,
                               host=self.placement.proxy_host,
                               tap=self._tap(node_id) if node_id in tapped else None,
                               server_tls=ca.server if ca else None)
            await proxy.start()
            self.proxies[node_id] = proxy
            self.record(node_id, ev.FaultProxy(f"{proxy.host}:{proxy.port}", self.broker.url,
                                               tls_port=proxy.tls_port if ca else None))
            out.append(replace(spec, broker=(proxy.host, proxy.port),
                               tls=Tls(ca_pem=ca.ca_pem, port=proxy.tls_port) if ca else None))
        return out

    def _tap(self, node_id: str) -> Callable[[bool, bytes, bool, bool], None]:
        wire = protocol(self.topology.protocol).module("wire")
        body = None if wire is None else wire.read

        def seen(to_broker: bool, packet: bytes, v5: bool, tls: bool) -> None:
            event = wire_tap.read(packet, to_broker, v5, tls, body)
            if event is not None:
                self.record(node_id, event)
        return seen

    async def _start_nodes(self, specs: list[LaunchSpec]) -> list[str]:
        """Start every node and wait for its self-check; returns the lines, or raises."""
        for spec in specs:
            node = self.nodes[spec.config.node_id] = self.placement.node(
                spec, self.log, self.topology.node(spec.config.node_id))
            if isinstance(node, ProcessNode):
                node.stderr_out = stderr_sink(self.workdir / "logs" / f"{node.node_id}.log",
                                              self.options.echo_node_stderr)
        ready = {n: self.watch_for(registered(n)) for n in self.nodes}
        # a node whose process ended while starting will not come up: no need to wait on
        ended = {n: self.watch_for(_ended(n)) for n in self.nodes}
        # nor on one the broker keeps refusing
        ended |= {f"{n} refused": self.watch_for(_refused(n)) for n in self.nodes}
        seen: list[Line] = []    # the start-up's lines (the recorder keeps none)
        self.log.recorder.observers.append(seen.append)
        try:
            # side by side: a container or a process takes a moment to start, and a 60-node
            # deployment started one by one took 21 s in docker
            one_by_one = self.broker.races_subscribes
            await asyncio.gather(*(node.prepare() if one_by_one else node.start()
                                   for node in self.nodes.values()))
            # a start returns once the process or container is launched, not running: the
            # self-check waits as long again as the nodes are expected to take to come up,
            # twice (100 containers on a loaded machine came up over 37 s)
            # and longer on a machine busier than its cores (load per core, read now)
            allowed = (SELF_CHECK_TIMEOUT_S + 2 * self.placement.startup_s(len(specs))) \
                * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
            deadline = self.loop.time() + allowed
            if one_by_one:
                await self._one_by_one(ready, ended, deadline)
            pending = {f for f in ready.values() if not f.done()}
            while pending and not any(f.done() for f in ended.values()) \
                    and (left := deadline - self.loop.time()) > 0:
                _done, pending = await asyncio.wait(
                    pending | set(ended.values()), timeout=left,
                    return_when=asyncio.FIRST_COMPLETED)
                pending -= set(ended.values())
            waited = allowed - max(0.0, deadline - self.loop.time())
        finally:
            self.log.recorder.observers.remove(seen.append)
        events = [e.to_json() for e in seen]
        # what this protocol's nodes print
        check = protocol(self.scenario.protocol).module("startup")
        lines: list[str] = []
        failed = []
        for n in self.nodes:
            node_lines = check.startup_lines(events, n)
            lines += node_lines
            regs = [e for e in events if e["node"] == n and e["kind"] == "executors_registered"]
            if len(node_lines) < check.LINES or not regs \
                    or regs[-1]["registered"] != regs[-1]["expected"]:
                failed.append(n)
                self.record(n, ev.SelfCheckFailed(lines=node_lines,
                                                  missing=check.LINES - len(node_lines)))
        # before the cancel below, which makes every future done: a self-check that had
        # waited its time out said of its slow node "its process ended" (a docker run
        # under load, 2026-12-05), sending the reader after a crash that never was
        gone = {n for n, fut in ended.items() if fut.done()}
        for fut in [*pending, *ended.values()]:
            fut.cancel()
        if failed:
            refusing = {n: why for n in failed if (why := self._refusal(events, n))}
            if refusing:   # the broker said no: a setup error, not a slow node
                raise BrokerRefused(
                    "; ".join(f"{n}: {why}" for n, why in refusing.items())
                    + f" (`a2a-bench brokers --broker {self._named()}` shows what it "
                    "refuses; see self_check_failed in the history)")
            # one line: who, the last start-up line each printed, how long the bench waited,
            # and where the node's own words are (its stderr, in the run folder)
            said = []
            for n in failed:
                last = check.startup_lines(events, n)
                log = self.workdir / "logs" / f"{n}.log"
                said.append(f"{n} (last start-up line: {last[-1].strip()!r}" if last
                            else f"{n} (no start-up line")
                if n in gone:
                    said[-1] += "; its process ended"
                said[-1] += f"; its stderr: {log})" if log.exists() else ")"
            raise SelfCheckFailed(f"node{'s' if len(failed) > 1 else ''} not up after "
                                  f"{waited:.1f} s: {', '.join(said)}; see "
                                  "self_check_failed in the history")
        return lines

    async def _one_by_one(self, ready: dict[str, asyncio.Future[None]],
                          ended: dict[str, asyncio.Future[None]], deadline: float) -> None:
        """Start the nodes (loaded already) one after another, each once the one before is
        up: on a broker whose row says a SUBSCRIBE racing another client's connect may go
        unanswered (amqtt 0.12.1, docs/findings/brokers-amqtt-mosquitto.md), nodes started
        side by side came up connected and deaf — one in about twenty docker runs on a
        loaded machine. A node that ended, or the self-check's time out, ends the wait: the
        rest start at once and the self-check says who did not come up."""
        waiting = True
        for n, node in self.nodes.items():
            await node.start()
            if waiting and (left := deadline - self.loop.time()) > 0:
                await asyncio.wait({ready[n], ended[n]}, timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
            waiting = ready[n].done()

    @staticmethod
    def _refusal(events: list[dict[str, Any]], node: str) -> str | None:
        """How the broker refused `node` while it started, in a few words, or None: its
        CONNECT answered with a refusal, or its connection closed again and again."""
        drops = [str(e.get("reason", "")) for e in events
                 if e["node"] == node and e["kind"] == "mqtt_disconnected"]
        refusals = [r for r in drops if r.startswith("CONNACK")]
        if refusals:
            return (f"the broker refused its CONNECT {len(refusals)} time(s): "
                    f"{refusals[-1]}")
        if len(drops) >= DROPS_TO_GIVE_UP:
            return (f"the broker closed its connection {len(drops)} times before it was up "
                    f"(last: {drops[-1]}), as a broker closes one whose SUBSCRIBE or PUBLISH "
                    "it will not serve")
        return None

    def _named(self) -> str:
        """How `--broker` names this run's broker."""
        return self.broker.url if self.broker.kind == "external" else self.broker.kind

    def watch_for(self, pred: Callable[[str, ev.Event], bool]) -> asyncio.Future[None]:
        """A future that is done when the run records an event `pred` matches."""
        fut: asyncio.Future[None] = self.loop.create_future()
        cancel = self.log.watch(pred, lambda: None if fut.done() else fut.set_result(None))
        fut.add_done_callback(lambda _f: cancel())
        return fut

    def login(self) -> tuple[str, str | None] | None:
        """An external broker's user and password, for every client the run opens."""
        b = self.broker
        return (b.username, b.password) if b.username is not None else None

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` on the deployment's loop; the end of the run cancels what is left."""
        task = self.loop.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- fault primitives ------------------------------------------------------------------------
    def act(self, step: Primitive, done: Callable[[Outcome], None]) -> None:
        """Carry the primitive out as a task; `done` gets its outcome (a primitive that
        throws may have happened or not: Broke, journaled as a fault error)."""
        async def run() -> None:
            try:
                outcome: Outcome = await self.faults.carry_out(step)
            except Exception as exc:
                outcome = Broke(f"{type(step).__name__} failed: {exc!r}"[:300],
                                traceback.format_exc(limit=4)[-600:])
            done(outcome)
        self.spawn(run())
