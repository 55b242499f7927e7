"""A node's host: the contract every substrate keeps with the core, and everything a host
does that does not depend on the substrate, written once.

`feed()` hands one input to the node, makes the batch's Persist* commands durable in one
transaction (write-ahead: before any Publish of the batch leaves), then carries out the
rest in order. What the simulated agents and people do (a task's duration and stream, a
step's writes, a person's clicks) comes from the one `Behaviour`; "unless the node died
meanwhile" is one epoch check in `later()`; the client-side faults (a skewed clock, a
stripped header, a borrowed client id, a second connection) live here too. Substrates
say only how: how to connect, publish and wait.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, assert_never

from bench.core import events as ev
from bench.core.auth import KeyRing, sign
from bench.core.commands import (
    AskHuman,
    CancelTimer,
    Command,
    Connect,
    Deliver,
    Execute,
    NodeCore,
    PersistDocument,
    PersistRecord,
    Publish,
    Record,
    RunStep,
    SettleRequest,
    StartTimer,
    Subscribe,
)
from bench.core.config import NodeConfig
from bench.core.envelope import Envelope, Header, MessageType, decode, encode
from bench.core.frozen import replace
from bench.core.inputs import (
    Input,
    KeysReplaced,
    PublishSettled,
    Started,
    SubscriberJoined,
    SubscriberLeft,
    TimerFired,
    TimerId,
)
from bench.faults.primitives import FaultRef
from bench.spec.distribution import rng_for
from bench.storage import Store, apply
from bench.workload import Behaviour, Plan, agent_input, answer_of, click_of

#: How long a supervisor waits before starting a node whose process died of an exception.
RESTART_AFTER_RAISE_MS = 1_000.0
#: How long a browser tab whose node went away waits before it connects again (the order of
#: an EventSource's default retry).
TAB_RECONNECT_MS = 1_000.0


class _ClientFault:
    """A client-side fault acting on a share of the node's publishes, with its own random
    stream (missing_reply_node strips a header; publish_failure refuses the publish)."""

    def __init__(self, fault: FaultRef, probability: float, seed: int) -> None:
        self.fault = fault
        self.probability = probability
        self.rng = rng_for(seed, f"fault/{fault.index}")


class NodeHost(ABC):
    node: NodeCore | None
    store: Store | None

    def __init__(self, config: NodeConfig, node_class: Callable[[NodeConfig], NodeCore],
                 behaviour: Behaviour) -> None:
        self.config = config
        self.node_class = node_class
        self.behaviour = behaviour
        self.node = None
        self.store = None
        self.epoch = 0                       # a crash or restart ends every pending callback
        self.boots = 0
        self.booted_at_ms = 0.0
        self.crashed_at_ms: float | None = None
        self._armed: dict[TimerId, int] = {}
        self._tick = 0
        #: the wall time (ms since the Unix epoch) at the run clock's zero: a node's clock
        #: reads like a real one, never "ms since the run began" (a substrate sets it)
        self.clock_origin_ms = 0
        # client-side faults (bench.faults): state of this node's process, not of the core
        self.skew_ms = 0.0
        self.client_id_override: str | None = None
        self.client_id_fault: FaultRef | None = None
        self.second_connection_fault: FaultRef | None = None
        self._strip: _ClientFault | None = None      # missing_reply_node
        self._refuse: _ClientFault | None = None     # publish_failure
        self.on_settle: Callable[[str, str], None] = lambda request_id, outcome: None
        #: the browser tabs watching conversations on this node (subscriber -> conversation):
        #: they live in browsers, not in the node, so they outlive its process and attach
        #: again after it starts (a live substrate hands them to a new process)
        self.tabs: dict[str, str] = {}
        #: the bench plays the agents and people, by lines (`agent_input`), not this host
        self.agents_by_bench = False

    @property
    def node_id(self) -> str:
        return self.config.node_id

    @property
    def client_id(self) -> str:
        return self.client_id_override or self.config.effective_client_id

    def now_ms(self) -> int:
        """The node's clock: wall-clock-like (the run's clock from its origin, as its host's
        time of day reads it), plus the clock_skew fault's offset if any."""
        return int(self.clock_origin_ms + self.wall_ms() + self.skew_ms)

    def wall_ms(self) -> float:
        """The host's time of day since the run's origin: the run's clock, where nothing
        sets a host's clock apart from it (live: the host's own, which may be set)."""
        return self.clock_ms()

    # -- what a substrate provides ---------------------------------------------------------------
    @abstractmethod
    def clock_ms(self) -> float:
        """The run's clock (virtual or wall), in ms."""

    @abstractmethod
    def call_later(self, delay_ms: float, fn: Callable[[], None]) -> None:
        """Run `fn` after `delay_ms` on the substrate's clock."""

    @abstractmethod
    def record(self, event: ev.Event) -> None: ...

    @abstractmethod
    def connect(self, cmd: Connect) -> None: ...

    @abstractmethod
    def subscribe(self, cmd: Subscribe) -> None: ...

    @abstractmethod
    def unsubscribe(self, filters: tuple[str, ...]) -> None:
        """Drop filters from the node's own connection (only a fault adds any the core
        did not ask for)."""

    @abstractmethod
    def publish(self, cmd: Publish) -> None: ...

    @abstractmethod
    def boot(self) -> None:
        """Start the node from its durable store (a fresh process, as far as it knows)."""

    @abstractmethod
    def crash(self) -> object:
        """Kill the node's process: memory, timers, connections gone; the store stays."""

    @abstractmethod
    def reconnect(self) -> None:
        """Drop the connection and open a new one under `client_id`."""

    @abstractmethod
    def open_second_connection(self, client_id: str, filters: tuple[str, ...]) -> None: ...

    @abstractmethod
    def close_second_connection(self) -> None: ...

    # -- the core --------------------------------------------------------------------------------
    def feed(self, event: Input) -> None:
        node, store = self.node, self.store
        if node is None or store is None:
            self.record(ev.InputLost(type(event).__name__, "node is down"))
            return
        match event:
            case SubscriberJoined():
                self.tabs[event.subscriber_id] = event.conversation_id
            case SubscriberLeft():
                self.tabs.pop(event.subscriber_id, None)
            case Started() if self.tabs:
                self._tabs_come_back()
        try:
            commands = node.handle(event)
        except Exception as exc:   # the node under test failed: a finding, not a dead run
            self.node_raised(exc, event)
            return
        self.durably(store, commands)

    def durably(self, store: Store, commands: list[Command]) -> None:
        """Make the batch's Persist* commands durable in one transaction, then carry out
        the rest in order (write-ahead: nothing leaves the node before its batch is on disk).
        A substrate may commit several batches together (`LiveHost`), never out of order."""
        apply(store, commands)
        for cmd in commands:
            self.carry_out(cmd)

    def carry_out(self, cmd: Command) -> None:
        match cmd:
            case Record():
                self.record(cmd.event)
            case PersistDocument() | PersistRecord():
                pass  # committed by feed(), before the rest of the batch
            case Connect():
                self.connect(cmd)
            case Subscribe():
                self.subscribe(cmd)
            case Publish():
                self.publish(cmd)
            case StartTimer():
                self.start_timer(cmd.timer, cmd.at_ms)
            case CancelTimer():
                self._armed.pop(cmd.timer, None)
            case Execute():
                self.execute(cmd)
            case RunStep():
                self.run_step(cmd)
            case AskHuman():
                self.ask_human(cmd)
            case SettleRequest():
                self.on_settle(cmd.request_id, cmd.outcome.value)
            case Deliver():
                pass  # the subscribers are simulated tabs: what they got is relay_delivered
            case _:
                assert_never(cmd)

    def node_raised(self, exc: Exception, event: Input) -> None:
        """The node raised while handling `event` (DESIGN §3: bad input is a recorded
        rejection, never a crash). Like a process that dies of it: recorded as a crash with
        the exception, and started again from its data by a supervisor a moment later."""
        self.record(ev.NodeCrashed(None, f"raised handling {type(event).__name__}", None,
                                   error=f"{exc!r}"[:300]))
        self.crash()
        epoch = self.epoch

        def supervisor() -> None:
            if self.epoch == epoch and self.node is None:   # nothing else restarted it
                self.boot()
        self.call_later(RESTART_AFTER_RAISE_MS, supervisor)

    def _tabs_come_back(self) -> None:
        """The node (re)started while tabs were watching it: each connects again a moment
        later, as a browser does when its event stream breaks."""
        for subscriber, conversation in sorted(self.tabs.items()):
            self.later(TAB_RECONNECT_MS, lambda s=subscriber, c=conversation:
                       SubscriberJoined(self.now_ms(), s, c))

    def later(self, delay_ms: float, make: Callable[[], Input]) -> None:
        """Feed an input after a delay, unless the node died or restarted meanwhile."""
        epoch = self.epoch

        def fire() -> None:
            if epoch == self.epoch:
                self.feed(make())
        self.call_later(delay_ms, fire)

    def start_timer(self, timer: TimerId, at_ms: int) -> None:
        self._tick += 1
        token, epoch = self._tick, self.epoch
        self._armed[timer] = token

        def fire() -> None:   # a cancelled or re-armed timer's old firing does nothing
            if epoch == self.epoch and self._armed.get(timer) == token:
                del self._armed[timer]
                self.feed(TimerFired(self.now_ms(), timer))
        self.call_later(max(0.0, at_ms - self.now_ms()), fire)

    def forget_process(self) -> None:
        """The process is gone (crashed or stopped): every pending callback dies with it."""
        self.epoch += 1
        self.node = None
        self._armed.clear()

    # -- what the agents and people do (the one Behaviour, every substrate) ------------------------
    # Unless the bench plays them (`agents_by_bench`: a node not written in this package
    # cannot draw from the seed as Behaviour does): the node then reports agent_called, and
    # the bench, cued by it and by step_started and human_asked, sends the same plans as lines.
    def execute(self, cmd: Execute) -> None:
        if self.agents_by_bench:
            self.record(ev.AgentCalled(cmd.task_id, cmd.agent_id, cmd.conversation_id, cmd.turn))
        else:
            self.follow(self.behaviour.task_plan(cmd.task_id, self.node_id, cmd.agent_id,
                                                 cmd.turn))

    def run_step(self, cmd: RunStep) -> None:
        if not self.agents_by_bench:
            self.follow(self.behaviour.step_plan(cmd.instance_id, cmd.path, cmd.attempt))

    def ask_human(self, cmd: AskHuman) -> None:
        """The people watching the conversation on this (home) node answer; if the node dies
        while they think, their click goes nowhere (the restored gate store asks again)."""
        if not self.agents_by_bench:
            self.follow(self.behaviour.human_plan(cmd.gate_id, cmd.ask))

    def follow(self, plan: Plan) -> None:
        for delay, op in plan:
            def told(op: dict[str, Any] = op) -> Input:
                if (click := click_of(op)) is not None:   # journaled as it is made
                    self.record(click)
                if (answer := answer_of(op)) is not None:
                    self.record(answer)
                return agent_input(op, self.now_ms())
            self.later(delay, told)

    # -- client-side faults ---------------------------------------------------------------------
    def outgoing(self, topic: str, payload: bytes) -> bytes:
        """What actually leaves the node for `topic` (missing_reply_node strips a header)."""
        strip = self._strip
        if strip is None:
            return payload
        env = decode(payload)
        if not isinstance(env, Envelope) or env.message_type is not MessageType.TASK_REQUEST \
                or env.header(Header.REPLY_NODE_ID) is None \
                or strip.rng.random() >= strip.probability:
            return payload
        self.record(ev.FaultFired(strip.fault.kind, strip.fault.index, "replyNodeId stripped",
                                  {"messageId": env.message_id,
                                   "requestId": env.header(Header.REQUEST_ID)}))
        # the requester's own bug: signed without the header, as the sender would
        auth = self.config.auth
        stripped = env.with_headers(**{Header.REPLY_NODE_ID.value: None})
        return encode(sign(stripped, auth.keys, self.node_id, auth.version))

    def strip_reply_node(self, fault: FaultRef, probability: float, seed: int) -> None:
        self._strip = _ClientFault(fault, probability, seed) if probability > 0 else None

    def refuse_publishes(self, fault: FaultRef, probability: float, seed: int) -> None:
        self._refuse = _ClientFault(fault, probability, seed) if probability > 0 else None

    def refused(self, cmd: Publish) -> bool:
        """The publish_failure fault: the client refuses this tracked publish, and the core
        hears so (PublishSettled(ok=False)) as it would from a real client's error."""
        refuse = self._refuse
        if refuse is None or cmd.message_id is None or refuse.rng.random() >= refuse.probability:
            return False
        self.record(ev.FaultFired(refuse.fault.kind, refuse.fault.index, "publish refused",
                                  {"messageId": cmd.message_id, "topic": cmd.topic}))
        self.send_failed(cmd, "the MQTT client refused the publish (publish_failure)")
        return True

    def acknowledged(self, message_id: str, reason_code: int | None) -> None:
        """The broker's PUBACK for a tracked publish (on MQTT 5 with its reason code: 0x80
        and above is a refusal, and the message did not go out)."""
        if reason_code is not None and reason_code >= 0x80:
            self.feed(PublishSettled(self.now_ms(), message_id, False,
                                     f"PUBACK reason code 0x{reason_code:02x}", reason_code))
        else:
            self.feed(PublishSettled(self.now_ms(), message_id, True, reason_code=reason_code))

    def send_failed(self, cmd: Publish, error: str) -> None:
        """Tell the core a tracked publish did not go out (its message ends FAILED)."""
        if cmd.message_id is None:
            return
        message_id = cmd.message_id
        self.later(0.0, lambda: PublishSettled(self.now_ms(), message_id, False, error))

    def rotate_keys(self, keys: KeyRing) -> None:
        self.config = replace(self.config, auth=replace(self.config.auth, keys=keys))
        if self.node is not None:
            self.feed(KeysReplaced(self.now_ms(), keys))

    def use_client_id(self, fault: FaultRef, client_id: str | None) -> None:
        self.client_id_override = client_id
        self.client_id_fault = fault if client_id else None
        self.reconnect()

    def mqtt_connected(self, client_id: str, session_present: bool, keepalive_s: int,
                       broker: str | None = None, session_expiry_s: int | None = None) -> None:
        """Record the connection (with the keepalive, and on MQTT 5 the session expiry, its
        CONNECT asked for); under another node's client id it is the fault firing."""
        self.record(ev.MqttConnected(client_id, session_present, broker, keepalive_s,
                                     session_expiry_s))
        fault = self.client_id_fault
        if fault is not None and client_id == self.client_id_override:
            self.record(ev.FaultFired(fault.kind, fault.index,
                                      "connected with another node's client id",
                                      {"clientId": client_id}))

    def second_connection(self, fault: FaultRef, on: bool, overlapping: bool = False) -> None:
        if overlapping:
            flt = self.config.topics.node_subtree(self.node_id)
            if on:
                self.subscribe(Subscribe((flt,), 1))
                self.record(ev.FaultFired(fault.kind, fault.index,
                                          "subscribed an overlapping filter on its own client",
                                          {"filter": flt}))
            else:
                self.unsubscribe((flt,))
            return
        if on:
            self.second_connection_fault = fault
            topics = self.config.topics
            filters = (topics.inbox(self.node_id),
                       *(topics.group(g) for g in self.config.scene_groups))
            self.open_second_connection(f"{self.client_id}-sub2", filters)
        else:
            self.close_second_connection()

    def second_delivery(self, connection: str, topic: str) -> None:
        """A message came in on the second connection: the double subscription firing."""
        fault = self.second_connection_fault
        self.record(ev.FaultFired(fault.kind if fault else "double_subscription",
                                  fault.index if fault else None,
                                  ev.FaultAction.SECOND_CONNECTION_DELIVERY,
                                  {"connection": connection, "topic": topic}))
