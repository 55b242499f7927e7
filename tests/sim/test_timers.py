"""SimEnvironment.later/now_later keep the order simpy processes gave (so a seed gives the
history it always gave), checked against real simpy processes on ties."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy
from hypothesis import given
from hypothesis import strategies as st

from bench.substrates.sim.timers import Lane, SimEnvironment


def with_processes() -> list[str]:
    """The old way: every delay a process; a second wait inside a running process."""
    env = simpy.Environment()
    seen: list[str] = []

    def after(delay: float, fn: Callable[[], None]) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(delay)
        fn()

    def two_stage(name: str) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(1)
        seen.append(f"{name}:first")
        for k in range(3):      # started now, while this process runs
            env.process(after(1, lambda k=k: seen.append(f"{name}:child{k}")))
        yield env.timeout(1)    # created inline: before the children's timeouts
        seen.append(f"{name}:second")

    for name in "ab":
        env.process(two_stage(name))
        env.process(after(2, lambda name=name: seen.append(f"{name}:plain")))
    env.run(until=10)
    return seen


def with_timers() -> list[str]:
    env = SimEnvironment()
    seen: list[str] = []

    def two_stage(name: str) -> None:
        def first() -> None:
            seen.append(f"{name}:first")
            for k in range(3):
                env.later(1, lambda k=k: seen.append(f"{name}:child{k}"))
            env.now_later(1, lambda: seen.append(f"{name}:second"))
        env.later(1, first)

    for name in "ab":
        two_stage(name)
        env.later(2, lambda name=name: seen.append(f"{name}:plain"))
    env.run(until=10)
    return seen


def test_ties_fall_as_simpy_processes_made_them_fall() -> None:
    old = with_processes()
    assert len(old) == 12 and old[:2] == ["a:first", "b:first"]
    assert with_timers() == old


def test_a_timer_asked_for_before_the_run_fires() -> None:
    env = SimEnvironment()
    seen: list[float] = []
    env.later(5, lambda: seen.append(env.now))
    env.run(until=4)
    assert seen == []
    env.run(until=6)
    assert seen == [5]


@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.25]), max_size=20),
                min_size=1, max_size=12),
       st.floats(min_value=0.5, max_value=6.0))
def test_calls_released_together_run_as_simpy_ran_them(batches: list[list[float]],
                                                       until: float) -> None:
    """A batch of calls released at once goes into the queue as one sorted run (a publish
    fanned out to every subscriber); the calls still come out in simpy's order — time,
    then the order they were asked for — ties included, across batches and `run` calls,
    and each call's own calls released after it as before. The reference: one simpy
    process per call, as the simulator once made them."""
    def ours() -> list[tuple[int, int, str]]:
        env = SimEnvironment()
        seen: list[tuple[int, int, str]] = []

        def call(b: int, k: int) -> None:
            seen.append((b, k, "call"))
            if k % 3 == 0:      # a call that asks for one more, released after it
                env.later(0.5, lambda: seen.append((b, k, "child")))

        def batch(b: int, delays: list[float]) -> None:
            for k, d in enumerate(delays):
                env.later(d, call, b, k)
        for b, delays in enumerate(batches):
            env.later(float(b % 3), batch, b, delays)
        env.run(until=until)
        env.run(until=until + 10)
        return seen

    def simpy_processes() -> list[tuple[int, int, str]]:
        env = simpy.Environment()
        seen: list[tuple[int, int, str]] = []

        def after(delay: float, fn: Callable[[], None]) -> Generator[simpy.Event, Any, None]:
            yield env.timeout(delay)
            fn()

        def call(b: int, k: int) -> None:
            seen.append((b, k, "call"))
            if k % 3 == 0:
                env.process(after(0.5, lambda: seen.append((b, k, "child"))))

        def batch(b: int, delays: list[float]) -> None:
            for k, d in enumerate(delays):
                env.process(after(d, lambda k=k: call(b, k)))
        for b, delays in enumerate(batches):
            env.process(after(float(b % 3), lambda b=b, delays=delays: batch(b, delays)))
        env.run(until=until)
        env.run(until=until + 10)
        return seen

    assert ours() == simpy_processes()


@given(st.lists(st.tuples(st.sampled_from([0.0, 0.1, 0.25, 1 / 3, 1.0]),
                          st.lists(st.tuples(st.integers(min_value=-1, max_value=2),
                                             st.sampled_from([0.0, 0.2, 0.3, 0.5, 1e-9, 2.0]),
                                             st.booleans()),
                                   max_size=10)),
                min_size=1, max_size=15))
def test_calls_in_lanes_run_as_the_queue_alone_would_run_them(
        script: list[tuple[float, list[tuple[int, float, bool]]]]) -> None:
    """`later_in` keeps only a lane's first call in the queue; the calls still come out in
    the order `later` gives them — time, then the order asked for — whether the caller kept
    the lane's promise (each call due no sooner than the one before it: a TCP connection's
    packets, clamped as `Connection.transit_ms` clamps them) or not (due sooner: that call
    waits in the queue on its own). Batches of `RUN_FROM` calls or more go into a sorted
    run, lane or not; lane -1 is no lane. Some calls ask for one more as they run."""
    def play(lanes: bool) -> list[tuple[int, int, float]]:
        env = SimEnvironment()
        seen: list[tuple[int, int, float]] = []
        queues = [Lane() for _ in range(3)]
        last = [0.0] * 3

        def call(step: int, k: int) -> None:
            seen.append((step, k, env.now))
            if k % 4 == 1:     # a call that asks for one more in its lane, as it runs
                act(-step - 1, [(k % 3, 0.2, True)])

        def act(step: int, asks: list[tuple[int, float, bool]]) -> None:
            for k, (lane, delay, clamp) in enumerate(asks):
                if lane < 0:
                    env.later(delay, call, step, k)
                    continue
                at = env.now + delay
                if clamp and at < last[lane]:
                    at = last[lane]
                last[lane] = max(last[lane], at)
                if lanes:
                    env.later_in(queues[lane], at - env.now, call, step, k)
                else:
                    env.later(at - env.now, call, step, k)
        for step, (start, asks) in enumerate(script):
            env.later(start, act, step, asks)
        env.run()
        return seen

    assert play(lanes=True) == play(lanes=False)
