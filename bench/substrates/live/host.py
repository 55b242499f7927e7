"""One live node: the reference core, its file store under the node's data dir, and one
MQTT connection — run on an asyncio loop. The same contract as the simulator's host:
a batch's Persist* commands are committed before its publishes leave, and a QoS1 message
is acknowledged only after the batch that handled it is durable.

Batches commit in groups: every batch the node handles in one turn of the loop goes into
one transaction, committed (one fsync, ~0.6 ms on this machine's disk) when the turn ends;
then each batch's commands are carried out, and each message acknowledged, in the order
they came. Alone, a batch waits for nothing more than it did; under load, many batches
share one fsync. A group of quiet batches only (state and its record, nothing sent: a
PUBACK's new outbound state) waits up to `QUIET_COMMIT_S` for a batch that sends something
and is committed with it. A crash before the commit loses the group — nothing of it was
published or acknowledged, so the broker redelivers what it handled. (Committing in a thread of its
own, so that the fsync blocked nothing, measured worse: 284 round trips/s against 385, the
thread's wake-ups and the GIL costing more than the overlap gave.)
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.core import events as ev
from bench.core.commands import (
    Command,
    Connect,
    NodeCore,
    PersistDocument,
    PersistRecord,
    Publish,
    Record,
    Subscribe,
)
from bench.core.config import NodeConfig
from bench.core.inputs import (
    ConnectionUp,
    MessageReceived,
    PublishSettled,
    Started,
    Stopping,
    Subscribed,
)
from bench.spec.brokers import CLIENT
from bench.spec.topology import MqttVersion
from bench.storage import Store, restore, stage
from bench.storage.files import FileStore, FileTransaction
from bench.substrates.host import NodeHost
from bench.substrates.live.mqtt import Delivery, MqttLink, Tls
from bench.workload import Behaviour

#: (node, event, when) -> None: where history events go; `when` is the node's clock at the
#: decision the event records (None: now).
Sink = Callable[[str, ev.Event, float | None], None]

#: The commands of a quiet batch: state made durable and recorded, nothing sent, armed or run.
QUIET = frozenset({Record, PersistDocument, PersistRecord})
#: How long a group of quiet batches waits for a batch that is not before it is committed:
#: what a crash meanwhile loses is what a crash just before their input would have (a
#: PUBACK's new state: the message is sent again after the restart, and its receiver's
#: ledger admits it once).
QUIET_COMMIT_S = 0.02


class Clock:
    """Milliseconds since the run's start, shared by every process of the run: the run's
    clock (`now_ms`, what records are stamped with and timers count) goes on from the wall
    clock's reading at `t0`'s setting by the monotonic clock, so a host's clock set forward
    or back mid-run (`date -s`, the host-clock fault) moves what the node reads as the time
    of day (`wall_ms`: what it signs, stamps and expires by) and not the order of the
    history."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.origin_ms = int(t0 * 1000)   # node clocks read wall time

    @property
    def t0(self) -> float:
        return self._t0

    @t0.setter
    def t0(self, t0: float) -> None:
        self._t0 = t0
        self._since = time.time() - t0 - time.monotonic()

    def now_ms(self) -> int:
        return int((time.monotonic() + self._since) * 1000)

    def wall_ms(self) -> int:
        """The host's time of day, since the run's start as it read then."""
        return int((time.time() - self._t0) * 1000)

    def at(self, ms: float) -> float:
        return self.t0 + ms / 1000


class LiveHost(NodeHost):
    #: the durable store a node keeps under its data dir
    store_class: type[FileStore] = FileStore

    def __init__(self, config: NodeConfig, node_class: Callable[[NodeConfig], NodeCore], data_dir: Path,
                 broker: tuple[str, int], sink: Sink, clock: Clock,
                 behaviour: Behaviour, login: tuple[str, str | None] | None = None,
                 tls: Tls | None = None, version: MqttVersion = MqttVersion.V311,
                 session_expiry_s: int = CLIENT.session_expiry_s) -> None:
        super().__init__(config, node_class, behaviour)
        self.version = version      # the MQTT version its clients speak
        self.session_expiry_s = session_expiry_s     # and, on 5, their sessions' expiry
        self.login = login          # an external broker's user and password
        self.tls = tls              # and TLS to it (mqtts://, or offered beside plain TCP)
        self.clock_origin_ms = clock.origin_ms
        self.data_dir = data_dir
        self.broker = broker
        self.sink = sink
        self.clock = clock
        self.loop = asyncio.get_event_loop()
        self.store: FileStore | None = None
        self.link: MqttLink | None = None
        self.extra: list[MqttLink] = []
        # (link, paho mid) -> the Publish awaiting its PUBACK (mids restart with each client)
        self._pending_mids: dict[tuple[int, int], Publish] = {}
        self._last_connect: Connect | None = None
        # the group commit: batches handled this turn of the loop, and what waits for them
        self._txn: FileTransaction | None = None
        self._soon = False     # the group's commit is due this turn, not after QUIET_COMMIT_S
        #: each batch with the node's clock when it was handled: its records are stamped
        #: with that, not with when the group's commit let them out (a loaded machine's
        #: fsync and loop made them late by more than the substrate promised)
        self._group: list[tuple[float, list[Command]] | Callable[[], None]] = []
        self._decided_ms: float | None = None
        self.groups = 0            # groups of batches (a benchmark reads batches per group)
        self.batches = 0
        self.commits = 0           # groups that wrote something, each a durable commit

    # -- what NodeHost asks of a substrate ---------------------------------------------------
    def clock_ms(self) -> float:
        return self.clock.now_ms()

    def wall_ms(self) -> float:
        return self.clock.wall_ms()

    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        self.loop.call_later(max(0.0, delay_ms / 1000), fn)

    def record(self, event: ev.Event) -> None:
        self.sink(self.node_id, event, self._decided_ms)

    # -- the group commit ------------------------------------------------------------------------
    def durably(self, store: Store, commands: list[Command]) -> None:
        """Stage the batch in the group; the group is committed once this turn of the loop is
        done — or, while every batch in it is quiet (it changes the node's state and says so,
        nothing more: a PUBACK's new outbound state), with the next batch that is not, or
        after `QUIET_COMMIT_S`. Nothing waits on a quiet batch: its fsync, alone, held up
        every node of the process on the path of an exchange (two of six per round trip)."""
        assert isinstance(store, FileStore)
        if self._txn is None:
            self._txn = store.begin()
            self._soon = False
            self.loop.call_later(QUIET_COMMIT_S, self._commit_group, self.epoch, self._txn)
        stage(self._txn, commands)
        self._group.append((self.clock_ms(), commands))
        self.batches += 1
        if not self._soon and any(type(cmd) not in QUIET for cmd in commands):
            self._commit_soon(self._txn)

    def _commit_soon(self, txn: FileTransaction) -> None:
        self._soon = True
        self.loop.call_soon(self._commit_group, self.epoch, txn)

    def after_durable(self, fn: Callable[[], None]) -> None:
        """Call `fn` once every batch handled so far is on disk (at once if it is)."""
        if self._txn is None:
            fn()
        else:
            self._group.append(fn)
            if not self._soon:
                self._commit_soon(self._txn)

    def _commit_group(self, epoch: int, txn: FileTransaction) -> None:
        if epoch != self.epoch or txn is not self._txn:
            return        # the process died first: nothing of the group reached the disk
        group, self._group, self._txn = self._group, [], None
        if txn.records or txn.documents:
            txn.commit()
            self.commits += 1
        self.groups += 1
        for item in group:
            if callable(item):
                item()
                continue
            self._decided_ms, commands = item
            try:
                for cmd in commands:
                    self.carry_out(cmd)
            finally:
                self._decided_ms = None

    # -- life -----------------------------------------------------------------------------------
    def boot(self) -> None:
        self.epoch += 1
        self.boots += 1
        self.booted_at_ms = self.clock_ms()
        self.store = self.store_class(self.data_dir)
        self.record(ev.SelfCheck("message store ready", str(self.store.db_path)))
        self.node = self.node_class(self.config)
        self.feed(Started(self.now_ms(), uuid.uuid4().hex[:12], restore(self.store)))

    def crash(self) -> None:
        """In-process crash: the node object, its timers, tasks and connection are gone (the
        broker sees the TCP connection drop and publishes the will); the files stay, without
        the group not yet committed."""
        self.forget_process()
        self._txn, self._group = None, []
        for link in [self.link, *self.extra]:
            if link is not None:
                link.kill()
        self.link = None
        self.extra.clear()
        self._pending_mids.clear()
        if self.store is not None:
            self.store.close()
            self.store = None

    async def stop(self) -> None:
        """A graceful stop: the node hears it is stopping, what it handled is committed and
        what it said leaves, then each connection ends with a DISCONNECT."""
        if self.node is not None:      # what it says on leaving goes out before the DISCONNECT
            self.feed(Stopping(self.now_ms()))
        if self._txn is not None:      # a graceful stop commits what it handled
            self._commit_group(self.epoch, self._txn)
        self.forget_process()
        for link in [self.link, *self.extra]:
            if link is not None:
                await link.leave()
        if self.store is not None:
            self.store.close()
            self.store = None

    # -- MQTT -----------------------------------------------------------------------------------
    def subscribe(self, cmd: Subscribe) -> None:
        if self.link is not None:
            self.link.subscribe(cmd.filters, cmd.qos)

    def unsubscribe(self, filters: tuple[str, ...]) -> None:
        if self.link is not None:
            self.link.client.unsubscribe(list(filters))

    def connect(self, cmd: Connect) -> None:
        self._last_connect = cmd
        epoch = self.epoch
        # the core may turn down the TLS it was given (a seeded defect does)
        tls = self.tls if cmd.tls else None
        host, port = tls.endpoint(self.broker) if tls else self.broker
        link = MqttLink(self.loop, host, port, self.client_id,
                        on_message=lambda d: self._on_message(link, epoch, d),
                        on_connected=lambda present: self._on_connected(link, epoch, present),
                        on_disconnected=lambda reason: self._on_disconnected(link, epoch, reason),
                        on_published=lambda mid, rc: self._on_published(link, mid, rc),
                        clean_session=cmd.clean_session, login=self.login, tls=tls,
                        version=self.version, session_expiry_s=self.session_expiry_s,
                        on_subscribed=lambda filters: self._on_subscribed(link, epoch, filters))
        self.link = link
        link.connect(cmd.will_topic, cmd.will_payload, cmd.will_retain, cmd.will_props,
                     cmd.will_delay_s)

    def _on_connected(self, link: MqttLink, epoch: int, present: bool) -> None:
        if epoch != self.epoch or link is not self.link:
            return
        self.mqtt_connected(link.client_id, present, link.keepalive_s,
                            broker=f"{self.broker[0]}:{self.broker[1]}",
                            session_expiry_s=link.session_expiry_s)
        self.feed(ConnectionUp(self.now_ms(), present))

    def _on_subscribed(self, link: MqttLink, epoch: int, filters: tuple[str, ...]) -> None:
        if epoch == self.epoch and link is self.link and filters:
            self.feed(Subscribed(self.now_ms(), filters))

    def _on_disconnected(self, link: MqttLink, epoch: int, reason: str) -> None:
        if epoch == self.epoch and link is self.link:
            self.record(ev.MqttDisconnected(link.client_id, reason))

    def _on_message(self, link: MqttLink, epoch: int, d: Delivery) -> None:
        if epoch != self.epoch or self.node is None:
            return  # a dead process acks nothing: the broker keeps it in flight
        if link in self.extra:
            self.second_delivery(link.client_id, d.topic)
        self.feed(MessageReceived(self.now_ms(), d.topic, d.payload, d.qos, d.dup, d.retain,
                                  d.mid, d.props))
        # only once the batch that handled it is on disk
        self.after_durable(lambda: link.ack(d.mid, d.qos))

    def _on_published(self, link: MqttLink, mid: int, reason_code: int | None) -> None:
        """The PUBACK (on MQTT 5 with its reason code: 0x80 and above is a refusal)."""
        cmd = self._pending_mids.pop((id(link), mid), None)
        if cmd is None or cmd.message_id is None:
            return
        self.acknowledged(cmd.message_id, reason_code)

    def publish(self, cmd: Publish) -> None:
        if self.refused(cmd):
            return
        if self.link is None:   # no client at all: the message did not go out, and says so
            self.record(ev.NodeWarning(ev.WarningKind.PUBLISH_WITHOUT_CONNECTION, topic=cmd.topic))
            self.send_failed(cmd, "publish without an MQTT connection")
            return
        payload = self.outgoing(cmd.topic, cmd.payload)
        mid = self.link.publish(cmd.topic, payload, cmd.qos, cmd.retain, cmd.props)
        if cmd.message_id is not None:
            if cmd.qos == 0:
                self.loop.call_soon(self._on_published_qos0, cmd.message_id)
            else:
                self._pending_mids[(id(self.link), mid)] = cmd

    def _on_published_qos0(self, message_id: str) -> None:
        self.feed(PublishSettled(self.now_ms(), message_id, True))

    def open_second_connection(self, client_id: str, filters: tuple[str, ...]) -> None:
        """A second MQTT connection in the same process (the double-subscription bug)."""
        epoch = self.epoch
        holder: list[MqttLink] = []

        def connected(_present: bool) -> None:
            if holder and epoch == self.epoch:
                holder[0].subscribe(filters, 1)
        host, port = self.tls.endpoint(self.broker) if self.tls else self.broker
        link = MqttLink(self.loop, host, port, client_id,
                        on_message=lambda d: self._on_message(link, epoch, d),
                        on_connected=connected, on_disconnected=lambda reason: None,
                        on_published=lambda mid, rc: None, login=self.login, tls=self.tls,
                        version=self.version)
        holder.append(link)
        self.extra.append(link)
        link.connect()

    def close_second_connection(self) -> None:
        for link in self.extra:
            link.close()
        self.extra.clear()

    def reconnect(self) -> None:
        """Close the connection and open a new one with the core's last Connect (e.g. under
        another client id, as the duplicate-client-id fault does)."""
        old, self.link = self.link, None
        if old is not None:
            old.close()
            # What the old client had not got acknowledged stays SENDING in the outbox: the
            # broker may or may not have it (INFO), so neither PUBLISHED nor FAILED is true.
            for key in [k for k in self._pending_mids if k[0] == id(old)]:
                del self._pending_mids[key]
        if self.node is not None and self._last_connect is not None:
            self.connect(self._last_connect)
