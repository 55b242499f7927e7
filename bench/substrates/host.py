"""The contract every substrate's node host keeps with the core, written once.

`feed()` hands one input to the node, makes the batch's Persist* commands durable in one
transaction (write-ahead: before any Publish of the batch leaves), then carries out the
rest in order. Hosts say only how: how to connect, publish, keep timers, run a task.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, assert_never

from bench.core.commands import (
    AskHuman,
    CancelTimer,
    Command,
    Connect,
    Deliver,
    Execute,
    PersistDocument,
    PersistRecord,
    Publish,
    Record,
    RunStep,
    SettleRequest,
    StartTimer,
    Subscribe,
)
from bench.core.inputs import Input, TimerId
from bench.core.node import Node
from bench.storage import Store, apply


class NodeHost(ABC):
    node: Node | None
    store: Store | None

    @property
    @abstractmethod
    def node_id(self) -> str: ...

    @abstractmethod
    def record(self, kind: str, fields: dict[str, Any]) -> None: ...

    def feed(self, event: Input) -> None:
        node, store = self.node, self.store
        if node is None or store is None:
            self.record("input_lost", {"input": type(event).__name__, "reason": "node is down"})
            return
        commands = node.handle(event)
        apply(store, commands)  # write-ahead: durable before anything leaves the node
        for cmd in commands:
            self.carry_out(cmd)

    def carry_out(self, cmd: Command) -> None:
        match cmd:
            case Record():
                self.record(cmd.kind.value, dict(cmd.fields))
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
                self.cancel_timer(cmd.timer)
            case Execute():
                self.execute(cmd)
            case RunStep():
                self.run_step(cmd)
            case AskHuman():
                self.ask_human(cmd)
            case SettleRequest():
                self.settle(cmd)
            case Deliver():
                self.deliver(cmd)
            case _:
                assert_never(cmd)

    @abstractmethod
    def connect(self, cmd: Connect) -> None: ...

    @abstractmethod
    def subscribe(self, cmd: Subscribe) -> None: ...

    @abstractmethod
    def publish(self, cmd: Publish) -> None: ...

    @abstractmethod
    def start_timer(self, timer: TimerId, at_ms: int) -> None: ...

    @abstractmethod
    def cancel_timer(self, timer: TimerId) -> None: ...

    @abstractmethod
    def execute(self, cmd: Execute) -> None: ...

    @abstractmethod
    def run_step(self, cmd: RunStep) -> None: ...

    @abstractmethod
    def ask_human(self, cmd: AskHuman) -> None: ...

    @abstractmethod
    def settle(self, cmd: SettleRequest) -> None: ...

    def deliver(self, cmd: Deliver) -> None:  # noqa: B027 - a default, not a hook to fill
        """Push to a subscriber. The bench's subscribers are simulated browser tabs: what
        they receive is in the history (relay_delivered), so there is nothing more to do."""
