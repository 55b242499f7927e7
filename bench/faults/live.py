"""What each fault of the catalogue does live. Same journal discipline as the simulator:
`fault_start` before acting, `fault_fired` each time it takes effect, `fault_healed` at the
end of the window. A fault that cannot act on this deployment (an external broker with no
restart command, a link fault without the fault proxy) says so and never fires, so the
verdicts it would have informed are UNKNOWN."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from bench.core.directory import ROSTER_DOCUMENT
from bench.faults import FaultSpec
from bench.faults.attacks import (
    AttackMessage,
    forged_request,
    replayed,
    rotated,
    tampered,
    victim_and_targets,
)
from bench.spec.distribution import rng_for
from bench.spec.topology import Topology
from bench.substrates.live.runner import LiveRun, with_config


class LiveNemesis:
    def __init__(self, run: LiveRun, seed: int, end_ms: float,
                 topology: Topology | None = None) -> None:
        self.run = run
        self.topology = topology
        self.seed = seed
        self.end_ms = end_ms
        self.tasks: list[asyncio.Task[None]] = []
        self.links: list[Any] = []   # the nemesis's own MQTT clients, closed by close()

    def schedule(self, faults: tuple[FaultSpec, ...]) -> None:
        for spec in faults:
            self.tasks.append(asyncio.create_task(self._run(spec)))

    def _fired(self, spec: FaultSpec, node: str = "nemesis", **fields: Any) -> None:
        self.run.record(node, "fault_fired", {"fault": spec.kind, "faultIndex": spec.index, **fields})

    def _cannot(self, spec: FaultSpec, reason: str) -> None:
        self.run.record("nemesis", "fault_cannot_act", {"fault": spec.kind, "faultIndex": spec.index,
                                                        "reason": reason})

    async def _run(self, spec: FaultSpec) -> None:
        await self.run.until(spec.at_ms)
        self.run.record("nemesis", "fault_start", spec.to_record())
        heal = await getattr(self, f"_{spec.kind}")(spec)
        end = self.end_ms if spec.duration_ms is None else spec.at_ms + spec.duration_ms
        await self.run.until(end)
        if heal is not None:
            await heal()
        self.run.record("nemesis", "fault_healed", {"fault": spec.kind, "faultIndex": spec.index})

    async def _restart_node(self, spec: FaultSpec, node_id: str, down_ms: float,
                            change: dict[str, Any] | None = None) -> None:
        node = self.run.nodes[node_id]
        await node.crash()
        self.run.record(node_id, "node_crashed", {"faultIndex": spec.index,
                                                  "how": "SIGKILL" if hasattr(node, "proc") else
                                                  "node object discarded"})
        await asyncio.sleep(down_ms / 1000)
        if change:
            node.spec = with_config(node.spec, **change)
        up = self.run.watch(lambda n, kind, _f: n == node_id and kind == "executors_registered")
        await node.start()
        try:
            await asyncio.wait_for(up, 20)
        except TimeoutError:
            self.run.record(node_id, "self_check_failed", {"after": "restart"})
            return
        self._fired(spec, node_id, action="restarted", downMs=down_ms)

    async def _restart(self, spec: FaultSpec) -> None:
        node_id = spec.params["node"]
        if spec.params["in_flush_window"]:
            boots = [e for e in self.run.recorder.events
                     if e.node == node_id and e.kind == "node_started"]
            interval = self.run.nodes[node_id].spec.config.ledger.flush_interval_ms
            since = self.run.clock.now_ms() - boots[-1].t_ms
            await self.run.until(boots[-1].t_ms + (since // interval + 1) * interval - 50)
        await self._restart_node(spec, node_id, spec.params["down_ms"])
        return None

    async def _empty_directory(self, spec: FaultSpec) -> Any:
        node_id = spec.params["node"]
        original = self.run.nodes[node_id].spec.config
        node = self.run.nodes[node_id]
        await node.crash()
        (node.spec.data_dir / ROSTER_DOCUMENT).unlink(missing_ok=True)   # a real, empty roster
        await self._restart_node(spec, node_id, spec.params["down_ms"], {"agents": ()})

        async def heal() -> None:
            node.spec = replace(node.spec, config=original)
            await self._restart_node(spec, node_id, spec.params["down_ms"])
        return heal

    async def _stale_roster(self, spec: FaultSpec) -> None:
        await self._restart_node(spec, spec.params["node"], spec.params["down_ms"],
                                 {"namespace": spec.params["namespace"],
                                  "agents": tuple(spec.params["agents"])})
        return None

    async def _broker_restart(self, spec: FaultSpec) -> None:
        broker = self.run.broker
        if not broker.controllable:
            self._cannot(spec, "external broker without a restart command")
            return None
        graceful = spec.params["graceful"]
        await asyncio.get_running_loop().run_in_executor(None, broker.stop if graceful else broker.kill)
        self._fired(spec, action="broker stopped" if graceful else "broker killed (SIGKILL)",
                    broker=broker.kind,
                    brokerPersistence="none" if broker.kind == "amqtt" else "file")
        await asyncio.sleep(spec.params["down_ms"] / 1000)
        if broker.kind != "external":
            await asyncio.get_running_loop().run_in_executor(None, broker.start)
        self._fired(spec, action="broker started", broker=broker.kind)
        return None

    async def _double_subscription(self, spec: FaultSpec) -> Any:
        node = self.run.nodes[spec.params["node"]]
        node.send({"op": "double_subscription", "on": True, "faultIndex": spec.index})

        async def heal() -> None:
            node.send({"op": "double_subscription", "on": False})
        return heal

    async def _duplicate_client_id(self, spec: FaultSpec) -> Any:
        victim = self.run.nodes[spec.params["node"]]
        impostor = self.run.nodes[spec.params["impostor"]]
        stolen = victim.spec.config.effective_client_id
        took = self.run.watch(lambda n, kind, f: n == impostor.node_id and kind == "mqtt_connected"
                              and f.get("clientId") == stolen)
        impostor.send({"op": "client_id", "value": stolen})

        def seen(_f: asyncio.Future[None]) -> None:
            self._fired(spec, impostor.node_id, action="connected with another node's client id",
                        clientId=stolen)
        took.add_done_callback(lambda f: None if f.cancelled() else seen(f))

        async def heal() -> None:
            if not took.done():
                took.cancel()
            impostor.send({"op": "client_id", "value": None})
        return heal

    async def _missing_reply_node(self, spec: FaultSpec) -> Any:
        node = self.run.nodes[spec.params["node"]]
        node.send({"op": "missing_reply_node", "on": True, "probability": spec.params["probability"],
                   "faultIndex": spec.index, "seed": self.seed})

        async def heal() -> None:
            node.send({"op": "missing_reply_node", "on": False})
        return heal

    async def _qos1_redelivery(self, spec: FaultSpec) -> Any:
        method = spec.params.get("live_method")
        if method == "withhold_puback":
            return await self._withhold_puback(spec)
        if method == "duplicate_publish":
            return await self._duplicate_publish(spec)
        return await self._replay_redelivery(spec)

    async def _duplicate_publish(self, spec: FaultSpec) -> Any:
        """The proxy writes a PUBLISH to the node twice (same packet id, as a broker or a
        bridge retransmitting would)."""
        found = self._node_proxy(spec)
        if found is None:
            return None
        node, proxy = found
        before = proxy.counters.publishes_duplicated
        proxy.faults.duplicate_publish = spec.params["probability"]

        async def heal() -> None:
            proxy.faults.duplicate_publish = 0.0
            n = proxy.counters.publishes_duplicated - before
            if n:
                self._fired(spec, node, action="PUBLISH delivered twice", count=n)
        return heal

    async def _replay_redelivery(self, spec: FaultSpec) -> Any:
        """Injected replay: a capture client sees every targeted PUBLISH and, with the
        fault's probability, publishes the very same bytes again after the fault's delay
        (what a broker's delayed QoS1 redelivery looks like to the receiver)."""
        from bench.substrates.live.mqtt import MqttLink
        loop = asyncio.get_running_loop()
        rng = rng_for(self.seed, f"fault/{spec.index}")
        prefix = next(iter(self.run.nodes.values())).spec.config.prefix
        only = spec.params.get("node")
        flt = f"{prefix}/node/{only}/inbox" if only else f"{prefix}/node/+/inbox"
        replayer: list[MqttLink] = []

        def replay(topic: str, payload: bytes) -> None:
            if replayer and not replayer[0].closed:
                replayer[0].publish(topic, payload, 1, False)
                self._fired(spec, action="replayed", topic=topic, bytes=len(payload))

        def on_message(topic: str, payload: bytes, mid: int, qos: int) -> None:
            link.ack(mid, qos)
            if rng.random() < spec.params["probability"]:
                delay = spec.params["delay_ms"].sample(rng) / 1000
                loop.call_later(delay, replay, topic, payload)

        link = MqttLink(loop, self.run.broker.host, self.run.broker.port, f"nemesis-replay-{spec.index}",
                        on_message=on_message, on_connected=lambda _p: link.subscribe((flt,), 1),
                        on_disconnected=lambda _r: None, on_published=lambda _m: None)
        replayer.append(link)
        self.links.append(link)
        link.connect()

        async def heal() -> None:
            link.client.unsubscribe(flt)   # stop capturing; replays already due still happen
        return heal

    # -- the attacker (bench.faults.attacks): its own MQTT client on the broker ----------------
    async def _attacker(self, spec: FaultSpec, on_message: Any = None) -> Any:
        from bench.substrates.live.mqtt import MqttLink
        loop = asyncio.get_running_loop()
        up: asyncio.Future[None] = loop.create_future()
        link = MqttLink(loop, self.run.broker.host, self.run.broker.port,
                        f"attacker-{spec.index}", on_message=on_message or (lambda *a: None),
                        on_connected=lambda _p: up.done() or up.set_result(None),
                        on_disconnected=lambda _r: None, on_published=lambda _m: None)
        self.links.append(link)
        link.connect()
        await asyncio.wait_for(up, 10)
        return link

    def _attack(self, spec: FaultSpec, link: Any, msg: AttackMessage) -> None:
        self.run.record("nemesis", "attack_sent", msg.record)
        link.publish(msg.topic, msg.payload, 1, False)
        self._fired(spec, action=msg.record["attack"], messageId=msg.record["messageId"])

    async def _forged_sender(self, spec: FaultSpec) -> Any:
        if self.topology is None:
            self._cannot(spec, "the nemesis was given no topology")
            return None
        config = next(iter(self.run.nodes.values())).spec.config
        auth = config.auth
        victim, victim_node, targets, compromised = victim_and_targets(
            [(n.id, n.role.value, n.agents) for n in self.topology.nodes])
        link = await self._attacker(spec)

        async def rounds() -> None:
            n = 0
            while True:
                for node, agent in targets:
                    n += 1
                    msg = forged_request(spec.params["how"], n, spec.index, victim_agent=victim,
                                         victim_node=victim_node, target_node=node,
                                         target_agent=agent, keys=auth.keys,
                                         compromised=compromised, now_ms=self.run.clock.now_ms(),
                                         prefix=config.prefix, version=auth.version,
                                         max_skew_ms=auth.max_skew_ms)
                    if msg is None:
                        self._cannot(spec, f"the attacker holds no key for how="
                                           f"{spec.params['how']!r} (scenario auth.keys)")
                        return
                    self._attack(spec, link, msg)
                await asyncio.sleep(spec.params["interval_ms"] / 1000)
        task = asyncio.create_task(rounds())

        async def heal() -> None:
            task.cancel()
        return heal

    async def _replay(self, spec: FaultSpec) -> Any:
        config = next(iter(self.run.nodes.values())).spec.config
        auth = config.auth
        loop = asyncio.get_running_loop()
        rng = rng_for(self.seed, f"fault/{spec.index}")
        seen: set[bytes] = set()
        holder: list[Any] = []

        def again(topic: str, payload: bytes) -> None:
            msg = replayed(payload, spec.index, keys=auth.keys, now_ms=self.run.clock.now_ms(),
                           max_skew_ms=auth.max_skew_ms, topic=topic)
            if msg is not None and holder and not holder[0].closed:
                self._attack(spec, holder[0], msg)

        def on_message(topic: str, payload: bytes, mid: int, qos: int) -> None:
            holder[0].ack(mid, qos)
            if payload in seen:
                return
            seen.add(payload)
            if rng.random() < spec.params["probability"]:
                loop.call_later(spec.params["delay_ms"].sample(rng) / 1000, again, topic, payload)

        flt = f"{config.prefix}/node/+/inbox"
        link = await self._attacker(spec, on_message)
        holder.append(link)
        link.subscribe((flt,), 1)

        async def heal() -> None:
            link.client.unsubscribe(flt)
        return heal

    async def _key_rotation(self, spec: FaultSpec) -> Any:
        from bench.core.auth import KeyRing, Secret
        agent, stale = spec.params["agent"], spec.params.get("stale_node")
        original: KeyRing = next(iter(self.run.nodes.values())).spec.config.auth.keys
        if agent not in original.agent_keys:
            self._cannot(spec, f"agent {agent!r} has no per-agent key (scenario auth.keys)")
            return None
        new = Secret(rng_for(self.seed, f"fault/{spec.index}/key").randbytes(24).hex())

        def op(keys: KeyRing) -> dict[str, Any]:   # over the control channel, never argv
            return {"op": "keys", "flat": keys.flat_token.reveal().hex() if keys.flat_token else None,
                    "agents": {k: v.reveal().hex() for k, v in keys.agent_keys.items()},
                    "previous": {k: v.reveal().hex() for k, v in keys.previous.items()}}
        current = [n for nid, n in self.run.nodes.items() if nid != stale]
        for node in current:
            node.send(op(rotated(original, agent, new, True)))
        self._fired(spec, action="key rotated", agent=agent, staleNode=stale,
                    overlapMs=spec.params["overlap_ms"])

        async def end_overlap() -> None:
            await asyncio.sleep(spec.params["overlap_ms"] / 1000)
            for node in current:
                node.send(op(rotated(original, agent, new, False)))
            self._fired(spec, action="overlap ended", agent=agent)
        self.tasks.append(asyncio.create_task(end_overlap()))
        return None

    async def _clock_skew(self, spec: FaultSpec) -> Any:
        node = self.run.nodes[spec.params["node"]]
        node.send({"op": "clock_skew", "skew_ms": spec.params["skew_ms"], "faultIndex": spec.index})
        self._fired(spec, spec.params["node"], action="clock set off",
                    skewMs=spec.params["skew_ms"])

        async def heal() -> None:
            node.send({"op": "clock_skew", "skew_ms": 0.0, "faultIndex": spec.index})
        return heal

    async def _tamper(self, spec: FaultSpec, what: str) -> Any:
        node_id = spec.params["node"]
        proxies = self._proxies(spec, (node_id,))
        if proxies is None:
            return None
        proxy = proxies[0]
        config = self.run.nodes[node_id].spec.config
        rng = rng_for(self.seed, f"fault/{spec.index}")

        def rewrite(topic: str, payload: bytes) -> bytes | None:
            if rng.random() >= spec.params["probability"]:
                return None
            done = tampered(payload, what, spec.index, agents_of_node=config.agents,
                            keys=config.auth.keys, now_ms=self.run.clock.now_ms(),
                            max_skew_ms=config.auth.max_skew_ms, node=node_id)
            if done is None:
                return None
            new, record = done
            self.run.record("nemesis", "attack_sent", record)
            self._fired(spec, action=record["attack"], messageId=record["messageId"])
            return new
        proxy.faults.rewrite = rewrite

        async def heal() -> None:
            proxy.faults.rewrite = None
        return heal

    async def _tamper_payload(self, spec: FaultSpec) -> Any:
        return await self._tamper(spec, "payload")

    async def _tamper_routing(self, spec: FaultSpec) -> Any:
        return await self._tamper(spec, "routing")

    # -- link faults, through the fault proxy in front of each node ----------------------------
    def _proxies(self, spec: FaultSpec, nodes: tuple[str, ...]) -> list[Any] | None:
        proxies = [self.run.proxies.get(n) for n in nodes]
        if any(p is None for p in proxies):
            self._cannot(spec, "the node is not behind the fault proxy")
            return None
        return proxies

    def _node_proxy(self, spec: FaultSpec) -> tuple[str, Any] | None:
        """The proxy of the one node a proxy-based qos1_redelivery method acts on."""
        node = spec.params.get("node")
        if node is None:
            self._cannot(spec, f"live_method={spec.params.get('live_method')} needs a node")
            return None
        proxies = self._proxies(spec, (node,))
        return None if proxies is None else (node, proxies[0])

    async def _partition(self, spec: FaultSpec) -> Any:
        nodes = tuple(spec.params["nodes"])
        proxies = self._proxies(spec, nodes)
        if proxies is None:
            return None
        before = [(p.counters.blackholed, p.counters.refused) for p in proxies]
        for p in proxies:
            p.faults.partitioned = True

        async def heal() -> None:
            for node, p, (bh, rf) in zip(nodes, proxies, before, strict=False):
                p.faults.partitioned = False
                cut = p.drop_all()   # connections that lost bytes cannot be trusted again
                lost, refused = p.counters.blackholed - bh, p.counters.refused - rf
                if lost or refused or cut:
                    self._fired(spec, node, action="partitioned", packetsBlackholed=lost,
                                connectionsRefused=refused, connectionsCut=cut)
        return heal

    async def _link(self, spec: FaultSpec, field: str, value: Any, counter: str) -> Any:
        nodes = tuple(spec.params["nodes"])
        proxies = self._proxies(spec, nodes)
        if proxies is None:
            return None
        before = [getattr(p.counters, counter) for p in proxies]
        for p in proxies:
            setattr(p.faults, field, value)

        async def heal() -> None:
            for node, p, b in zip(nodes, proxies, before, strict=False):
                setattr(p.faults, field, None if field == "latency_ms" else 0.0)
                n = getattr(p.counters, counter) - b
                if n:
                    self._fired(spec, node, action=f"{counter} under the fault", count=n)
        return heal

    async def _latency(self, spec: FaultSpec) -> Any:
        return await self._link(spec, "latency_ms", spec.params["latency_ms"], "delayed")

    async def _loss(self, spec: FaultSpec) -> Any:
        return await self._link(spec, "loss", spec.params["probability"], "retransmitted")

    async def _withhold_puback(self, spec: FaultSpec) -> Any:
        """QoS1 redelivery by the broker itself: the node's PUBACKs are dropped, then its link
        is cut; on the persistent session the broker must resend what was never acked."""
        found = self._node_proxy(spec)
        if found is None:
            return None
        node, proxy = found
        before = proxy.counters.pubacks_withheld
        proxy.faults.withhold_puback = True

        async def heal() -> None:
            proxy.faults.withhold_puback = False
            withheld = proxy.counters.pubacks_withheld - before
            cut = proxy.drop_all()
            if withheld:
                self._fired(spec, node, action="PUBACKs withheld, link cut", withheld=withheld,
                            connectionsCut=cut)
        return heal

    def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        for link in self.links:
            link.close()
