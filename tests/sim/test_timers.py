"""SimEnvironment.later/now_later keep the order simpy processes gave (so a seed gives the
history it always gave), checked against real simpy processes on ties."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from bench.substrates.sim.timers import SimEnvironment


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
