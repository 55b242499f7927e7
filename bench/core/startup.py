"""What the start-up lines of every protocol's nodes are read from: the events a node
recorded (their JSON form). Each protocol's own lines: its `startup` module
(`ProtocolSpec.startup`). No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def last(events: Sequence[Mapping[str, Any]], node: str, kind: str) -> Mapping[str, Any] | None:
    """The last event of `kind` that `node` recorded."""
    found = [e for e in events if e["node"] == node and e["kind"] == kind]
    return found[-1] if found else None
