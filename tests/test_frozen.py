"""bench.core.frozen: the quick __init__ builds what the dataclass's own builds."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import pytest

# the modules whose classes are given quick __init__s on import
import bench.core.commands
import bench.core.envelope
import bench.core.events
import bench.core.inputs
import bench.core.properties
import bench.protocols.seed.directory
import bench.protocols.seed.outbox
import bench.protocols.seed.payloads
import bench.protocols.seed.request
import bench.protocols.seed.task
import bench.substrates.sim.broker  # noqa: F401
from bench.core.frozen import ORIGINAL_INIT, quick_init, replace

CLASSES = sorted(ORIGINAL_INIT, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _built(cls: type, init: Any, **kwargs: Any) -> Any:
    obj = cls.__new__(cls)
    init(obj, **kwargs)
    return obj


def test_every_event_class_has_one() -> None:
    assert sum(1 for c in CLASSES if c.__module__ == "bench.core.events") >= 100


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_the_quick_init_builds_what_the_dataclass_init_builds(cls: type) -> None:
    """Same signature; every field given a value of its own, or only those without a
    default: equal instances, field by field; frozen; pickled and replaced alike."""
    original = ORIGINAL_INIT[cls]
    assert str(inspect.signature(cls.__init__)) == str(inspect.signature(original))
    fields = [f for f in dataclasses.fields(cls) if f.init]
    every = {f.name: f"value-of-{f.name}" for f in fields}
    needed = {f.name: f"value-of-{f.name}" for f in fields
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    for kwargs in (every, needed):
        quick, slow = cls(**kwargs), _built(cls, original, **kwargs)
        for f in dataclasses.fields(cls):
            assert getattr(quick, f.name) == getattr(slow, f.name), f.name
        assert quick == slow and repr(quick) == repr(slow)
        assert pickle.loads(pickle.dumps(quick)) == quick
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(quick, fields[0].name if fields else "seq", "changed")
        if fields:
            name = fields[-1].name
            assert replace(quick, **{name: "other"}) == dataclasses.replace(slow, **{name: "other"})


def test_positional_fields_defaults_factories_and_post_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Odd:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)
        c: int = dataclasses.field(default=7, init=False)
        d: str = dataclasses.field(default="d", kw_only=True)
        e: int = dataclasses.field(kw_only=True)

        def __post_init__(self) -> None:
            object.__setattr__(self, "c", self.a * 2)

    original = Odd.__init__
    quick_init(Odd)
    assert str(inspect.signature(Odd.__init__)) == str(inspect.signature(original))
    one, two = Odd(1, e=5), Odd(1, e=5)
    assert one == _built(Odd, original, a=1, e=5) and one.c == 2
    assert one.b is not two.b          # a factory called per instance
    assert Odd(3, [1], d="x", e=0) == _built(Odd, original, a=3, b=[1], d="x", e=0)
    assert replace(one, a=4) == Odd(4, e=5) and replace(one, a=4).c == 8
    with pytest.raises(TypeError):
        Odd(1)                          # e is required
    with pytest.raises(TypeError):
        replace(one, nothing=1)


def test_a_class_that_is_not_frozen_and_slotted_is_left_alone() -> None:
    @dataclasses.dataclass
    class Plain:
        a: int = 0

    before = Plain.__init__
    assert quick_init(Plain) is Plain and Plain.__init__ is before
    assert replace(Plain(1), a=2) == Plain(2)
