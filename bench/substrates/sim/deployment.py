"""The simulated deployment: a simpy environment, the broker model, one host per node of
the topology, and the history they all write to. Virtual time is in milliseconds; every
random draw comes from streams of the run's one seed (`bench.spec.distribution.rng_for`).

It carries out every fault primitive on the model (`act`): a crash loses what the memory
store had not committed, a partition silences the link (each side finds out at its own
keepalive, and the heal resets every connection, as the live fault proxy does), the
broker model redelivers, an attacker is one more client of the broker. The broker model
is the topology's row of `bench.spec.brokers.BEHAVIOURS`.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from typing import Any, assert_never

from bench.core import events as ev
from bench.core.config import NodeConfig
from bench.core.envelope import Json
from bench.core.inputs import ROSTER_DOCUMENT
from bench.faults.primitives import (
    BLOCKS,
    BOTH_WAYS,
    Boot,
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
    RefusePublishes,
    RotateKeys,
    SecondConnection,
    SkewClock,
    StripReplyNode,
    Tampering,
    TamperProperties,
    UseClientId,
    WipeRoster,
    WithholdPuback,
)
from bench.history import Recorder
from bench.spec.brokers import BEHAVIOURS
from bench.spec.distribution import rng_for
from bench.spec.scenario import Mode, Scenario
from bench.substrates import node_configs, run_started
from bench.substrates.log import RunLog
from bench.substrates.sim.broker import Message, Redelivery, SimBroker
from bench.substrates.sim.host import SimHost
from bench.substrates.sim.link import Link
from bench.substrates.sim.timers import SimEnvironment
from bench.variants import Variant
from bench.workload import Behaviour, Op, op_input, op_kind

#: Simulated node clocks start somewhere in 2024-2029, drawn from the seed: a node that took
#: a deadline for a duration (or the reverse) shows it, as it would on a real clock.
SIM_EPOCH_MS = 1_704_067_200_000            # 2024-01-01T00:00:00Z
SIM_EPOCH_SPREAD_MS = 5 * 365 * 86_400_000


def clock_origin(seed: int) -> int:
    return SIM_EPOCH_MS + rng_for(seed, "clock").randrange(SIM_EPOCH_SPREAD_MS)


def _still_down(link: Link) -> Callable[[], bool]:
    """Whether this partition of `link` still holds (not healed, not another one)."""
    downs = link.downs
    return lambda: not link.up and link.downs == downs


class SimDeployment:
    mode = Mode.SIM
    jitter_ms = 1.0
    poll_ms = 1000.0

    def __init__(self, scenario: Scenario, variant: Variant, recorder: Recorder) -> None:
        self.scenario = scenario
        self.mqtt_version = scenario.mqtt.value
        self.variant = variant
        self.seed = scenario.seed
        self.topology = scenario.topology
        self.clock_origin_ms = clock_origin(scenario.seed)
        self.env = SimEnvironment()
        self.log = RunLog(recorder, lambda: round(self.env.now, 3))
        self.behaviour = Behaviour(scenario.workload, scenario.seed)
        self.broker = SimBroker(self.env,
                                behaviour=BEHAVIOURS[self.topology.broker.value],
                                record=lambda event: self.record("broker", event))
        self.hosts: dict[str, SimHost] = {}
        self._collecting = False      # whether to turn the garbage collector back on
        self._counters: dict[tuple[int, str], int] = {}   # (fault, node) -> counter at arming
        self._taps: dict[int, Callable[[Message], None]] = {}   # fault -> its capture
        specs = {n.id: n for n in self.topology.nodes}
        for node_id, config in node_configs(scenario).items():
            self._add(config, self.topology.link_of(specs[node_id]))
        self.log.nodes = set(self.hosts)

    def _add(self, config: NodeConfig, link: Any) -> SimHost:
        if config.node_id in self.hosts:
            raise ValueError(f"node {config.node_id} added twice")
        host = SimHost(self, config, self.variant.core_for(config),
                       Link(link, rng_for(self.seed, f"link/{config.node_id}")))
        self.hosts[config.node_id] = host
        return host

    # -- the Deployment interface ----------------------------------------------------------------
    def start(self) -> list[str]:
        # No cyclic garbage collection while the simulation runs (back on at `close`): a
        # 1,000-node run holds millions of live objects (every node's directory, the packets
        # in flight) and makes next to no reference cycles — the collector found none in a
        # 1,000-node run, and walking them cost a tenth of it (a third, with its default
        # thresholds). What a run leaves in cycles (the deployment itself) goes once it ends.
        self._collecting = gc.isenabled()
        gc.disable()
        self.record("bench", run_started(self.scenario, self.variant, self.mode))
        for host in self.hosts.values():
            host.boot()
        return []

    def now_ms(self) -> float:
        return self.env.now

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.env.later(delay_ms, fn)

    def run_until(self, t_ms: float) -> None:
        if t_ms > self.env.now:
            self.env.run(until=t_ms)

    def issue(self, op: Op) -> None:
        host = self.hosts[op.node_id]
        if host.node is None:
            self.record(op.node_id, ev.OpNotIssued(op_kind(op), op.message_id, "node is down"))
            return
        host.feed(op_input(op, host.now_ms()))

    def config(self, node: str) -> NodeConfig:
        return self.hosts[node].config

    def booted_at_ms(self, node: str) -> float:
        return self.hosts[node].booted_at_ms

    def record(self, node: str, event: ev.Event) -> None:
        self.log.record(node, event)

    def settled(self) -> bool:
        """Never early: virtual time is cheap, and a fixed end keeps runs comparable."""
        return False

    def close(self) -> dict[str, Any]:
        if self._collecting:
            gc.enable()
        return dict(self.broker.stats)

    # -- fault primitives ------------------------------------------------------------------------
    def act(self, step: Primitive, done: Callable[[Outcome], None]) -> None:
        if isinstance(step, BrokerStart):   # a broker takes a moment to listen again
            self.call_later(self.broker.behaviour.start_ms, lambda: done(self._act(step)))
            return
        done(self._act(step))

    def _act(self, step: Primitive) -> Outcome:
        match step:
            case Crash():
                if self.hosts[step.node].node is None:
                    return Refused(f"{step.node} is already down")
                if step.graceful:
                    self.hosts[step.node].stop()
                    return Done(crashed=Crashed("stopped gracefully (simulated SIGTERM)", 0))
                lost = self.hosts[step.node].crash()
                return Done(crashed=Crashed("process state discarded (simulated)", lost))
            case Boot():
                host = self.hosts[step.node]
                if host.node is not None:
                    return Refused(f"{step.node} is already up")
                if step.config is not None:
                    host.config = step.config
                down = self.env.now - (host.crashed_at_ms or self.env.now)
                host.boot()
                return Done((Firing("restarted", step.node, {"downMs": round(down, 3)}),))
            case WipeRoster():
                txn = self.hosts[step.node].store.begin()
                txn.put_document(ROSTER_DOCUMENT, None)
                txn.commit()
                return Done()
            case SkewClock():
                self.hosts[step.node].skew_ms = step.skew_ms
                return Done()
            case RotateKeys():
                self.hosts[step.node].rotate_keys(step.keys)
                return Done()
            case SecondConnection():
                self.hosts[step.node].second_connection(step.fault, step.on, step.overlapping)
                return Done()
            case UseClientId():
                self.hosts[step.node].use_client_id(step.fault, step.client_id)
                return Done()
            case StripReplyNode():
                self.hosts[step.node].strip_reply_node(step.fault, step.probability, step.seed)
                return Done()
            case FailPublishes():
                self.hosts[step.node].refuse_publishes(step.fault, step.probability, step.seed)
                return Done()
            case BrokerStop():
                self.broker.crash(step.persistence, step.graceful)
                kept = step.persistence and self.broker.behaviour.persistent
                return Done((Firing(ev.FaultAction.BROKER_STOPPED if step.graceful
                                    else ev.FaultAction.BROKER_CRASHED,
                                    details={"persistence": step.persistence,
                                             "graceful": step.graceful,
                                             "brokerPersistence": "memory" if kept else "none"}),))
            case BrokerStart():
                self.broker.start()
                return Done((Firing(ev.FaultAction.BROKER_STARTED),))
            case Redeliver():
                return self._redeliver(step)
            case LinkDown():
                return self._link_down(step)
            case LinkUp():
                return self._link_up(step)
            case LinkLatency():
                latency = step.latency_ms
                return self._link_change(step, step.nodes, "packets", lambda h: replace(
                    h.link.spec, latency_ms=latency or h.link.base.latency_ms), latency is None)
            case LinkLoss():
                loss = step.probability
                return self._link_change(step, step.nodes, "retransmissions", lambda h: replace(
                    h.link.spec, loss=loss or h.link.base.loss), loss == 0)
            case WithholdPuback():
                return self._withhold(step)
            case Freeze():
                return self._freeze(step)
            case DuplicatePublish():
                return self._duplicate(step)
            case RefusePublishes():
                return self._refuse(step)
            case TamperProperties():
                return self._tamper(step)
            case Intercept():
                return self._intercept(step)
            case Inject():
                self.broker.publish(Message(step.topic, step.payload, 1, step.retain,
                                            step.props))
                return Done()
            case Capture():
                return self._capture(step)
            case _:
                assert_never(step)

    def _redeliver(self, step: Redeliver) -> Outcome:
        if step.probability <= 0 or step.delay_ms is None:
            self.broker.redelivery = None
            return Done()
        only = self.hosts[step.node].client_id if step.node else None
        self.broker.redelivery = Redelivery(step.probability, step.delay_ms,
                                            rng_for(step.seed, f"fault/{step.fault.index}"),
                                            step.fault.index, only)
        return Done()

    def _link_down(self, step: LinkDown) -> Outcome:
        hosts = [self.hosts[n] for n in step.nodes]
        for h in hosts:
            self._counters[(step.fault.index, h.node_id)] = h.link.lost
            self._counters[(step.fault.index, f"{h.node_id}/passed")] = h.link.passed
            h.link.up = False
            h.link.blocked = BLOCKS[step.direction]
            h.link.unplugged = step.unplug
            h.link.downs += 1
            for conn in [h.conn, *h.extra]:
                if conn is not None and "up" in h.link.blocked:
                    # the broker hears nothing more from it; its close reaches the node
                    # only if the broker's packets still do
                    self.broker.silent(conn, _still_down(h.link),
                                       notify="down" not in h.link.blocked)
            h.watch()
        return Done()

    def _link_up(self, step: LinkUp) -> Outcome:
        firings = []
        for node in step.nodes:
            h = self.hosts[node]
            one_way = h.link.blocked != BOTH_WAYS
            h.link.up = True
            h.link.blocked = BOTH_WAYS
            h.link.unplugged = False
            lost = h.link.lost - self._counters.pop((step.fault.index, node), h.link.lost)
            passed = h.link.passed - self._counters.pop((step.fault.index, f"{node}/passed"),
                                                        h.link.passed)
            cut = sum(c is not None and c.alive for c in [h.conn, *h.extra])
            h.cut("partition healed: connections reset")
            if lost or cut:
                firings.append(Firing("partitioned", node, {
                    "packetsBlackholed": lost, "connectionsCut": cut,
                    **({"packetsPassed": passed} if one_way else {})}))
        return Done(tuple(firings))

    def _link_change(self, step: Primitive, nodes: tuple[str, ...], counter: str,
                     spec_of: Callable[[SimHost], Any], heal: bool) -> Outcome:
        firings = []
        for node in nodes:
            h = self.hosts[node]
            key = (step.fault.index, node)
            if not heal:
                self._counters[key] = getattr(h.link, counter)
                h.link.spec = spec_of(h)
                continue
            h.link.spec = spec_of(h)   # back to the base for this fault's field only
            n = getattr(h.link, counter) - self._counters.pop(key, getattr(h.link, counter))
            if n:
                firings.append(Firing(f"{counter} under the fault", node, {"count": n}))
        return Done(tuple(firings))

    def _freeze(self, step: Freeze) -> Outcome:
        h = self.hosts[step.node]
        if h.node is None:
            return Refused(f"{step.node} is down")
        if not step.on:
            h.thaw()
            return Done((Firing("thawed", step.node),))
        h.freeze()
        n = h.freezes
        for conn in [h.conn, *h.extra]:
            if conn is not None:   # the broker hears nothing from it: its keepalive decides
                self.broker.silent(conn, lambda: h.frozen and h.freezes == n, notify=True)
        return Done((Firing("frozen (simulated: it runs nothing until thawed)", step.node),))

    def _withhold(self, step: WithholdPuback) -> Outcome:
        h = self.hosts[step.node]
        key = (step.fault.index, step.node)
        if step.on:
            self._counters[key] = h.pubacks_withheld
            h.withhold_puback = True
            return Done()
        h.withhold_puback = False
        withheld = h.pubacks_withheld - self._counters.pop(key, h.pubacks_withheld)
        cut = 1 if h.conn is not None and h.conn.alive else 0
        h.drop_connection("link cut after withheld PUBACKs")
        if not withheld:
            return Done()
        return Done((Firing("PUBACKs withheld, link cut", step.node,
                            {"withheld": withheld, "connectionsCut": cut}),))

    def _counted(self, step: RefusePublishes | DuplicatePublish, count: int, action: str,
                 **details: Json) -> Outcome:
        """A link fault the host counts (the live proxy's, here): turned on, where the
        count stood is kept; turned off, it fires with how many it did meanwhile."""
        key = (step.fault.index, step.node)
        if step.probability > 0:
            self._counters[key] = count
            return Done()
        n = count - self._counters.pop(key, count)
        return Done((Firing(action, step.node, {"count": n, **details}),) if n else ())

    def _duplicate(self, step: DuplicatePublish) -> Outcome:
        h = self.hosts[step.node]
        h.duplicate_publish = step.probability
        if step.probability > 0:
            h.duplicate_rng = rng_for(step.seed, f"fault/{step.fault.index}")
        return self._counted(step, h.publishes_duplicated, "PUBLISH delivered twice")

    def _refuse(self, step: RefusePublishes) -> Outcome:
        h = self.hosts[step.node]
        h.refuse_publish = (step.probability, step.reason_code) if step.probability > 0 else None
        if step.probability > 0:
            h.refuse_rng = rng_for(step.seed, f"fault/{step.fault.index}")
        return self._counted(step, h.publishes_refused,
                             f"PUBLISH refused with PUBACK 0x{step.reason_code:02x}",
                             reasonCode=step.reason_code)

    def _tamper(self, step: TamperProperties) -> Outcome:
        h = self.hosts[step.node]
        if step.probability > 0:
            h.tampering[step.fault.index] = Tampering(
                step, rng_for(step.seed, f"fault/{step.fault.index}"))
            return Done()
        gone = h.tampering.pop(step.fault.index, None)
        fired = step.fired(gone.count if gone is not None else 0)
        return Done((fired,) if fired else ())

    def _intercept(self, step: Intercept) -> Outcome:
        client = self.hosts[step.node]
        rewrite = step.rewrite
        if rewrite is None:
            self.broker.mitm.pop(client, None)
            return Done()

        def mitm(m: Message) -> Message:
            new = rewrite(m.topic, m.payload)
            return m if new is None else Message(m.topic, new, m.qos, m.retain)
        self.broker.mitm[client] = mitm
        return Done()

    def _capture(self, step: Capture) -> Outcome:
        key = step.fault.index
        old = self._taps.pop(key, None)
        if old is not None:
            self.broker.taps.remove(old)
        tap = step.tap
        if tap is not None:
            def observe(m: Message) -> None:
                tap(m.topic, m.payload)
            self._taps[key] = observe
            self.broker.taps.append(observe)
        return Done()
