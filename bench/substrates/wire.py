"""Back-to-back driver: reference cores wired together with no broker and no clock of
its own (as h11's tests wire two connections).

Every Publish reaches each subscriber whose filters match, once, at the same virtual
instant; retained messages are kept per topic; time moves only through `advance()`.
It is a harness for tests and for `a2a-bench exchange`, not a model of MQTT (that is the
simulator's broker). Hooks let a test duplicate, alter or withhold what is published.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, assert_never

from bench.core import events as ev
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
    RequestOutcome,
    RunStep,
    SettleRequest,
    StartTimer,
    Subscribe,
)
from bench.core.config import NodeConfig
from bench.core.envelope import Json
from bench.core.inputs import (
    ConnectionUp,
    Input,
    MessageReceived,
    PublishSettled,
    Started,
    StepReturned,
    Subscribed,
    TaskFinished,
    TimerFired,
    TimerId,
)
from bench.history import Recorder
from bench.storage import Store, apply, restore
from bench.storage.memory import CrashReport, MemoryStore
from bench.substrates.filters import matches
from bench.variants import REFERENCE

#: Decides how a task's work ends: (delay_ms, ok, result, error).
Executor = Callable[[Execute], tuple[int, bool, Json, str | None]]
#: Sees every publish; returns the payloads to deliver in its place ([] withholds it).
PublishHook = Callable[[str, str, bytes], list[bytes]]

#: Decides how one attempt of a process step ends: (delay_ms, ok, ops).
Stepper = Callable[[RunStep], tuple[int, bool, list[Json]]]


def echo_stepper(cmd: RunStep) -> tuple[int, bool, list[Json]]:
    return 10, True, [{"op": "set", "path": ["facts", cmd.path.replace("/", ".")],
                       "value": f"{cmd.instance_id}/{cmd.path}"}]


def echo_executor(cmd: Execute) -> tuple[int, bool, Json, str | None]:
    return 10, True, {"echo": cmd.payload, "by": cmd.agent_id}, None


@dataclass
class Host:
    config: NodeConfig
    store: Store
    make_node: Callable[[NodeConfig], NodeCore]
    node: Any = None     # the running node, of whichever protocol (tests read its parts)
    filters: set[str] = field(default_factory=set)
    boots: int = 0


class Wire:
    def __init__(self, recorder: Recorder | None = None, executor: Executor = echo_executor,
                 start_ms: int = 0, stepper: Stepper = echo_stepper) -> None:
        self.now_ms = start_ms
        self.hosts: dict[str, Host] = {}
        self.history = recorder or Recorder()
        self.executor = executor
        self.stepper = stepper
        self.asked: list[tuple[str, AskHuman]] = []   # gates shown to people; tests answer
        self.settled: dict[str, tuple[RequestOutcome, Json]] = {}
        self.executed: list[tuple[str, Execute]] = []
        self.delivered: list[tuple[str, Deliver]] = []
        self.retained: dict[str, bytes] = {}
        self.on_publish: PublishHook | None = None
        self._queue: deque[tuple[str, Input]] = deque()
        self._timers: list[tuple[int, int, str, TimerId | TaskFinished | StepReturned]] = []
        self._armed: dict[tuple[str, TimerId], int] = {}  # the live arming of each timer
        self._tick = itertools.count()

    # -- set-up -----------------------------------------------------------------------------
    def add(self, config: NodeConfig, store: Store | None = None,
            make_node: Callable[[NodeConfig], NodeCore] | None = None) -> Host:
        """A node on the wire, made by `make_node` (by default the reference of its
        protocol)."""
        if config.node_id in self.hosts:
            raise ValueError(f"node {config.node_id} added twice")
        host = Host(config, store if store is not None else MemoryStore(),
                    make_node or REFERENCE.core_for(config))
        self.hosts[config.node_id] = host
        return host

    def start(self, node_id: str) -> Any:
        host = self.hosts[node_id]
        host.node = host.make_node(host.config)
        host.filters.clear()
        host.boots += 1
        self.feed(node_id, Started(self.now_ms, f"b{host.boots}", restore(host.store)))
        return host.node

    def node(self, node_id: str) -> Any:
        node = self.hosts[node_id].node
        if node is None:
            raise RuntimeError(f"node {node_id} is not running")
        return node

    def crash(self, node_id: str) -> CrashReport | None:
        """Kill the node: its memory is gone; the store keeps only what was committed."""
        host = self.hosts[node_id]
        host.node = None
        host.filters.clear()
        self._queue = deque((n, i) for n, i in self._queue if n != node_id)
        self._timers = [t for t in self._timers if t[2] != node_id]
        heapq.heapify(self._timers)
        self._armed = {k: v for k, v in self._armed.items() if k[0] != node_id}
        self._record(node_id, ev.NodeCrashed(None, "crash() on the wire", None))
        return host.store.crash() if isinstance(host.store, MemoryStore) else None

    # -- running ----------------------------------------------------------------------------
    def feed(self, node_id: str, event: Input) -> None:
        self._queue.append((node_id, event))
        self.run()

    def run(self, max_steps: int = 100_000) -> None:
        """Process queued inputs at the current instant until nothing is left."""
        for _ in range(max_steps):
            if not self._queue:
                return
            node_id, event = self._queue.popleft()
            host = self.hosts[node_id]
            if host.node is None:
                self._record(node_id, ev.InputLost(type(event).__name__, "node is down"))
                continue
            self._carry_out(node_id, host, host.node.handle(event))
        raise RuntimeError(f"wire did not go idle in {max_steps} steps (a message loop?)")

    def advance(self, to_ms: int) -> None:
        """Move time forward to `to_ms`, firing timers and finishing tasks in time order."""
        while self._timers and self._timers[0][0] <= to_ms:
            at, tick, node_id, what = heapq.heappop(self._timers)
            if isinstance(what, TimerId):
                if self._armed.get((node_id, what)) != tick:
                    continue  # cancelled, or superseded by a later StartTimer
                del self._armed[(node_id, what)]
                self.now_ms = max(self.now_ms, at)
                self.feed(node_id, TimerFired(self.now_ms, what))
            else:
                self.now_ms = max(self.now_ms, at)
                self.feed(node_id, replace(what, now_ms=self.now_ms))
        self.now_ms = max(self.now_ms, to_ms)
        self.run()

    def _carry_out(self, node_id: str, host: Host, commands: list[Command]) -> None:
        apply(host.store, commands)  # write-ahead: durable before anything is published
        for cmd in commands:
            match cmd:
                case Record():
                    self._record(node_id, cmd.event)
                case PersistDocument() | PersistRecord():
                    pass  # already applied above
                case Connect():
                    self._queue.append((node_id, ConnectionUp(self.now_ms, host.boots > 1)))
                case Subscribe():
                    host.filters.update(cmd.filters)
                    self._queue.append((node_id, Subscribed(self.now_ms, cmd.filters)))
                    for topic, payload in sorted(self.retained.items()):
                        if any(matches(f, topic) for f in cmd.filters):
                            self._queue.append((node_id, MessageReceived(self.now_ms, topic, payload,
                                                                          retain=True)))
                case Publish():
                    self._publish(node_id, cmd)
                case StartTimer():
                    tick = next(self._tick)
                    self._armed[(node_id, cmd.timer)] = tick
                    heapq.heappush(self._timers, (cmd.at_ms, tick, node_id, cmd.timer))
                case CancelTimer():
                    self._armed.pop((node_id, cmd.timer), None)
                case Execute():
                    self.executed.append((node_id, cmd))
                    delay, ok, result, error = self.executor(cmd)
                    done = TaskFinished(self.now_ms + delay, cmd.task_id, ok, result, error)
                    heapq.heappush(self._timers, (done.now_ms, next(self._tick), node_id, done))
                case RunStep():
                    delay, ok, ops = self.stepper(cmd)
                    step = StepReturned(self.now_ms + delay, cmd.instance_id, cmd.path,
                                        cmd.attempt, ok, tuple(ops))
                    heapq.heappush(self._timers, (step.now_ms, next(self._tick), node_id, step))
                case AskHuman():
                    self.asked.append((node_id, cmd))
                case SettleRequest():
                    self.settled[cmd.request_id] = (cmd.outcome, cmd.response)
                case Deliver():
                    self.delivered.append((node_id, cmd))
                case _:
                    assert_never(cmd)

    def _publish(self, node_id: str, cmd: Publish) -> None:
        payloads = [cmd.payload] if self.on_publish is None else \
            self.on_publish(node_id, cmd.topic, cmd.payload)
        if cmd.retain:
            self.retained[cmd.topic] = cmd.payload
        for payload in payloads:
            for other_id, other in self.hosts.items():
                if other.node is not None and any(matches(f, cmd.topic) for f in other.filters):
                    self._queue.append((other_id, MessageReceived(self.now_ms, cmd.topic, payload,
                                                                        cmd.qos)))
        if cmd.message_id is not None:
            self._queue.append((node_id, PublishSettled(self.now_ms, cmd.message_id, True)))

    def _record(self, node_id: str, event: ev.Event) -> None:
        self.history.append(self.now_ms, node_id, event)
