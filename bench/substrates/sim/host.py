"""One simulated node process: a reference core, its durable store (memory, with the
crash model), and its MQTT connection(s) to the simulated broker.

It carries out the core's commands the way the live host does: Persist first (one
transaction per batch), QoS1 acknowledged only after the batch that handled the message
is durable, publishes queued while the connection is down and resent (DUP) after a
reconnect, re-subscription left to the core on every ConnectionUp.

Its MQTT client keeps time the way paho does with the settings the live nodes use
(`bench.spec.brokers.CLIENT`): a silent connection is declared dead at the keepalive
check (a PINGREQ after one keepalive, the close after another), an unanswered CONNECT
after one keepalive, and reconnect attempts wait 1 s, then 2 s, as paho's backoff does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core import events as ev
from bench.core.commands import Connect, NodeCore, Publish, Subscribe
from bench.core.config import NodeConfig
from bench.core.frozen import replace
from bench.core.inputs import (
    ConnectionUp,
    Input,
    MessageReceived,
    Started,
    Stopping,
    Subscribed,
)
from bench.faults.primitives import Tampering
from bench.spec.brokers import CLIENT
from bench.spec.topology import MqttVersion
from bench.storage import restore
from bench.storage.memory import MemoryStore
from bench.substrates.host import NodeHost
from bench.substrates.sim.broker import Connection, Message
from bench.substrates.sim.link import Link
from bench.substrates.sim.timers import Lane

if TYPE_CHECKING:
    from bench.substrates.sim.deployment import SimDeployment


@dataclass
class _Pending:
    """A QoS1 publish the broker has not acknowledged yet (resent on reconnect)."""

    cmd: Publish
    payload: bytes


class SimHost(NodeHost):
    def __init__(self, deployment: SimDeployment, config: NodeConfig, node_class: Callable[[NodeConfig], NodeCore],
                 link: Link) -> None:
        super().__init__(config, node_class, deployment.behaviour)
        self.clock_origin_ms = deployment.clock_origin_ms
        self.deployment = deployment
        self.env = deployment.env
        self.link = link
        self.store: MemoryStore = MemoryStore()
        self.conn: Connection | None = None
        self.extra: list[Connection] = []      # double_subscription's second connection
        self.will: Message | None = None
        self.will_delay_s = 0               # MQTT 5: the will's delay, as the core's Connect asked
        self.clean_session = False          # as the core's last Connect asked
        self._offline: list[Publish] = []
        self._attempts = 0                 # reconnect attempts since the last CONNACK
        #: the pause fault: the process is frozen, and what would have run waits for the thaw
        self.frozen = False
        self.freezes = 0
        self._held: list[Callable[[], None]] = []
        self._unacked: dict[int, _Pending] = {}
        #: the epoch of a process that stopped gracefully: what it sent still arrives
        self._left_epoch: int | None = None
        # link-side faults acting on this node's client (the fault proxy's, live)
        self.withhold_puback = False
        self.pubacks_withheld = 0
        self.duplicate_publish = 0.0
        self.publishes_duplicated = 0
        self.duplicate_rng: Any = None
        #: puback_refused: (share of QoS1 publishes, the PUBACK's reason code), or None
        self.refuse_publish: tuple[float, int] | None = None
        self.refuse_rng: Any = None
        self.publishes_refused = 0
        #: property_tampering faults acting on its link, by fault index
        self.tampering: dict[int, Tampering] = {}

    # -- what NodeHost asks of a substrate ---------------------------------------------------
    def clock_ms(self) -> float:
        return self.env.now

    def call_later(self, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        self.env.later(delay_ms, self._unless_frozen, fn, args)

    def call_later_in(self, lane: Lane, delay_ms: float, fn: Callable[..., None],
                      *args: Any) -> None:
        """`call_later` for a packet of a connection's `lane` (its order kept: `Lane`)."""
        self.env.later_in(lane, delay_ms, self._unless_frozen, fn, args)

    def _unless_frozen(self, fn: Callable[..., None], args: tuple[Any, ...] = ()) -> None:
        """A frozen process runs nothing — timers, client threads, arriving packets — until
        it is thawed; then it runs what waited, in order (the kernel kept the bytes)."""
        if self.frozen:
            self._held.append(functools.partial(fn, *args) if args else fn)
        else:
            fn(*args)

    def feed(self, event: Input) -> None:
        if self.frozen:
            # the process reads its clock when it gets to the input, after the thaw (a node
            # handed a request while frozen arms its watchdog from then, not from before)
            self._held.append(lambda: NodeHost.feed(self, replace(event, now_ms=self.now_ms())))
        else:
            super().feed(event)

    def freeze(self) -> None:
        self.frozen = True
        self.freezes += 1

    def thaw(self) -> None:
        self.frozen = False
        held, self._held = self._held, []
        for fn in held:
            if self.frozen:          # frozen again by something that ran: keep the rest
                self._held.append(fn)
            else:
                fn()

    def record(self, event: ev.Event) -> None:
        self.deployment.log.record(self.node_id, event)   # as deployment.record, a call less

    # -- life ---------------------------------------------------------------------------------
    def boot(self) -> None:
        self.epoch += 1
        self.boots += 1
        self.node = self.node_class(self.config)
        self.booted_at_ms = self.env.now
        self.feed(Started(self.now_ms(), f"b{self.boots}", restore(self.store)))

    def crash(self) -> int:
        """Kill the process: memory, timers, client queues and connections are gone; the
        store keeps what was committed. Returns how many store writes were lost."""
        self.frozen = False
        self._held.clear()
        self.forget_process()
        self.crashed_at_ms = self.env.now
        self._offline.clear()
        self._unacked.clear()
        for conn in [self.conn, *self.extra]:
            if conn is not None:
                self.deployment.broker.disconnect(conn, graceful=False)
        self.conn = None
        self.extra.clear()
        return self.store.crash().lost

    def stop(self) -> None:
        """A graceful stop (SIGTERM), as the live host's: the node hears it is stopping and
        what it says then is sent; each connection ends with a DISCONNECT sent after it (the
        broker publishes no will); the store keeps all it committed. What the process wrote
        to its sockets still reaches the broker; nothing reaches the process any more."""
        self.frozen = False
        self._held.clear()
        if self.node is not None:
            self.feed(Stopping(self.now_ms()))
        for conn in [self.conn, *self.extra]:
            if conn is not None and conn.alive:
                self._packet(conn, "up", functools.partial(
                    self.deployment.broker.disconnect, conn, graceful=True), self.epoch)
        self._left_epoch = self.epoch
        self.forget_process()
        self.crashed_at_ms = self.env.now
        self._offline.clear()
        self._unacked.clear()
        self.conn = None
        self.extra.clear()

    def _sent_by(self, epoch: int) -> bool:
        """Whether a packet this host sent up under `epoch` still arrives: the process that
        sent it runs, or left gracefully (the kernel sends what it wrote before closing)."""
        return epoch == self.epoch or epoch == self._left_epoch

    # -- MQTT client ----------------------------------------------------------------------------
    def connect(self, cmd: Connect) -> None:
        v5 = self.deployment.scenario.mqtt is MqttVersion.V5
        self.will = None if cmd.will_topic is None else Message(
            cmd.will_topic, cmd.will_payload, 1, cmd.will_retain, cmd.will_props if v5 else None)
        self.will_delay_s = cmd.will_delay_s if v5 else 0
        self._connect(cmd.clean_session)

    def subscribe(self, cmd: Subscribe) -> None:
        if self.conn is not None:
            self._subscribe(self.conn, cmd.filters, cmd.qos)

    def unsubscribe(self, filters: tuple[str, ...]) -> None:
        conn = self.conn
        if conn is not None:
            self._after_transit(conn, lambda: self.deployment.broker.unsubscribe(conn, filters))

    def _subscribe(self, conn: Connection, filters: tuple[str, ...], qos: int) -> None:
        def at_broker() -> None:
            self.deployment.broker.subscribe(conn, filters, qos)
            if conn.alive:   # SUBACK travels back; then the node knows it is routable
                self._after_transit(conn, lambda: self._suback(conn, filters))
        self._after_transit(conn, at_broker)

    def _suback(self, conn: Connection, filters: tuple[str, ...]) -> None:
        if conn is self.conn and conn.alive:
            self.feed(Subscribed(self.now_ms(), filters))

    def _connect(self, clean: bool) -> None:
        self.clean_session = clean
        v5 = self.deployment.scenario.mqtt is MqttVersion.V5
        conn = Connection(self.client_id, self, self.link, clean, self.will, "primary",
                          owner=self.node_id,
                          session_expiry_s=(0 if clean else self.deployment.scenario.session_expiry_s)
                          if v5 else None, will_delay_s=self.will_delay_s)
        self.conn = conn
        self._after_transit(conn, lambda: self._connected(conn), round_trip=True)

    def _connected(self, conn: Connection) -> None:
        if conn is not self.conn or not conn.alive:
            return
        present = self.deployment.broker.connect(conn)
        if not conn.alive:
            return  # refused (broker down): on_connection_lost scheduled a retry
        self._attempts = 0
        conn.last_in_ms = self.env.now
        self.mqtt_connected(conn.client_id, present, CLIENT.keepalive_s,
                            session_expiry_s=conn.session_expiry_s)
        # as paho does: what was in flight (with DUP) and what was queued goes out at the
        # CONNACK, before the node hears of the connection and subscribes again
        for pending in list(self._unacked.values()):
            self._send(pending.cmd, pending.payload)
        queued, self._offline = self._offline, []
        for cmd in queued:
            self.publish(cmd)
        self.feed(ConnectionUp(self.now_ms(), present))

    def on_connection_lost(self, conn: Connection, reason: str) -> None:
        if self.frozen:
            self._held.append(lambda: self.on_connection_lost(conn, reason))
            return
        if conn in self.extra:
            self.extra.remove(conn)
            return
        if conn is not self.conn:
            return
        self.conn = None
        self.record(ev.MqttDisconnected(conn.client_id, reason))
        epoch = self.epoch
        self._attempts += 1

        def reconnect() -> None:
            if epoch == self.epoch and self.conn is None and self.node is not None:
                self._connect(clean=self.clean_session)
        self.call_later(CLIENT.backoff_s(self._attempts) * 1000.0, reconnect)

    def reconnect(self) -> None:
        """Close the connection cleanly (DISCONNECT: no will) and open a new one at once
        with the core's last Connect (under another client id, for the duplicate-client-id
        fault), as the live host does: what the old client had in flight or queued goes
        with it."""
        conn = self.conn
        self.conn = None
        self._unacked.clear()
        self._offline.clear()
        if conn is not None:
            self.deployment.broker.disconnect(conn, graceful=True)
        if self.node is not None:
            self._connect(self.clean_session)

    def open_second_connection(self, client_id: str, filters: tuple[str, ...]) -> None:
        """A second MQTT connection in the same process (the double-subscription bug)."""
        conn = Connection(client_id, self, self.link, False, None, "second", owner=self.node_id)
        self.extra.append(conn)

        def up() -> None:
            if conn.alive:
                self.deployment.broker.connect(conn)
                self.deployment.broker.subscribe(conn, filters, 1)
        self._after_transit(conn, up, round_trip=True)

    def close_second_connection(self) -> None:
        for conn in list(self.extra):
            self.deployment.broker.disconnect(conn, graceful=True)
            if conn in self.extra:
                self.extra.remove(conn)

    def _after_transit(self, conn: Connection, action: Callable[[], None],
                       round_trip: bool = False) -> None:
        epoch = self.epoch
        then = functools.partial(self._packet, conn, "down", action, epoch) if round_trip \
            else action
        self._packet(conn, "up", then, epoch)

    def _packet(self, conn: Connection, direction: str, then: Callable[[], None],
                epoch: int) -> None:
        """One packet of `conn` sent `direction`; `then` runs when it arrives, unless the
        process restarted meanwhile."""
        if direction == "up":
            conn.last_out_ms = self.env.now   # written to the socket, arriving or not
        delay = conn.transit_ms(self.env.now, direction)
        if delay is None:
            if conn is self.conn:
                self._lose(conn)
            return
        self.call_later_in(conn.up_lane if direction == "up" else conn.down_lane, delay,
                           self._packet_arrived, conn, direction, then, epoch)

    def _packet_arrived(self, conn: Connection, direction: str, then: Callable[[], None],
                        epoch: int) -> None:
        if epoch == self.epoch:
            if direction == "down":
                conn.last_in_ms = self.env.now
            then()
        elif direction == "up" and self._sent_by(epoch):
            then()

    def _lose(self, conn: Connection) -> None:
        """A packet of `conn` was lost: over a link that is up, TCP gave up on it and the
        connection is dead at once; over a partition nothing says so, and the client finds
        out at its keepalive check."""
        if self.link.up:
            self.drop_connection("connection lost: TCP gave up retransmitting")
        elif self.link.unplugged and not conn.established:
            conn.alive = False     # no route: the connect fails at once (ENETUNREACH)
            self.on_connection_lost(conn, "network unreachable (unplugged)")
        else:
            self.watch(conn)

    def watch(self, conn: Connection | None = None) -> None:
        """The link went silent: time the client's keepalive (once per connection). An
        unanswered CONNECT is given up after one keepalive; an established connection at
        paho's keepalive check. Closing it sends nothing across a partition both ways: the
        broker finds out on its own, or at the heal. Cut one way only: a client that still
        hears the broker (its own packets lost) is never found quiet by paho's check while
        it does, and a client whose packets still arrive is heard closing (no DISCONNECT:
        its will)."""
        conn = conn or self.conn
        if conn is None or conn.watched:
            return
        conn.watched = True
        epoch, now, heard = self.epoch, self.env.now, conn.last_in_ms
        at = CLIENT.notice_ms(now, conn.last_in_ms, conn.last_out_ms) if conn.established \
            else max(now, conn.last_out_ms + CLIENT.connect_timeout_ms())

        def notice() -> None:
            conn.watched = False
            if epoch != self.epoch or conn is not self.conn:
                return
            if self.link.up:
                return   # healed meanwhile: the heal decided the connection's fate
            if conn.established and conn.last_in_ms > heard:
                self.watch(conn)     # the broker was heard meanwhile: not quiet
                return
            self.on_connection_lost(conn, "keepalive timeout (partition)" if conn.established
                                    else "CONNECT unanswered (partition)")
            if conn.established and "up" not in self.link.blocked:
                broker = self.deployment.broker
                self._after_transit(conn, lambda: broker.disconnect(conn, graceful=False))
        self.call_later(at - now, notice)

    def cut(self, reason: str) -> None:
        """Every connection of this client reset at once (the fault proxy's heal): the
        broker publishes the wills of those it still had; the client reconnects."""
        self.deployment.broker.cut(self)
        self.extra = [c for c in self.extra if c.alive]
        conn = self.conn
        if conn is not None:
            conn.alive = False
            self.on_connection_lost(conn, reason)

    def drop_connection(self, reason: str) -> None:
        """The connection is declared dead (keepalive) or closed to reconnect elsewhere."""
        conn = self.conn
        if conn is not None and conn.alive:
            self.deployment.broker.disconnect(conn, graceful=False)
            self.on_connection_lost(conn, reason)

    def publish(self, cmd: Publish) -> None:
        if self.refused(cmd):
            return
        payload = self.outgoing(cmd.topic, cmd.payload)
        conn = self.conn
        if conn is None or not conn.alive or not conn.established:
            self._offline.append(cmd)   # held until CONNACK, as a real client holds it
            return
        self._send(cmd, payload)

    def _send(self, cmd: Publish, payload: bytes) -> None:
        conn = self.conn
        if conn is None or not conn.alive or not conn.established:
            if id(cmd) not in self._unacked:   # an unacknowledged one is resent from there
                self._offline.append(cmd)
            return
        key = id(cmd)
        if cmd.qos >= 1:
            self._unacked[key] = _Pending(cmd, payload)
        # a 3.1.1 client has no properties to send
        msg = Message(cmd.topic, payload, cmd.qos, cmd.retain,
                      cmd.props if conn.session_expiry_s is not None else None)
        for tampering in self.tampering.values():
            # property_tampering, on the node's side of the link (where the live proxy is)
            if msg.props is not None and (tampered := tampering.act(msg.props)) is not None:
                msg = replace(msg, props=tampered)
        conn.last_out_ms = self.env.now
        there = conn.transit_ms(self.env.now, "up")
        if there is None:
            self._lose(conn)
            return  # stays unacked; resent after the reconnect
        epoch = self.epoch
        self.env.later_in(conn.up_lane, there, self._at_broker, conn, cmd, key, msg, epoch)

    def _at_broker(self, conn: Connection, cmd: Publish, key: int, msg: Message,
                   epoch: int) -> None:
        broker = self.deployment.broker
        if not self._sent_by(epoch) or not conn.alive or not broker.up:
            return
        refuse = self.refuse_publish
        if refuse is not None and cmd.qos >= 1 and self.refuse_rng.random() < refuse[0]:
            # puback_refused, on the node's side of the link (where the live proxy is): not
            # routed, and acknowledged with a failure reason code
            self.publishes_refused += 1
            code: int | None = refuse[1]
        elif cmd.qos >= 1 and conn.session_expiry_s is not None \
                and (refused := broker.refusal(msg)) is not None:
            code = refused      # the broker's own refusal (MQTT 5)
        else:
            matched = broker.publish(msg)
            # MQTT 5 §3.4.2.1: 0x10 "No matching subscribers" (if the broker's row says
            # it does; it may say 0x00), else 0x00 Success
            v5 = broker.behaviour.v5
            code = None if conn.session_expiry_s is None else \
                0x00 if matched or v5 is None else v5.no_subscribers_reason
        back = conn.transit_ms(self.env.now, "down")
        if back is None:
            return  # PUBACK lost with the link: resent after the reconnect (a duplicate)
        self.env.now_later(back, lambda: self._puback(conn, cmd, key, epoch, code))

    def _puback(self, conn: Connection, cmd: Publish, key: int, epoch: int,
                reason_code: int | None = None) -> None:
        if epoch != self.epoch or not conn.alive:
            return  # no PUBACK on a closed connection: resent after the reconnect
        conn.last_in_ms = self.env.now
        if cmd.qos >= 1 and self._unacked.pop(key, None) is None:
            return  # already acknowledged through an earlier copy
        if cmd.message_id is not None:
            self.acknowledged(cmd.message_id, reason_code)

    def on_deliver(self, conn: Connection, msg: Message, pid: int, dup: bool) -> None:
        if self.frozen:
            self._held.append(lambda: self.on_deliver(conn, msg, pid, dup))
            return
        if self.node is None:
            return  # the process is dead; the broker keeps it in flight
        conn.last_in_ms = self.env.now
        if conn.label != "primary":
            self.second_delivery(conn.label, msg.topic)
        copies = 1
        if self.duplicate_publish and self.duplicate_rng.random() < self.duplicate_publish:
            self.publishes_duplicated += 1
            copies = 2   # the same PUBLISH, same packet id, handed to the client twice
        for _ in range(copies):
            self.feed(MessageReceived(self.now_ms(), msg.topic, msg.payload, msg.qos, dup,
                                      msg.retain, pid, msg.props))
        if msg.qos < 1:
            return
        if self.withhold_puback:
            self.pubacks_withheld += 1
            return   # acknowledged, but the PUBACK never reaches the broker
        # acknowledged only now: the batch that handled it is durable
        self._after_transit(conn, functools.partial(self.deployment.broker.puback, conn, pid))
