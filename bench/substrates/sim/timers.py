"""The simulation's clock: simpy's environment, with the one thing the simulator does with
it — run a function a delay from now — done without a simpy process per call.

A simpy process costs three events (its Initialize, its Timeout, its own end) and a
generator; the simulator started one for every packet, timer and delivery, and at 1,000
nodes that machinery was a third of the run. `later()` schedules one plain event instead.

It keeps the order a process gave, so a seed still gives the same history byte for byte.
A process's first timeout was created when its Initialize event ran — right after the event
that started it, before anything else — not when it was started. So `later()` holds its
timers until the current event is done, then schedules them in the order they were asked
for; `now_later()` schedules at once, as a timeout created inside a running process was.
Two events due at the same instant therefore still run in the order they always did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import simpy
from simpy.events import NORMAL


class _Timer:
    """One scheduled call: what simpy's `step()` needs of an event, the function and its
    arguments (kept here rather than in a closure: a global directory's start has a million
    deliveries and their acknowledgements in flight at once, and a closure with its cells
    is three times the size)."""

    __slots__ = ("callbacks", "_ok", "fn", "args")

    def __init__(self, callbacks: list[Callable[[_Timer], None]], fn: Callable[..., None],
                 args: tuple[Any, ...]) -> None:
        self.callbacks: list[Callable[[_Timer], None]] | None = callbacks
        self._ok = True
        self.fn = fn
        self.args = args


class SimEnvironment(simpy.Environment):
    def __init__(self) -> None:
        super().__init__()
        self._held: list[tuple[float, Callable[..., None], tuple[Any, ...]]] = []
        # every timer shares this list: simpy's step() takes it off the event, never changes it
        self._fire_list: list[Callable[[_Timer], None]] = [self._fire]

    def later(self, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        """Call `fn(*args)` `delay_ms` from now; the timer starts once the current event is
        done (as a process's first timeout did)."""
        self._held.append((delay_ms, fn, args))

    def now_later(self, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        """Call `fn(*args)` `delay_ms` from now, scheduled at once (as a timeout created
        inside a running process was)."""
        self.schedule(_Timer(self._fire_list, fn, args), NORMAL, delay_ms)  # type: ignore[arg-type]

    def _fire(self, timer: _Timer) -> None:
        timer.fn(*timer.args)
        if self._held:
            self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for delay_ms, fn, args in held:
            self.schedule(_Timer(self._fire_list, fn, args), NORMAL, delay_ms)  # type: ignore[arg-type]

    def run(self, until: float | simpy.Event | None = None) -> object:
        if self._held:     # asked for before the run: their processes would start first
            self._release()
        return super().run(until)
