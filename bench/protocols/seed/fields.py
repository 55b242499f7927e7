"""Typed reads from JSON records restored from disk. Each raises KeyError or TypeError
naming the key; callers turn that into a recorded problem, never a crash."""

from __future__ import annotations

from collections.abc import Mapping

from bench.core.envelope import Json


def text(raw: Mapping[str, Json], key: str) -> str:
    value = raw[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string, got {type(value).__name__}")
    return value


def optional_text(raw: Mapping[str, Json], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key} must be a string or null, got {type(value).__name__}")
    return value


def integer(raw: Mapping[str, Json], key: str) -> int:
    value = raw[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key} must be an integer, got {type(value).__name__}")
    return value
