"""The history: one JSON object per line — `seq`, `tMs`, `node`, `kind`, then the event's
fields — for every substrate. Written line by line and flushed, so a run that dies keeps
everything it recorded up to that point.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass(frozen=True, slots=True)
class Event:
    seq: int
    t_ms: float
    node: str
    kind: str
    fields: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "tMs": self.t_ms, "node": self.node, "kind": self.kind,
                **self.fields}


class Recorder:
    """Appends events in order; optionally streams them to a JSONL file as they come."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.events: list[Event] = []
        self._fh: IO[str] | None = open(path, "w", encoding="utf-8") if path else None

    def append(self, t_ms: float, node: str, kind: str, fields: Mapping[str, Any]) -> Event:
        reserved = {"seq", "tMs", "node", "kind"} & set(fields)
        if reserved:
            raise ValueError(f"event fields may not use the reserved names {sorted(reserved)}")
        event = Event(len(self.events) + 1, t_ms, node, kind, dict(fields))
        self.events.append(event)
        if self._fh is not None:
            self._fh.write(json.dumps(event.to_json(), sort_keys=True, separators=(",", ":")) + "\n")
            self._fh.flush()
        return event

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: not a JSON history line ({exc})") from exc
