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

from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, URGENT, Event


class _Timer:
    """One scheduled call: the function and its arguments (kept here rather than in a
    closure: a global directory's start has a million deliveries and their
    acknowledgements in flight at once, and a closure with its cells is three times the
    size)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args


#: One call of a run: (time, insertion number, function, arguments).
_Entry = tuple[float, int, Callable[..., None], tuple[Any, ...]]
#: How many calls released together make a `_Run` (fewer go into the queue one by one).
RUN_FROM = 8


def _nothing() -> None:
    pass


#: Where a run's call was, once made.
_CALLED: _Entry = (0.0, 0, _nothing, ())


def _by_time_and_number(entry: _Entry) -> tuple[float, int]:
    return entry[0], entry[1]


class _Run:
    """Calls released together (a publish fanned out to every subscriber), sorted by time:
    only the next of them sits in the queue, and the one after takes its place when it
    runs. Each keeps the insertion number it would have had alone, so the queue gives them
    up in the order it would have — a merge of sorted runs is the sort — and holds a
    thousand entries where it held a million as a global directory fills (its pops were a
    fifth of such a run)."""

    __slots__ = ("entries", "next")

    def __init__(self, entries: list[_Entry]) -> None:
        self.entries = entries
        self.next = 0


class Lane:
    """Calls whose times never decrease in the order they are asked for: the packets one
    way over one TCP connection (no packet overtakes one sent before it). Only the first
    waits in the queue, the next taking its place when it runs, as in a `_Run`; each keeps
    the insertion number it would have had alone, so the queue still gives every call up in
    its order. As a global directory fills, each node's acknowledgements of the thousand
    announcements it takes in are in flight at once — two thirds of a million entries in
    the queue, whose `heappop` (a cache miss at every level) was a fifth of such a run."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: deque[_Entry] = deque()


class SimEnvironment(simpy.Environment):
    """simpy's environment, whose queue holds `_Timer`s, `_Run`s and `Lane`s beside simpy's
    own events, in simpy's order — (time, priority, insertion) — and whose `run` and `step`
    take a timer off it with no event machinery: at 1,000 nodes there are two million of
    them, and simpy's `step()` (a callback list swapped, called, and the event's outcome
    checked) was a tenth of the run."""

    def __init__(self) -> None:
        super().__init__()
        self._held: list[tuple[float, Callable[..., None], tuple[Any, ...], Lane | None]] = []

    def later(self, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        """Call `fn(*args)` `delay_ms` from now; the timer starts once the current event is
        done (as a process's first timeout did)."""
        self._held.append((delay_ms, fn, args, None))

    def later_in(self, lane: Lane, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        """As `later`, for a call due no sooner than every call asked for before it in
        `lane`: it waits behind them, out of the queue. (One due sooner, against that
        promise, waits in the queue on its own: the order is the same either way.)"""
        self._held.append((delay_ms, fn, args, lane))

    def now_later(self, delay_ms: float, fn: Callable[..., None], *args: Any) -> None:
        """Call `fn(*args)` `delay_ms` from now, scheduled at once (as a timeout created
        inside a running process was)."""
        heappush(self._queue, (self._now + delay_ms, NORMAL, next(self._eid), _Timer(fn, args)))  # type: ignore[arg-type]

    def _release(self) -> None:
        """Schedule the held calls, numbered in the order they were asked for; a few each
        on its own, more (a publish fanned out to every subscriber) as one `_Run`, sorted."""
        held, self._held = self._held, []
        queue, eid, now = self._queue, self._eid, self._now
        if len(held) < RUN_FROM:
            for delay_ms, fn, args, lane in held:
                t, n = now + delay_ms, next(eid)
                if lane is not None:
                    entries = lane.entries
                    if not entries:
                        heappush(queue, (t, NORMAL, n, lane))  # type: ignore[arg-type]
                        entries.append((t, n, fn, args))
                        continue
                    if t >= entries[-1][0]:    # (else due sooner, against the promise)
                        entries.append((t, n, fn, args))
                        continue
                heappush(queue, (t, NORMAL, n, _Timer(fn, args)))  # type: ignore[arg-type]
            return
        run = [(now + delay_ms, next(eid), fn, args) for delay_ms, fn, args, _lane in held]
        run.sort(key=_by_time_and_number)
        heappush(queue, (run[0][0], NORMAL, run[0][1], _Run(run)))  # type: ignore[arg-type]

    def _call_next(self, run: _Run) -> None:
        """Run the next call of `run`, after putting the one after it in the queue."""
        entries, i = run.entries, run.next
        if i + 1 < len(entries):
            run.next = i + 1
            t, n, _fn, _args = entries[i + 1]
            heappush(self._queue, (t, NORMAL, n, run))  # type: ignore[arg-type]
        _t, _n, fn, args = entries[i]
        entries[i] = _CALLED     # what it holds (a message, a connection) goes when it is done
        fn(*args)
        if self._held:
            self._release()

    def _call_lane(self, lane: Lane) -> None:
        """Run the first call of `lane`, after putting the one after it in the queue."""
        entries = lane.entries
        _t, _n, fn, args = entries.popleft()
        if entries:
            t, n, _fn, _args = entries[0]
            heappush(self._queue, (t, NORMAL, n, lane))  # type: ignore[arg-type]
        fn(*args)
        if self._held:
            self._release()

    def _process(self, item: object) -> None:
        """Carry out one entry taken off the queue (the clock already at its time)."""
        if type(item) is _Timer:
            item.fn(*item.args)
            if self._held:
                self._release()
            return
        if type(item) is _Run:
            self._call_next(item)
            return
        if type(item) is Lane:
            self._call_lane(item)
            return
        event: Event = item  # type: ignore[assignment]
        callbacks, event.callbacks = event.callbacks, None
        for callback in callbacks or ():   # as simpy's step(); StopSimulation goes up
            callback(event)
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc

    def step(self) -> None:
        try:
            self._now, _, _, item = heappop(self._queue)
        except IndexError:
            raise EmptySchedule from None
        self._process(item)

    def run(self, until: float | simpy.Event | None = None) -> object:
        """As simpy's `run`: until a time (its stop event scheduled first among the
        entries of that instant), an event, or the queue's end."""
        if self._held:     # asked for before the run: their processes would start first
            self._release()
        if until is not None and not isinstance(until, Event):
            at = until if isinstance(until, int) else float(until)
            if at <= self._now:
                raise ValueError(f"until ({at}) must be greater than the current simulation "
                                 "time")
            stop = Event(self)
            stop._ok, stop._value = True, None
            self.schedule(stop, URGENT, at - self._now)     # its time as simpy computes it
            until = stop
        elif until is not None:
            if until.callbacks is None:
                return until.value
        if until is not None:
            until.callbacks.append(StopSimulation.callback)  # type: ignore[union-attr]
        queue = self._queue
        try:
            while queue:
                self._now, _, _, item = heappop(queue)
                if type(item) is _Timer:      # the entries there are millions of
                    item.fn(*item.args)
                    if self._held:
                        self._release()
                elif type(item) is _Run:
                    self._call_next(item)
                elif type(item) is Lane:
                    self._call_lane(item)
                else:
                    self._process(item)
        except StopSimulation as exc:
            return exc.args[0]
        if until is not None:
            raise RuntimeError(f'No scheduled events left but "until" event was not '
                               f"triggered: {until}")
        return None
