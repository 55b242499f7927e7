"""A transition table and the error an illegal transition raises (the h11 pattern)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Generic, TypeVar

S = TypeVar("S", bound=Enum)
E = TypeVar("E", bound=Enum)


class IllegalTransition(RuntimeError):
    """A state machine was asked for a transition its table does not have: a bug."""


class Machine(Generic[S, E]):
    def __init__(self, name: str, table: Mapping[tuple[S, E], S], terminal: frozenset[S]) -> None:
        self.name = name
        self.table = dict(table)
        self.terminal = terminal

    def next(self, state: S, event: E, subject: str) -> S:
        try:
            return self.table[(state, event)]
        except KeyError:
            allowed = sorted(e.name for (s, e) in self.table if s is state)
            raise IllegalTransition(
                f"{self.name} {subject}: state {state.name} cannot take event {event.name} "
                f"(allowed: {allowed or 'none, the state is terminal'})") from None
