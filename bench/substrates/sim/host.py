"""One simulated node process: a reference core, its durable store (memory, with the
crash model), and its MQTT connection(s) to the simulated broker.

It carries out the core's commands the way the live driver will: Persist first (one
transaction per batch), QoS1 acknowledged only after the batch that handled the message
is durable, publishes queued while the connection is down and resent (DUP) after a
reconnect, re-subscription left to the core on every Connected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bench.core.commands import (
    AskHuman,
    Connect,
    Execute,
    Publish,
    RunStep,
    SettleRequest,
    Subscribe,
)
from bench.core.config import NodeConfig
from bench.core.inputs import (
    Connected,
    Input,
    MessageReceived,
    PublishSettled,
    Started,
    Subscribed,
    TimerFired,
    TimerId,
)
from bench.core.node import Node
from bench.storage import restore
from bench.storage.memory import MemoryStore
from bench.substrates.host import NodeHost
from bench.substrates.sim.broker import Connection, Message
from bench.substrates.sim.link import Link

if TYPE_CHECKING:
    from bench.substrates.sim.cluster import SimCluster

#: Rewrites what the node publishes (a fault acting on the client side); returns bytes.
PublishFilter = Callable[[str, bytes], bytes]

RECONNECT_BACKOFF_MS = 1_000.0
KEEPALIVE_DETECT_MS = 15_000.0  # 1.5 x a 10 s keepalive: how long until a dead link is noticed


@dataclass
class _Pending:
    """A QoS1 publish the broker has not acknowledged yet (resent on reconnect)."""

    cmd: Publish
    payload: bytes


class SimHost(NodeHost):
    def __init__(self, cluster: SimCluster, config: NodeConfig, node_class: type[Node],
                 link: Link) -> None:
        self.cluster = cluster
        self.env = cluster.env
        self.config = config
        self.node_class = node_class
        self.link = link
        self.store: MemoryStore = MemoryStore()
        self.node: Node | None = None
        self.epoch = 0
        self.boots = 0
        self.conn: Connection | None = None
        self.extra: list[Connection] = []      # double_subscription's second connection
        self.client_id_override: str | None = None
        self.will: Message | None = None
        self.clean_session = False          # as the core's last Connect asked
        self._armed: dict[TimerId, int] = {}
        self._tick = 0
        self._offline: list[Publish] = []
        self._unacked: dict[int, _Pending] = {}
        self._pub_ids = 0
        self.publish_filters: list[PublishFilter] = []
        self.booted_at_ms = 0.0
        self.second_connection_fault: int | None = None  # index of the fault that added it
        self.skew_ms = 0.0                   # clock_skew: how far the node's clock is off

    @property
    def node_id(self) -> str:
        return self.config.node_id

    @property
    def now_ms(self) -> int:
        """The node's clock: virtual time, plus the clock_skew fault's offset if any."""
        return int(self.env.now + self.skew_ms)

    # -- life ---------------------------------------------------------------------------------
    def boot(self) -> None:
        self.epoch += 1
        self.boots += 1
        self.node = self.node_class(self.config)
        self.booted_at_ms = self.env.now
        self.feed(Started(self.now_ms, f"b{self.boots}", restore(self.store)))

    def crash(self) -> int:
        """Kill the process: memory, timers, client queues and connections are gone; the
        store keeps what was committed. Returns how many store writes were lost."""
        self.epoch += 1
        self.node = None
        self._armed.clear()
        self._offline.clear()
        self._unacked.clear()
        for conn in [self.conn, *self.extra]:
            if conn is not None:
                self.cluster.broker.disconnect(conn, graceful=False)
        self.conn = None
        self.extra.clear()
        return self.store.crash().lost

    # -- what the driver contract (bench.substrates.host.NodeHost) asks of a host -----------------------
    def record(self, kind: str, fields: dict[str, Any]) -> None:
        self.cluster.record(self.node_id, kind, fields)

    def connect(self, cmd: Connect) -> None:
        self.will = Message(cmd.will_topic, cmd.will_payload, 1, cmd.will_retain)
        self._connect(cmd.clean_session)

    def subscribe(self, cmd: Subscribe) -> None:
        if self.conn is not None:
            self._subscribe(self.conn, cmd.filters, cmd.qos)

    def cancel_timer(self, timer: TimerId) -> None:
        self._armed.pop(timer, None)

    def execute(self, cmd: Execute) -> None:
        self.cluster.on_execute(self, cmd)

    def run_step(self, cmd: RunStep) -> None:
        self.cluster.on_run_step(self, cmd)

    def ask_human(self, cmd: AskHuman) -> None:
        self.cluster.on_ask_human(self, cmd)

    def settle(self, cmd: SettleRequest) -> None:
        self.cluster.on_settle(self, cmd)

    def _subscribe(self, conn: Connection, filters: tuple[str, ...], qos: int) -> None:
        def at_broker() -> None:
            self.cluster.broker.subscribe(conn, filters, qos)
            if conn.alive:   # SUBACK travels back; then the node knows it is routable
                self._after_transit(conn, lambda: self._suback(conn, filters))
        self._after_transit(conn, at_broker)

    def _suback(self, conn: Connection, filters: tuple[str, ...]) -> None:
        if conn is self.conn and conn.alive:
            self.feed(Subscribed(self.now_ms, filters))

    # -- timers ---------------------------------------------------------------------------------
    def start_timer(self, timer: TimerId, at_ms: int) -> None:
        self._tick += 1
        token = self._tick
        self._armed[timer] = token
        self.env.process(self._timer(timer, token, self.epoch, max(0.0, at_ms - self.now_ms)))

    def _timer(self, timer: TimerId, token: int, epoch: int, delay: float):  # type: ignore[no-untyped-def]
        yield self.env.timeout(delay)
        if epoch == self.epoch and self._armed.get(timer) == token:
            del self._armed[timer]
            self.feed(TimerFired(self.now_ms, timer))

    def later(self, delay_ms: float, event_factory: Callable[[], Input]) -> None:
        """Feed an input after a delay, unless the process died in between."""
        self.env.process(self._later(delay_ms, self.epoch, event_factory))

    def _later(self, delay: float, epoch: int, factory: Callable[[], Input]):  # type: ignore[no-untyped-def]
        yield self.env.timeout(delay)
        if epoch == self.epoch:
            self.feed(factory())

    # -- MQTT client ----------------------------------------------------------------------------
    @property
    def client_id(self) -> str:
        return self.client_id_override or self.config.effective_client_id

    def _connect(self, clean: bool) -> None:
        self.clean_session = clean
        conn = Connection(self.client_id, self, self.link, clean, self.will, "primary")
        self.conn = conn
        self._after_transit(conn, lambda: self._connected(conn), round_trip=True)

    def _connected(self, conn: Connection) -> None:
        if conn is not self.conn or not conn.alive:
            return
        present = self.cluster.broker.connect(conn)
        if not conn.alive:
            return  # refused (broker down): on_connection_lost scheduled a retry
        self.cluster.record(self.node_id, "mqtt_connected", {"clientId": conn.client_id,
                                                             "sessionPresent": present})
        self.feed(Connected(self.now_ms, present))
        for pending in list(self._unacked.values()):   # resend unacknowledged, with DUP
            self._send(pending.cmd, pending.payload)
        queued, self._offline = self._offline, []
        for cmd in queued:
            self.publish(cmd)

    def on_connection_lost(self, conn: Connection, reason: str) -> None:
        if conn in self.extra:
            self.extra.remove(conn)
            return
        if conn is not self.conn:
            return
        self.conn = None
        self.cluster.record(self.node_id, "mqtt_disconnected", {"clientId": conn.client_id,
                                                                "reason": reason})
        self.env.process(self._reconnect(self.epoch))

    def _reconnect(self, epoch: int):  # type: ignore[no-untyped-def]
        yield self.env.timeout(RECONNECT_BACKOFF_MS)
        if epoch == self.epoch and self.conn is None and self.node is not None:
            self._connect(clean=self.clean_session)

    def add_connection(self, label: str, client_id: str, filters: tuple[str, ...]) -> Connection:
        """A second MQTT connection in the same process (the double-subscription bug)."""
        conn = Connection(client_id, self, self.link, False, None, label)
        self.extra.append(conn)

        def up() -> None:
            if conn.alive:
                self.cluster.broker.connect(conn)
                self.cluster.broker.subscribe(conn, filters, 1)
        self._after_transit(conn, up, round_trip=True)
        return conn

    def _after_transit(self, conn: Connection, action: Callable[[], None], round_trip: bool = False) -> None:
        delay = conn.link.transit_ms()
        if delay is None:
            if conn.alive and conn is self.conn:
                self._lose(conn, "link down")
            return
        if round_trip:
            back = conn.link.transit_ms()
            if back is None:
                if conn.alive and conn is self.conn:
                    self._lose(conn, "link down")
                return
            delay += back
        self.env.process(self._run_after(delay, self.epoch, action))

    def _run_after(self, delay: float, epoch: int, action: Callable[[], None]):  # type: ignore[no-untyped-def]
        yield self.env.timeout(delay)
        if epoch == self.epoch:
            action()

    def _lose(self, conn: Connection, reason: str) -> None:
        """The client notices a dead connection (keepalive) and drops it."""
        def notice() -> None:
            if conn.alive:
                self.cluster.broker.disconnect(conn, graceful=False)
                self.on_connection_lost(conn, reason)
        self.env.process(self._run_after(KEEPALIVE_DETECT_MS, self.epoch, notice))

    def resend_unacked(self) -> None:
        """After a partition heals on a live TCP connection, what was lost is resent."""
        for pending in list(self._unacked.values()):
            self._send(pending.cmd, pending.payload)

    def drop_connection(self, reason: str) -> None:
        """The connection is declared dead (keepalive) or closed to reconnect elsewhere."""
        conn = self.conn
        if conn is not None and conn.alive:
            self.cluster.broker.disconnect(conn, graceful=False)
            self.on_connection_lost(conn, reason)

    def publish(self, cmd: Publish) -> None:
        payload = cmd.payload
        for f in self.publish_filters:
            payload = f(cmd.topic, payload)
        conn = self.conn
        if conn is None or not conn.alive:
            self._offline.append(cmd)
            return
        self._send(cmd, payload)

    def _send(self, cmd: Publish, payload: bytes) -> None:
        conn = self.conn
        if conn is None or not conn.alive:
            self._offline.append(cmd)
            return
        key = id(cmd)
        if cmd.qos >= 1:
            self._unacked[key] = _Pending(cmd, payload)
        msg = Message(cmd.topic, payload, cmd.qos, cmd.retain)
        there = conn.link.transit_ms()
        if there is None:
            self._lose(conn, "link down")
            return  # stays unacked; resent after the reconnect
        back = conn.link.transit_ms()
        self.env.process(self._deliver_publish(conn, cmd, key, msg, there, back))

    def _deliver_publish(self, conn: Connection, cmd: Publish, key: int, msg: Message,  # type: ignore[no-untyped-def]
                         there: float, back: float | None):
        epoch = self.epoch
        yield self.env.timeout(there)
        if epoch != self.epoch or not conn.alive or not self.cluster.broker.up:
            return
        self.cluster.broker.publish(msg)
        if back is None:
            return  # PUBACK lost with the link: resent after the reconnect (a duplicate)
        yield self.env.timeout(back)
        if epoch != self.epoch:
            return
        if cmd.qos >= 1 and self._unacked.pop(key, None) is None:
            return  # already acknowledged through an earlier copy
        if cmd.message_id is not None:
            self.feed(PublishSettled(self.now_ms, cmd.message_id, True))

    def on_deliver(self, conn: Connection, msg: Message, pid: int, dup: bool) -> None:
        if self.node is None:
            return  # the process is dead; the broker keeps it in flight
        if conn.label != "primary":
            self.cluster.record(self.node_id, "fault_fired", {
                "fault": "double_subscription", "faultIndex": self.second_connection_fault,
                "connection": conn.label, "topic": msg.topic})
        self.feed(MessageReceived(self.now_ms, msg.topic, msg.payload))
        if msg.qos >= 1:   # acknowledged only now: the batch that handled it is durable
            self._after_transit(conn, lambda: self.cluster.broker.puback(conn, pid))
