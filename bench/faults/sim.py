"""What each fault of the catalogue does in the simulator. Each runs as a simpy process:
journal (`fault_start`), act, wait out the window, heal (`fault_healed` with how often it
fired). Firings are `fault_fired` events carrying the fault's index."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

import simpy

from bench.core.auth import sign
from bench.core.directory import ROSTER_DOCUMENT
from bench.core.envelope import Envelope, Header, MessageType, decode, encode
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
from bench.substrates.sim.broker import Message, Redelivery
from bench.substrates.sim.cluster import SimCluster
from bench.substrates.sim.host import KEEPALIVE_DETECT_MS, SimHost

Heal = Callable[[], Any]


def _steps(result: Any) -> Generator[simpy.Event, Any, Any]:
    """Run a step that may be a generator (it waits) or a plain return value."""
    if inspect.isgenerator(result):
        value = yield from result
        return value
    return result


class SimNemesis:
    def __init__(self, cluster: SimCluster, topology: Topology, seed: int, end_ms: float) -> None:
        self.cluster = cluster
        self.env = cluster.env
        self.topology = topology
        self.seed = seed
        self.end_ms = end_ms

    def schedule(self, faults: tuple[FaultSpec, ...]) -> None:
        for spec in faults:
            self.env.process(self._run(spec))

    def _fired(self, spec: FaultSpec, node: str = "nemesis", **fields: Any) -> None:
        self.cluster.record(node, "fault_fired", {"fault": spec.kind, "faultIndex": spec.index,
                                                  **fields})

    def _run(self, spec: FaultSpec) -> Generator[simpy.Event, Any, Any]:
        """Journal, act, wait out the window, heal. An action (and its heal step) is a plain
        function, or a generator when it has to wait in virtual time."""
        yield self.env.timeout(spec.at_ms)
        self.cluster.record("nemesis", "fault_start", spec.to_record())
        action: Callable[[FaultSpec], Any] = getattr(self, f"_{spec.kind}")
        heal = yield from _steps(action(spec))
        end = self.end_ms if spec.duration_ms is None else spec.at_ms + spec.duration_ms
        if end > self.env.now:
            yield self.env.timeout(end - self.env.now)
        if heal is not None:
            yield from _steps(heal())
        self.cluster.record("nemesis", "fault_healed", {"fault": spec.kind, "faultIndex": spec.index})

    def _cannot(self, spec: FaultSpec, reason: str) -> None:
        self.cluster.record("nemesis", "fault_cannot_act", {"fault": spec.kind,
                                                            "faultIndex": spec.index,
                                                            "reason": reason})

    # -- the attacker (bench.faults.attacks): a client of the broker, one hop away ---------
    def _attacker_view(self) -> tuple[Any, str]:
        config = next(iter(self.cluster.hosts.values())).config
        return config.auth, config.prefix

    def _attack(self, spec: FaultSpec, msg: AttackMessage) -> None:
        self.cluster.record("nemesis", "attack_sent", msg.record)
        self.cluster.broker.publish(Message(msg.topic, msg.payload, 1))
        self._fired(spec, action=msg.record["attack"], messageId=msg.record["messageId"])

    def _forged_sender(self, spec: FaultSpec) -> Any:
        auth, prefix = self._attacker_view()
        victim, victim_node, targets, compromised = victim_and_targets(
            [(n.id, n.role.value, n.agents) for n in self.topology.nodes])
        stop = [False]

        def rounds() -> Generator[simpy.Event, Any, None]:
            n = 0
            while not stop[0]:
                for node, agent in targets:
                    n += 1
                    msg = forged_request(spec.params["how"], n, spec.index, victim_agent=victim,
                                         victim_node=victim_node, target_node=node,
                                         target_agent=agent, keys=auth.keys,
                                         compromised=compromised, now_ms=int(self.env.now),
                                         prefix=prefix, version=auth.version,
                                         max_skew_ms=auth.max_skew_ms)
                    if msg is None:
                        self._cannot(spec, f"the attacker holds no key for how="
                                           f"{spec.params['how']!r} (scenario auth.keys)")
                        return
                    self._attack(spec, msg)
                yield self.env.timeout(spec.params["interval_ms"])
        self.env.process(rounds())

        def heal() -> Any:
            stop[0] = True
        return heal

    def _replay(self, spec: FaultSpec) -> Any:
        auth, prefix = self._attacker_view()
        rng = rng_for(self.seed, f"fault/{spec.index}")
        seen: set[bytes] = set()
        inbox = f"{prefix}/node/"

        def later(delay: float, topic: str, payload: bytes) -> Generator[simpy.Event, Any, None]:
            yield self.env.timeout(delay)
            msg = replayed(payload, spec.index, keys=auth.keys, now_ms=int(self.env.now),
                           max_skew_ms=auth.max_skew_ms, topic=topic)
            if msg is not None:
                self._attack(spec, msg)

        def tap(m: Message) -> None:
            if not (m.topic.startswith(inbox) and m.topic.endswith("/inbox")) or m.payload in seen:
                return
            env = decode(m.payload)
            if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST:
                return
            seen.add(m.payload)
            if rng.random() < spec.params["probability"]:
                self.env.process(later(spec.params["delay_ms"].sample(rng), m.topic, m.payload))
        self.cluster.broker.taps.append(tap)

        def heal() -> Any:
            self.cluster.broker.taps.remove(tap)
        return heal

    def _tamper(self, spec: FaultSpec, what: str) -> Any:
        auth, _prefix = self._attacker_view()
        host = self._host(spec.params["node"])
        rng = rng_for(self.seed, f"fault/{spec.index}")

        def rewrite(m: Message) -> Message:
            if rng.random() >= spec.params["probability"]:
                return m
            done = tampered(m.payload, what, spec.index, agents_of_node=host.config.agents,
                            keys=auth.keys, now_ms=int(self.env.now),
                            max_skew_ms=auth.max_skew_ms, node=host.node_id)
            if done is None:
                return m
            payload, record = done
            self.cluster.record("nemesis", "attack_sent", record)
            self._fired(spec, action=record["attack"], messageId=record["messageId"])
            return Message(m.topic, payload, m.qos, m.retain)
        client = host.client_id
        self.cluster.broker.mitm[client] = rewrite

        def heal() -> Any:
            self.cluster.broker.mitm.pop(client, None)
        return heal

    def _tamper_payload(self, spec: FaultSpec) -> Any:
        return self._tamper(spec, "payload")

    def _tamper_routing(self, spec: FaultSpec) -> Any:
        return self._tamper(spec, "routing")

    def _clock_skew(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])
        host.skew_ms = spec.params["skew_ms"]
        self._fired(spec, host.node_id, action="clock set off", skewMs=host.skew_ms)

        def heal() -> Any:
            host.skew_ms = 0.0
        return heal

    def _key_rotation(self, spec: FaultSpec) -> Any:
        from bench.core.auth import Secret
        from bench.core.inputs import KeysRotated
        agent, stale = spec.params["agent"], spec.params.get("stale_node")
        auth, _prefix = self._attacker_view()
        if agent not in auth.keys.agent_keys:
            self._cannot(spec, f"agent {agent!r} has no per-agent key (scenario auth.keys)")
            return None
        new = Secret(rng_for(self.seed, f"fault/{spec.index}/key").randbytes(24).hex())
        current = {n: h for n, h in self.cluster.hosts.items() if n != stale}

        def roll(overlap: bool) -> None:
            for host in current.values():
                keys = rotated(host.config.auth.keys if not overlap else auth.keys, agent, new,
                               overlap)
                host.config = replace(host.config, auth=replace(host.config.auth, keys=keys))
                if host.node is not None:
                    host.feed(KeysRotated(host.now_ms, keys))
        roll(True)
        self._fired(spec, action="key rotated", agent=agent, staleNode=stale,
                    overlapMs=spec.params["overlap_ms"])

        def end_overlap() -> Generator[simpy.Event, Any, None]:
            yield self.env.timeout(spec.params["overlap_ms"])
            roll(False)
            self._fired(spec, action="overlap ended", agent=agent)
        self.env.process(end_overlap())
        return None

    def _host(self, node_id: str) -> SimHost:
        return self.cluster.hosts[node_id]

    # -- one method per fault: act, then return the heal step (a generator function) --------
    def _qos1_redelivery(self, spec: FaultSpec) -> Any:
        node = spec.params.get("node")
        only = self._host(node).client_id if node else None
        broker = self.cluster.broker
        broker.redelivery = Redelivery(spec.params["probability"], spec.params["delay_ms"],
                                       rng_for(self.seed, f"fault/{spec.index}"), spec.index, only)

        def heal() -> Any:
            broker.redelivery = None
        return heal

    def _double_subscription(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])
        topics = host.config.topics
        filters = (topics.inbox(host.node_id), *(topics.group(g) for g in host.config.scene_groups))
        host.second_connection_fault = spec.index
        conn = host.add_connection("second", f"{host.client_id}-sub2", filters)

        def heal() -> Any:
            self.cluster.broker.disconnect(conn, graceful=True)
            if conn in host.extra:
                host.extra.remove(conn)
        return heal

    def _restart_with(self, spec: FaultSpec, host: SimHost, down_ms: float,
                      prepare: Callable[[], dict[str, Any]]) -> Generator[simpy.Event, Any, Any]:
        lost = host.crash()
        self.cluster.record(host.node_id, "node_crashed", {"faultIndex": spec.index,
                                                           "lostWrites": lost})
        yield self.env.timeout(down_ms)
        details = prepare()
        host.boot()
        self._fired(spec, host.node_id, action="restarted", downMs=down_ms, **details)

    def _restart(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])
        if spec.params["in_flush_window"] and host.node is not None:
            interval = host.node.ledger.config.flush_interval_ms
            since = self.env.now - host.booted_at_ms
            next_flush = host.booted_at_ms + (since // interval + 1) * interval
            yield self.env.timeout(max(0.0, next_flush - 1.0 - self.env.now))
        yield from self._restart_with(spec, host, spec.params["down_ms"], dict)
        return None

    def _empty_directory(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])
        original = host.config

        def empty() -> dict[str, Any]:
            txn = host.store.begin()
            txn.put_document(ROSTER_DOCUMENT, None)
            txn.commit()
            host.config = replace(host.config, agents=())
            return {"roster": "empty"}

        yield from self._restart_with(spec, host, spec.params["down_ms"], empty)

        def heal() -> Any:
            host.config = original
            yield from self._restart_with(spec, host, spec.params["down_ms"], dict)
        return heal

    def _stale_roster(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])

        def switch() -> dict[str, Any]:
            host.config = replace(host.config, namespace=spec.params["namespace"],
                                  agents=spec.params["agents"])
            return {"namespace": spec.params["namespace"]}

        yield from self._restart_with(spec, host, spec.params["down_ms"], switch)
        return None

    def _broker_restart(self, spec: FaultSpec) -> Any:
        broker = self.cluster.broker
        broker.crash(spec.params["persistence"])
        self._fired(spec, action="broker crashed", persistence=spec.params["persistence"])
        yield self.env.timeout(spec.params["down_ms"])
        broker.start()
        self._fired(spec, action="broker started")
        return None

    def _partition(self, spec: FaultSpec) -> Any:
        hosts = [self._host(n) for n in spec.params["nodes"]]
        before = {h.node_id: h.link.lost for h in hosts}
        for h in hosts:
            h.link.up = False
        self.env.process(self._keepalive(spec, hosts))

        def heal() -> Any:
            for h in hosts:
                h.link.up = True
                lost = h.link.lost - before[h.node_id]
                if lost:
                    self._fired(spec, h.node_id, action="packets lost in the partition", lost=lost)
                h.resend_unacked()
                self.cluster.broker.resend_inflight(h.client_id)
        return heal

    def _keepalive(self, spec: FaultSpec, hosts: list[SimHost]) -> Generator[simpy.Event, Any, Any]:
        yield self.env.timeout(KEEPALIVE_DETECT_MS)
        for h in hosts:
            if not h.link.up and h.conn is not None:
                self._fired(spec, h.node_id, action="keepalive expired; connection dropped")
                h.drop_connection("keepalive timeout (partition)")

    def _latency(self, spec: FaultSpec) -> Any:
        return self._link_fault(spec, lambda s: replace(s, latency_ms=spec.params["latency_ms"]),
                                "packets")

    def _loss(self, spec: FaultSpec) -> Any:
        return self._link_fault(spec, lambda s: replace(s, loss=spec.params["probability"]),
                                "retransmissions")

    def _link_fault(self, spec: FaultSpec, change: Callable[[Any], Any], counter: str) -> Heal:
        hosts = [self._host(n) for n in spec.params["nodes"]]
        before = {h.node_id: getattr(h.link, counter) for h in hosts}
        for h in hosts:
            h.link.spec = change(h.link.spec)

        def heal() -> Any:
            for h in hosts:
                h.link.spec = h.link.base
                n = getattr(h.link, counter) - before[h.node_id]
                if n:
                    self._fired(spec, h.node_id, action=f"{counter} under the fault", count=n)
        return heal

    def _duplicate_client_id(self, spec: FaultSpec) -> Any:
        victim, impostor = self._host(spec.params["node"]), self._host(spec.params["impostor"])
        broker = self.cluster.broker
        takeovers = broker.stats["takeovers"]
        impostor.client_id_override = victim.client_id
        impostor.drop_connection("reconnecting with a duplicate client id")

        def heal() -> Any:
            n = broker.stats["takeovers"] - takeovers
            if n:
                self._fired(spec, impostor.node_id, action="session takeovers", count=n)
            impostor.client_id_override = None
            impostor.drop_connection("reconnecting with its own client id")
        return heal

    def _missing_reply_node(self, spec: FaultSpec) -> Any:
        host = self._host(spec.params["node"])
        rng = rng_for(self.seed, f"fault/{spec.index}")
        auth = host.config.auth

        def strip(topic: str, payload: bytes) -> bytes:
            env = decode(payload)
            if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST \
                    or env.header(Header.REPLY_NODE_ID) is None:
                return payload
            if rng.random() >= spec.params["probability"]:
                return payload
            self._fired(spec, host.node_id, messageId=env.message_id,
                        requestId=env.header(Header.REQUEST_ID))
            # the requester's own bug: signed without the header, as the sender would
            stripped = env.with_headers(**{Header.REPLY_NODE_ID.value: None})
            return encode(sign(stripped, auth.keys, host.node_id, auth.version))

        host.publish_filters.append(strip)

        def heal() -> Any:
            host.publish_filters.remove(strip)
        return heal

