"""Copy-on-write runtime context (seed 004, DESIGN §3): what a process instance knows.

A step never touches the instance's context. It gets a *working copy* — deep, versioned,
parent-linked (`Snapshot`) — and changes only that; when it succeeds, the scheduler
merges the copy's changes back with an explicit operator; when it fails the copy is
thrown away and a retry starts again from the pre-attempt snapshot. Parallel branches
each evolve from the same parent snapshot. Everything here is pure: values are JSON.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import cast

from bench.core.envelope import Json
from bench.core.vocabulary import Merge as Merge

#: The only writes a step makes, as data: set a key at a path, or append to a list there.
#: {"op": "set"|"append", "path": [key, ...], "value": JSON}
Write = dict[str, Json]


class ContextError(ValueError):
    """An operation the context cannot take (bad path, wrong type): the step's fault."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One version of a context: what a step starts from."""

    snapshot_id: str
    version: int
    parent_id: str | None
    data: Json

    def to_json(self) -> dict[str, Json]:
        return {"snapshotId": self.snapshot_id, "version": self.version,
                "parentId": self.parent_id, "data": self.data}


def deep_copy(data: Json) -> Json:
    """What a working copy must be: no structure shared with its parent."""
    copied: Json = copy.deepcopy(data)
    return copied


def digest(data: Json) -> str:
    """A short stable fingerprint of a context (canonical JSON, sha256)."""
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def apply_ops(data: Json, ops: list[Write]) -> None:
    """Carry out a step's writes on `data`, in place (`data` is the step's working copy)."""
    for op in ops:
        path = op.get("path")
        if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
            raise ContextError(f"op {op!r}: path must be a non-empty list of keys")
        parent = data
        for key in path[:-1]:
            if not isinstance(parent, dict):
                raise ContextError(f"op {op!r}: {key!r} is not inside an object")
            parent = parent.setdefault(cast(str, key), {})
        if not isinstance(parent, dict):
            raise ContextError(f"op {op!r}: the parent of the last key is not an object")
        last = cast(str, path[-1])
        match op.get("op"):
            case "set":
                parent[last] = deep_copy(op.get("value"))
            case "append":
                target = parent.setdefault(last, [])
                if not isinstance(target, list):
                    raise ContextError(f"op {op!r}: {last!r} is not a list")
                target.append(deep_copy(op.get("value")))
            case other:
                raise ContextError(f"op {op!r}: unknown op {other!r} (set or append)")


def merge(current: Json, base: Json, result: Json, operator: Merge) -> Json:
    """The scheduler's merge: fold what a step changed (`result` against the `base` it
    started from) into `current`, which other branches may have changed meanwhile."""
    if operator is Merge.REPLACE:
        return deep_copy(result)
    return _three_way(current, base, result)


def _three_way(current: Json, base: Json, result: Json) -> Json:
    if isinstance(result, dict) and isinstance(current, dict):
        merged = dict(current)
        base_d = base if isinstance(base, dict) else {}
        for key, value in result.items():
            if key in base_d and base_d[key] == value:
                continue   # the step did not change it: keep whatever current holds
            merged[key] = _three_way(current.get(key), base_d.get(key), value) \
                if key in current else deep_copy(value)
        return merged
    if isinstance(result, list) and isinstance(current, list):
        base_l = base if isinstance(base, list) else []
        if result[:len(base_l)] == base_l:   # the step appended: append its growth
            return [*deep_copy(current), *deep_copy(result[len(base_l):])]  # type: ignore[misc]
        return deep_copy(result)
    return deep_copy(result)

