"""The nemesis's hands on a live deployment: each fault primitive carried out with what
the deployment has — its nodes, its broker and the bench's watch of it, the fault proxy
in front of each node, and clients of the nemesis's own (an attacker, a replayer). What
cannot be done here (a link fault with no proxy, a restart of an external broker with no
command) is refused with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, assert_never

from bench.core import events as ev
from bench.core.envelope import Json
from bench.core.inputs import ROSTER_DOCUMENT
from bench.faults.primitives import (
    BLOCKS,
    BOTH_WAYS,
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
from bench.protocols import protocol
from bench.spec.distribution import rng_for
from bench.substrates.filters import matches
from bench.substrates.live.control import keys_to_json
from bench.substrates.live.mqtt import Delivery, MqttLink
from bench.substrates.live.nodes import registered
from bench.substrates.live.proxy import FaultProxy

if TYPE_CHECKING:
    from bench.substrates.live.deployment import LiveDeployment

#: How long a restarted node may take to register its executors again.
REBOOT_TIMEOUT_S = 20.0
#: How long an external broker's restart command may take to stop it, then to bring it back.
RESTART_COMMAND_S = 30.0


class LiveFaults:
    def __init__(self, dep: LiveDeployment) -> None:
        self.dep = dep
        self.links: dict[int, MqttLink] = {}          # fault index -> the nemesis's own client
        self._counters: dict[tuple[int, str], Any] = {}   # (fault, node) -> counter at arming
        self._crashed_at: dict[str, float] = {}
        #: node -> operation -> the client-side fault state last set there, re-applied after
        #: a restart (a skewed clock or a refusing client outlives the node's process)
        self._client_state: dict[str, dict[str, dict[str, Any]]] = {}
        #: redeliveries the nemesis scheduled, still to come (the run is not settled before)
        self.replays_due = 0
        self._restart: asyncio.subprocess.Process | None = None

    async def carry_out(self, step: Primitive) -> Outcome:
        """Carry a fault primitive out; its outcome (Done, Refused, Broke)."""
        match step:
            case Crash():
                if not self.dep.nodes[step.node].up:
                    return Refused(f"{step.node} is already down")
                how = await self.dep.nodes[step.node].crash(step.graceful)
                self._crashed_at[step.node] = self.dep.clock.now_ms()
                return Done(crashed=Crashed(how))
            case Boot():
                return await self._boot(step)
            case WipeRoster():
                (self.dep.nodes[step.node].spec.data_dir / ROSTER_DOCUMENT).unlink(missing_ok=True)
                return Done()
            case SkewClock() if (setter := self.dep.placement.set_clocks) is not None \
                    and setter.sets(step.node):
                return await setter.skew(step.fault, step.node, step.skew_ms)
            case SkewClock():
                return self._send(step.node, {"op": "clock_skew", "skew_ms": step.skew_ms})
            case RotateKeys():
                node = self.dep.nodes[step.node]
                config = node.spec.config
                # kept in the launch spec too: a restarted process comes back with these keys
                node.spec = replace(node.spec, config=replace(
                    config, auth=replace(config.auth, keys=step.keys)))
                return self._send(step.node, keys_to_json(step.keys))
            case SecondConnection():
                return self._send(step.node, {"op": "second_connection", "on": step.on,
                                              "overlapping": step.overlapping,
                                              "fault": [step.fault.index, step.fault.kind]})
            case UseClientId() if self.dep.topology.node(step.node).external:
                return await self._impostor(step)
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
            case LinkDown() if (links := self.dep.placement.links) is not None:
                return await links.down(self.dep, step.fault, step.nodes, step.unplug,
                                        step.direction)
            case LinkUp() if (links := self.dep.placement.links) is not None:
                return await links.up(self.dep, step.fault, step.nodes)
            case LinkLatency() if (links := self.dep.placement.links) is not None:
                return await links.latency(step.fault, step.nodes, step.latency_ms)
            case LinkLoss() if (links := self.dep.placement.links) is not None:
                return await links.loss(step.fault, step.nodes, step.probability)
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
            case RefusePublishes():
                return self._refuse(step)
            case TamperProperties():
                return self._tamper(step)
            case Intercept():
                proxies = self._proxies((step.node,))
                if isinstance(proxies, Refused):
                    return proxies
                proxies[0].faults.rewrite = step.rewrite
                return Done()
            case Inject():
                link = await self._client(step.fault.index)
                link.publish(step.topic, step.payload, 1, step.retain, step.props)
                return Done()
            case Capture():
                return await self._capture(step)
            case Freeze():
                node = self.dep.nodes[step.node]
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
        self.dep.nodes[node].send(op)
        return Done()

    async def _boot(self, step: Boot) -> Outcome:
        node = self.dep.nodes[step.node]
        if node.up:
            return Refused(f"{step.node} is already up")
        if step.config is not None:
            node.spec = replace(node.spec, config=step.config)
        crashed_at = self._crashed_at.pop(step.node, self.dep.clock.now_ms())
        up = self.dep.watch_for(registered(step.node))
        await node.start()
        for op in self._client_state.get(step.node, {}).values():
            node.send(op)
        try:
            await asyncio.wait_for(up, REBOOT_TIMEOUT_S)
        except TimeoutError:
            self.dep.record(step.node, ev.SelfCheckFailed(after="restart"))
            return Done()
        return Done((Firing("restarted", step.node,
                            {"downMs": self.dep.clock.now_ms() - crashed_at}),))

    async def _broker_stop(self, step: BrokerStop) -> Outcome:
        broker = self.dep.broker
        if not broker.controllable:
            return Refused("external broker without a restart command")
        self.dep.watch.planned = True
        if broker.kind == "external":
            return await self._external_restart()
        stop = broker.stop if step.graceful else broker.kill
        if not step.persistence:    # it comes back with nothing: its state is not read again
            broker.persistence = False
        await self.dep.loop.run_in_executor(None, stop)
        self.dep.watch.went("stopped gracefully (SIGTERM)" if step.graceful else "killed (SIGKILL)")
        kept = {True: "file", False: "none", None: "unknown"}[broker.keeps_sessions]
        return Done((Firing(ev.FaultAction.BROKER_STOPPED if step.graceful
                              else ev.FaultAction.BROKER_KILLED,
                            details={"broker": broker.kind, "brokerPersistence": kept}),))

    async def _external_restart(self) -> Outcome:
        """The user's command restarts an external broker: run it, and say the broker
        stopped when the watch sees it go (not when the command returns); if it never
        goes, the fault did nothing and says so."""
        assert self.dep.broker.restart_command is not None
        self._restart = proc = await asyncio.create_subprocess_shell(
            self.dep.broker.restart_command, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        gone = self.dep.loop.create_task(self.dep.watch.gone.wait())
        ended = self.dep.loop.create_task(proc.wait())
        await asyncio.wait({gone, ended}, timeout=RESTART_COMMAND_S,
                           return_when=asyncio.FIRST_COMPLETED)
        if not gone.done() and ended.done():   # the command ended first: a moment more
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(gone), 3.0)
        if not gone.done():
            gone.cancel()
            self.dep.watch.planned = False
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
        if self.dep.broker.kind != "external":
            await self.dep.loop.run_in_executor(None, self.dep.broker.start)
            self.dep.watch.back()
        else:
            try:   # the user's command brings it back by itself: wait for the watch to see it
                await asyncio.wait_for(self.dep.watch.up.wait(), RESTART_COMMAND_S)
            except TimeoutError:
                self.dep.watch.planned = False
                return Broke(f"the broker did not come back within {RESTART_COMMAND_S} s of "
                             "its restart command", "broker_restart")
            finally:
                if self._restart is not None and self._restart.returncode is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._restart.wait(), 5.0)
        self.dep.watch.planned = False
        return Done((Firing(ev.FaultAction.BROKER_STARTED, details={"broker": self.dep.broker.kind}),))

    async def _client(self, index: int,
                      on_message: Callable[[Delivery], None] | None = None) -> MqttLink:
        """The nemesis's own MQTT client for a fault (an attacker, a replayer)."""
        link = self.links.get(index)
        if link is not None:
            return link
        up: asyncio.Future[None] = self.dep.loop.create_future()
        client_id = f"nemesis-{index}" + (f"-{self.dep.run_id}" if self.dep.run_id else "")
        link = MqttLink(self.dep.loop, self.dep.broker.host, self.dep.broker.port, client_id,
                        on_message=on_message or (lambda _d: None),
                        on_connected=lambda _p: None if up.done() else up.set_result(None),
                        on_disconnected=lambda _r: None, on_published=lambda _m, _rc: None,
                        login=self.dep.login(), tls=self.dep.broker.tls,
                        version=self.dep.scenario.mqtt)
        self.links[index] = link
        link.connect()
        await asyncio.wait_for(up, 10)
        return link

    async def _impostor(self, step: UseClientId) -> Outcome:
        """A session takeover where the impostor is a node not written here (the node
        contract has no line to make it change its client id): the nemesis's own client
        connects under the stolen id instead, reconnecting whenever the broker takes the
        connection back for the victim (every connection under it a firing), until the
        fault heals (`client_id` None: it leaves)."""
        index = step.fault.index
        if step.client_id is None:
            link = self.links.pop(index, None)
            if link is not None:
                link.close()
            return Done()

        def connected(_present: object) -> None:
            self.dep.record("nemesis", ev.FaultFired(step.fault.kind, index, "impostor_connected",
                                                     {"clientId": step.client_id}))
        link = MqttLink(self.dep.loop, self.dep.broker.host, self.dep.broker.port, step.client_id,
                        on_message=lambda _d: None, on_connected=connected,
                        on_disconnected=lambda _r: None, on_published=lambda _m, _rc: None,
                        login=self.dep.login(), tls=self.dep.broker.tls,
                        version=self.dep.scenario.mqtt)
        self.links[index] = link
        link.connect()
        return Done()

    def _inbox_filters(self, node: str | None) -> tuple[str, ...]:
        """The filters of what reaches `node` (None: every node), as its protocol's
        deployment says (`deploy.inbox`), else the seed protocol's inbox."""
        hooks = protocol(self.dep.topology.protocol).module("deploy")
        if hooks is not None and hasattr(hooks, "inbox"):
            return tuple(hooks.inbox(self.dep.topology, node, self.dep.run_id))
        topics = next(iter(self.dep.nodes.values())).spec.config.topics
        return (topics.inbox(node) if node else topics.inbox_filter(),)

    async def _redeliver(self, step: Redeliver) -> Outcome:
        """A capture client sees every targeted PUBLISH and, with the fault's probability,
        publishes the very same bytes again after the fault's delay (what a broker's
        delayed QoS1 redelivery looks like to the receiver). It sees its own copies too,
        and re-sends none of them: a delivery is re-sent once at most, as in the simulator
        (with probability 1, copies of copies would be a storm until the run ended)."""
        index = step.fault.index
        flt = self._inbox_filters(step.node)
        if step.probability <= 0 or step.delay_ms is None:
            link = self.links.get(index)
            if link is not None:
                for f in flt:
                    link.client.unsubscribe(f)   # replays already due still happen
            return Done()
        rng = rng_for(step.seed, f"fault/{index}")
        delay_ms, p = step.delay_ms, step.probability
        holder: list[MqttLink] = []
        copies: Counter[tuple[str, bytes]] = Counter()   # sent, not yet seen come back

        def replay(topic: str, payload: bytes) -> None:
            self.replays_due -= 1
            if holder and not holder[0].closed:
                copies[(topic, payload)] += 1
                holder[0].publish(topic, payload, 1, False)
                self.dep.record("nemesis", ev.FaultFired(step.fault.kind, index, "replayed",
                                                     {"topic": topic, "bytes": len(payload)}))

        def on_message(d: Delivery) -> None:
            # (its link, kept before it connects: a resumed session's queued copies may come
            # before `_client` returns)
            self.links[index].ack(d.mid, d.qos)
            if not any(matches(f, d.topic) for f in flt):
                # amqtt 0.12 hands a named client, as it connects, retained messages of
                # topics it never subscribed (docs/findings/brokers-amqtt-mosquitto.md): a
                # broker's stray delivery is not a targeted message to re-send
                self.dep.record("nemesis", ev.FaultFired(step.fault.kind, index,
                                                         "ignored_off_its_filter",
                                                         {"topic": d.topic,
                                                          "filter": " ".join(flt)}))
                return
            if copies[(d.topic, d.payload)] > 0:     # one of ours, back: not re-sent
                copies[(d.topic, d.payload)] -= 1
                if not copies[(d.topic, d.payload)]:
                    del copies[(d.topic, d.payload)]
                return
            if rng.random() < p:
                self.replays_due += 1     # the run is not settled before they happen
                self.dep.loop.call_later(delay_ms.sample(rng) / 1000, replay, d.topic, d.payload)

        link = await self._client(index, on_message)
        holder.append(link)
        link.subscribe(flt, 1)
        return Done()

    async def _capture(self, step: Capture) -> Outcome:
        flt = self._inbox_filters(None)
        tap = step.tap
        if tap is None:
            link = self.links.get(step.fault.index)
            if link is not None:
                for f in flt:
                    link.client.unsubscribe(f)
            return Done()
        index = step.fault.index

        def on_message(d: Delivery) -> None:
            # (its link, kept before it connects: a resumed session's queued copies may come
            # before `_client` returns — an IndexError on a loaded clean clone, 2026-12-08)
            self.links[index].ack(d.mid, d.qos)
            tap(d.topic, d.payload)
        link = await self._client(index, on_message)
        link.subscribe(flt, 1)
        return Done()

    # -- link faults, through the fault proxy in front of each node ------------------------------
    def _proxies(self, nodes: tuple[str, ...]) -> list[FaultProxy] | Refused:
        proxies = [self.dep.proxies.get(n) for n in nodes]
        found = [p for p in proxies if p is not None]
        if len(found) != len(proxies):
            return Refused("the node is not behind the fault proxy")
        return found

    def _link_down(self, step: LinkDown) -> Outcome:
        proxies = self._proxies(step.nodes)
        if isinstance(proxies, Refused):
            return proxies
        for node, p in zip(step.nodes, proxies, strict=True):
            self._counters[(step.fault.index, node)] = (p.counters.blackholed,
                                                        p.counters.unanswered, p.counters.passed)
            p.faults.partitioned = True
            p.faults.unplugged = step.unplug
            p.faults.blocked = BLOCKS[step.direction]
        self.dep.placement.link_cut(self.dep, step.fault, step.nodes, step.unplug)
        return Done()

    def _link_up(self, step: LinkUp) -> Outcome:
        proxies = self._proxies(step.nodes)
        if isinstance(proxies, Refused):
            return proxies
        firings = []
        for node, p in zip(step.nodes, proxies, strict=True):
            bh, rf, ps = self._counters.pop((step.fault.index, node), (0, 0, 0))
            one_way = p.faults.blocked != BOTH_WAYS
            p.faults.partitioned = False
            p.faults.unplugged = False
            p.faults.blocked = BOTH_WAYS
            cut = p.drop_all()   # connections that lost bytes cannot be trusted again
            lost, unanswered = p.counters.blackholed - bh, p.counters.unanswered - rf
            if lost or unanswered or cut:
                firings.append(Firing("partitioned", node, {
                    "packetsBlackholed": lost, "connectionsUnanswered": unanswered,
                    "connectionsCut": cut,
                    **({"packetsPassed": p.counters.passed - ps} if one_way else {})}))
        self.dep.placement.link_restored(self.dep, step.fault, step.nodes)
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

    def _counted(self, step: RefusePublishes | DuplicatePublish, count: int, action: str,
                 **details: Json) -> Outcome:
        """A proxy fault that counts what it did: turned on, where its proxy's count stood
        is kept; turned off, it fires with how many it did meanwhile (nothing if none)."""
        key = (step.fault.index, step.node)
        if step.probability > 0:
            self._counters[key] = count
            return Done()
        n = count - self._counters.pop(key, 0)
        return Done((Firing(action, step.node, {"count": n, **details}),) if n else ())

    def _refuse(self, step: RefusePublishes) -> Outcome:
        """The proxy keeps a share of the node's QoS1 PUBLISHes from the broker and answers
        each with a PUBACK failure reason code, as a broker over quota or ACL would."""
        proxies = self._proxies((step.node,))
        if isinstance(proxies, Refused):
            return proxies
        proxy = proxies[0]
        proxy.faults.refuse_publish = (step.probability, step.reason_code) \
            if step.probability > 0 else None
        return self._counted(step, proxy.counters.publishes_refused,
                             f"PUBLISH refused with PUBACK 0x{step.reason_code:02x}",
                             reasonCode=step.reason_code)

    def _tamper(self, step: TamperProperties) -> Outcome:
        """The proxy strips or alters one property of a share of the node's PUBLISHes on
        their way to the broker."""
        proxies = self._proxies((step.node,))
        if isinstance(proxies, Refused):
            return proxies
        tampering = proxies[0].faults.tampering
        if step.probability > 0:
            tampering[step.fault.index] = Tampering(
                step, rng_for(step.seed, f"fault/{step.fault.index}"))
            return Done()
        gone = tampering.pop(step.fault.index, None)
        fired = step.fired(gone.count if gone is not None else 0)
        return Done((fired,) if fired else ())

    def _duplicate(self, step: DuplicatePublish) -> Outcome:
        """The proxy writes a PUBLISH to the node twice (same packet id, as a broker or a
        bridge retransmitting would)."""
        proxies = self._proxies((step.node,))
        if isinstance(proxies, Refused):
            return proxies
        proxy = proxies[0]
        proxy.faults.duplicate_publish = step.probability
        return self._counted(step, proxy.counters.publishes_duplicated,
                             "PUBLISH delivered twice")
