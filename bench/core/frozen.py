"""Frozen dataclasses built at the cost of plain ones.

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__`,
the way round its own `__setattr__` that refuses: 2.1 µs for an event of 17 fields where a
plain one takes 0.6 (CPython 3.11). A simulated run builds events, commands, inputs and
envelopes per message many times over, and `dataclasses.replace` (4.4 µs) checks every
field each time. `quick_init` gives a frozen slotted dataclass an `__init__` that sets each
slot through its descriptor instead (1.3 µs) — the same parameters, defaults, factories and
`__post_init__` — and `replace` builds the copy through it (3.2 µs). The instances are the
same: equal, hashed, frozen and pickled as before (tests/test_frozen.py holds every class
given one to the `__init__` dataclasses wrote). Measured (issue 51, docs/findings/scale.md):
a 1,000-node run some 6-8 % faster, its history the same bytes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    """A default_factory field's parameter left out (shown as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
#: per class given a quick __init__: its parameters' names, and what reads them off one
_PARAMETERS: dict[type, tuple[tuple[str, ...], Callable[[Any], Any]]] = {}
#: ... and the `__init__` dataclasses wrote for it (what tests hold the quick one to)
ORIGINAL_INIT: dict[type, Callable[..., None]] = {}


def quick_init(cls: type[T]) -> type[T]:
    """Give `cls` (a frozen dataclass with `__slots__`) an `__init__` that stores each field
    in its slot directly; returns `cls`. A class that is not one is returned unchanged."""
    params = cls.__dict__.get("__dataclass_params__")
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        return cls
    fields = dataclasses.fields(cls)    # type: ignore[arg-type]
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in fields:
        setter = f"_set_{f.name}"
        names[setter] = _slot(cls, f.name).__set__
        if not f.init:
            if f.default is not dataclasses.MISSING:
                names[f"_default_{f.name}"] = f.default
                body.append(f"    {setter}(self, _default_{f.name})")
            elif f.default_factory is not dataclasses.MISSING:
                names[f"_factory_{f.name}"] = f.default_factory
                body.append(f"    {setter}(self, _factory_{f.name}())")
            continue
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            param = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            param = f"{f.name}=_FACTORY"
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory_{f.name}()")
        else:
            param = f.name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    {setter}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = (f"def __make__({', '.join(names)}):\n"
              f"  def __init__({signature}):\n"
              + "\n".join("  " + line for line in "\n".join(body or ["    pass"]).split("\n"))
              + "\n  return __init__\n")
    scope: dict[str, Any] = {}
    exec(source, {}, scope)   # noqa: S102 -- built from field names alone, as dataclasses does
    init = scope["__make__"](**names)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__annotations__ = dict(cls.__init__.__annotations__)
    ORIGINAL_INIT[cls] = cls.__init__
    cls.__init__ = init  # type: ignore[method-assign]
    params_of = tuple(f.name for f in fields if f.init)
    if params_of:
        scope.clear()
        exec(f"def read(o):\n    return ({', '.join(f'o.{n}' for n in params_of)},)\n",  # noqa: S102
             {}, scope)
        _PARAMETERS[cls] = (params_of, scope["read"])
    return cls


def replace(obj: T, /, **changes: Any) -> T:
    """`dataclasses.replace(obj, **changes)`: a new instance through `__init__`, its
    parameters read off `obj` but those `changes` names (a class `quick_init` was not given
    goes through `dataclasses.replace`)."""
    known = _PARAMETERS.get(type(obj))
    if known is None:
        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    names, read = known
    args = dict(zip(names, read(obj), strict=True))
    args.update(changes)
    return type(obj)(**args)


def _slot(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        slot = klass.__dict__.get(name)
        if slot is not None and hasattr(slot, "__set__"):
            return slot
    raise TypeError(f"{cls.__qualname__}.{name}: no slot to set")


def quick_init_module(namespace: dict[str, Any]) -> None:
    """`quick_init` every frozen slotted dataclass a module defines (called at its end with
    `globals()`)."""
    for value in list(namespace.values()):
        if isinstance(value, type) and value.__module__ == namespace["__name__"] \
                and dataclasses.is_dataclass(value):
            quick_init(value)
