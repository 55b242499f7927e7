"""One live node: the reference core, its file store under the node's data dir, and one
MQTT connection — run on an asyncio loop. The same contract as the simulator's host:
a batch's Persist* commands are committed before its publishes leave, and a QoS1 message
is acknowledged only after the batch that handled it is durable.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    FlowEmitted,
    HumanDecided,
    MessageReceived,
    PublishSettled,
    Started,
    StepFinished,
    Subscribed,
    TaskFinished,
    TimerFired,
    TimerId,
)
from bench.core.node import Node
from bench.storage import restore
from bench.storage.files import FileStore
from bench.substrates.host import NodeHost
from bench.substrates.live.mqtt import MqttLink
from bench.workload import Behaviour

#: (node, kind, fields) -> None: where history events go.
Sink = Callable[[str, str, dict[str, Any]], None]
PublishFilter = Callable[[str, bytes], bytes]


class Clock:
    """Milliseconds since the run's start, shared by every process of the run."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0

    def now_ms(self) -> int:
        return int((time.time() - self.t0) * 1000)

    def at(self, ms: float) -> float:
        return self.t0 + ms / 1000


class LiveHost(NodeHost):
    def __init__(self, config: NodeConfig, node_class: type[Node], data_dir: Path,
                 broker: tuple[str, int], sink: Sink, clock: Clock,
                 behaviour: Behaviour) -> None:
        self.config = config
        self.node_class = node_class
        self.data_dir = data_dir
        self.broker = broker
        self.sink = sink
        self.clock = clock
        self.behaviour = behaviour
        self.loop = asyncio.get_event_loop()
        self.node: Node | None = None
        self.store: FileStore | None = None
        self.link: MqttLink | None = None
        self.extra: list[MqttLink] = []
        self.epoch = 0
        self._timers: dict[TimerId, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._pending_mids: dict[int, str] = {}       # paho mid -> messageId awaiting PUBACK
        self.publish_filters: list[PublishFilter] = []
        self.client_id_override: str | None = None
        self._last_connect: Connect | None = None
        self.on_settle: Callable[[str, str], None] = lambda rid, outcome: None
        self.skew_ms = 0.0                   # clock_skew: how far the node's clock is off

    @property
    def node_id(self) -> str:
        return self.config.node_id

    def now_ms(self) -> int:
        """The node's clock: the run's, plus the clock_skew fault's offset if any."""
        return self.clock.now_ms() + int(self.skew_ms)

    @property
    def client_id(self) -> str:
        return self.client_id_override or self.config.effective_client_id

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        self.sink(self.node_id, kind, fields)

    # -- life -----------------------------------------------------------------------------------
    def boot(self) -> None:
        self.epoch += 1
        self.store = FileStore(self.data_dir)
        self.record("self_check", {"line": "message store ready", "store": str(self.store.db_path)})
        self.node = self.node_class(self.config)
        self.feed(Started(self.now_ms(), uuid.uuid4().hex[:12], restore(self.store)))

    def crash(self) -> None:
        """In-process crash: the node object, its timers, tasks and connection are gone (the
        broker sees the TCP connection drop and publishes the will); the files stay."""
        self.epoch += 1
        self.node = None
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        for link in [self.link, *self.extra]:
            if link is not None:
                link.kill()
        self.link = None
        self.extra.clear()
        self._pending_mids.clear()
        if self.store is not None:
            self.store.close()
            self.store = None

    def stop(self) -> None:
        self.epoch += 1
        for handle in self._timers.values():
            handle.cancel()
        for task in self._tasks:
            task.cancel()
        for link in [self.link, *self.extra]:
            if link is not None:
                link.close()
        self.node = None
        if self.store is not None:
            self.store.close()
            self.store = None

    # -- what the driver contract (bench.substrates.host.NodeHost) asks of a host -----------------------
    def subscribe(self, cmd: Subscribe) -> None:
        if self.link is not None:
            self.link.subscribe(cmd.filters, cmd.qos)

    def cancel_timer(self, timer: TimerId) -> None:
        handle = self._timers.pop(timer, None)
        if handle is not None:
            handle.cancel()

    def settle(self, cmd: SettleRequest) -> None:
        self.on_settle(cmd.request_id, cmd.outcome.value)

    def start_timer(self, timer: TimerId, at_ms: int) -> None:
        old = self._timers.pop(timer, None)
        if old is not None:
            old.cancel()
        epoch = self.epoch
        delay = max(0.0, (at_ms - self.now_ms()) / 1000)

        def fire() -> None:
            if epoch == self.epoch and self._timers.get(timer) is handle:
                del self._timers[timer]
                self.feed(TimerFired(self.now_ms(), timer))
        handle = self.loop.call_later(delay, fire)
        self._timers[timer] = handle

    def execute(self, cmd: Execute) -> None:
        duration_ms, ok = self.behaviour.task(cmd.task_id)
        epoch = self.epoch
        start = self.loop.time()

        async def work() -> None:
            for offset, kind, text in self.behaviour.flow(cmd.task_id, duration_ms):
                await asyncio.sleep(max(0.0, start + offset / 1000 - self.loop.time()))
                if epoch != self.epoch:
                    return
                self.feed(FlowEmitted(self.now_ms(), cmd.task_id, kind, text))
            await asyncio.sleep(max(0.0, start + duration_ms / 1000 - self.loop.time()))
            if epoch == self.epoch:
                self.feed(TaskFinished(self.now_ms(), cmd.task_id, ok,
                                       {"by": self.node_id, "agent": cmd.agent_id} if ok else None,
                                       None if ok else "task failed"))
        task = self.loop.create_task(work())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def run_step(self, cmd: RunStep) -> None:
        duration_ms, ok, ops = self.behaviour.step(cmd.instance_id, cmd.path, cmd.attempt)
        self._after(duration_ms, lambda: StepFinished(self.now_ms(), cmd.instance_id,
                                                      cmd.path, cmd.attempt, ok, tuple(ops)))

    def ask_human(self, cmd: AskHuman) -> None:
        """The people watching the conversation here answer; if this process dies while
        they think, their click goes nowhere (the restored gate store asks again)."""
        for k, (delay, decision) in enumerate(self.behaviour.human(cmd.gate_id, cmd.ask)):
            click = f"{cmd.gate_id}/ask{cmd.ask}/click{k + 1}"

            def clicked(gate_id: str = cmd.gate_id, decision: str = decision,
                        click: str = click) -> HumanDecided:
                self.record("human_clicked", {"gateId": gate_id, "decision": decision,
                                              "click": click})
                return HumanDecided(self.now_ms(), gate_id, decision, click)
            self._after(delay, clicked)

    def _after(self, delay_ms: float, make: Callable[[], Any]) -> None:
        """Feed an input after a delay, unless the node died or restarted meanwhile."""
        epoch = self.epoch

        def fire() -> None:
            if epoch == self.epoch:
                self.feed(make())
        self.loop.call_later(max(0.0, delay_ms / 1000), fire)

    # -- MQTT -----------------------------------------------------------------------------------
    def connect(self, cmd: Connect) -> None:
        self._last_connect = cmd
        epoch = self.epoch
        link = MqttLink(self.loop, self.broker[0], self.broker[1], self.client_id,
                        on_message=lambda t, p, mid, qos: self._on_message(link, epoch, t, p, mid, qos),
                        on_connected=lambda present: self._on_connected(link, epoch, present),
                        on_disconnected=lambda reason: self._on_disconnected(link, epoch, reason),
                        on_published=self._on_published, clean_session=cmd.clean_session,
                        on_subscribed=lambda filters: self._on_subscribed(link, epoch, filters))
        self.link = link
        link.connect(cmd.will_topic, cmd.will_payload, cmd.will_retain)

    def _on_connected(self, link: MqttLink, epoch: int, present: bool) -> None:
        if epoch != self.epoch or link is not self.link:
            return
        self.record("mqtt_connected", {"clientId": link.client_id, "sessionPresent": present,
                                       "broker": f"{self.broker[0]}:{self.broker[1]}"})
        self.feed(Connected(self.now_ms(), present))

    def _on_subscribed(self, link: MqttLink, epoch: int, filters: tuple[str, ...]) -> None:
        if epoch == self.epoch and link is self.link and filters:
            self.feed(Subscribed(self.now_ms(), filters))

    def _on_disconnected(self, link: MqttLink, epoch: int, reason: str) -> None:
        if epoch == self.epoch and link is self.link:
            self.record("mqtt_disconnected", {"clientId": link.client_id, "reason": reason})

    def _on_message(self, link: MqttLink, epoch: int, topic: str, payload: bytes, mid: int,
                    qos: int) -> None:
        if epoch != self.epoch or self.node is None:
            return  # a dead process acks nothing: the broker keeps it in flight
        if link is not self.link:
            self.record("fault_fired", {"fault": "double_subscription",
                                        "faultIndex": getattr(link, "fault_index", None),
                                        "connection": link.client_id, "topic": topic})
        self.feed(MessageReceived(self.now_ms(), topic, payload))
        link.ack(mid, qos)  # only now: the batch that handled it is on disk

    def _on_published(self, mid: int) -> None:
        message_id = self._pending_mids.pop(mid, None)
        if message_id is not None:
            self.feed(PublishSettled(self.now_ms(), message_id, True))

    def publish(self, cmd: Publish) -> None:
        if self.link is None:
            self.record("warning", {"what": "publish without a connection", "topic": cmd.topic})
            return
        payload = cmd.payload
        for f in self.publish_filters:
            payload = f(cmd.topic, payload)
        mid = self.link.publish(cmd.topic, payload, cmd.qos, cmd.retain)
        if cmd.message_id is not None:
            if cmd.qos == 0:
                self.loop.call_soon(self._on_published_qos0, cmd.message_id)
            else:
                self._pending_mids[mid] = cmd.message_id

    def _on_published_qos0(self, message_id: str) -> None:
        self.feed(PublishSettled(self.now_ms(), message_id, True))

    def add_connection(self, client_id: str, filters: tuple[str, ...], fault_index: int) -> MqttLink:
        """A second MQTT connection in the same process (the double-subscription bug)."""
        epoch = self.epoch
        holder: list[MqttLink] = []

        def connected(_present: bool) -> None:
            if holder and epoch == self.epoch:
                holder[0].subscribe(filters, 1)
        link = MqttLink(self.loop, self.broker[0], self.broker[1], client_id,
                        on_message=lambda t, p, mid, qos: self._on_message(link, epoch, t, p, mid, qos),
                        on_connected=connected, on_disconnected=lambda reason: None,
                        on_published=lambda mid: None)
        link.fault_index = fault_index  # type: ignore[attr-defined]
        holder.append(link)
        self.extra.append(link)
        link.connect()
        return link

    def reconnect(self) -> None:
        """Close the connection and open a new one with the core's last Connect (e.g. under
        another client id, as the duplicate-client-id fault does)."""
        old, self.link = self.link, None
        if old is not None:
            old.close()
        if self.node is not None and self._last_connect is not None:
            self.connect(self._last_connect)
