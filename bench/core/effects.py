"""The collector one `handle()` call fills with commands, in the order they were decided."""

from __future__ import annotations

from bench.core.commands import Command, Record
from bench.core.events import Event


class Effects:
    __slots__ = ("now_ms", "commands")

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.commands: list[Command] = []

    def add(self, command: Command) -> None:
        self.commands.append(command)

    def record(self, event: Event) -> None:
        self.commands.append(Record(event))
