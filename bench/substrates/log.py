"""The run's history as every substrate writes it: stamped by the substrate's clock,
appended to the recorder (streamed to disk), and tallied on the way — what is still
outstanding (requests unsettled, tasks running, targeted messages not yet received) and
when each node last booted — so that a drain knows when the run is quiet and a script
knows when a node came up. One object for every substrate; nothing substrate-specific.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.history import Recorder

#: (node, kind, fields) -> whether this is the event waited for.
Predicate = Callable[[str, str, dict[str, Any]], bool]


class RunLog:
    def __init__(self, recorder: Recorder, clock: Callable[[], float]) -> None:
        self.recorder = recorder
        self.clock = clock
        self.outstanding: set[str] = set()               # requests not settled yet
        self.running: set[tuple[str, str]] = set()       # (node, task) not terminal yet
        self.undelivered: set[tuple[str, str]] = set()   # (target node, messageId) in flight
        self._delivered: set[tuple[str, str]] = set()    # PUBACK can come after delivery
        self.booted_at: dict[str, float] = {}
        self.nodes: set[str] = set()                     # nodes of the deployment
        self.sent = 0
        self.settled = 0
        self._watchers: list[tuple[Predicate, Callable[[], None]]] = []

    def record(self, node: str, kind: str, fields: dict[str, Any],
               t_ms: float | None = None) -> None:
        """Append one event; `t_ms` for events stamped where they happened (a node process),
        else now on the substrate's clock."""
        t = self.clock() if t_ms is None or t_ms < 0 else t_ms
        self.recorder.append(t, node, kind, fields)
        self._tally(node, kind, fields, t)
        if self._watchers:
            for entry in list(self._watchers):
                pred, fn = entry
                if pred(node, kind, fields):
                    self._watchers.remove(entry)
                    fn()

    def _tally(self, node: str, kind: str, fields: dict[str, Any], t: float) -> None:
        if kind == "request_sent":
            self.outstanding.add(fields["requestId"])
            self.sent += 1
        elif kind == "request_settled":
            self.outstanding.discard(fields["requestId"])
            self.settled += 1
        elif kind == "task_state":
            if fields["state"] in ("SUBMITTED", "RUNNING"):
                self.running.add((node, fields["taskId"]))
            else:
                self.running.discard((node, fields["taskId"]))
        elif kind == "outbound_settled" and fields["state"] == "PUBLISHED" \
                and fields["messageType"] != "EVENT" and fields.get("targetNodeId") in self.nodes:
            key = (fields["targetNodeId"], fields["messageId"])
            if key not in self._delivered:
                self.undelivered.add(key)
        elif kind in ("inbound_admitted", "inbound_dropped") and fields.get("messageId"):
            self._delivered.add((node, fields["messageId"]))
            self.undelivered.discard((node, fields["messageId"]))
        elif kind == "node_started":
            self.booted_at[node] = t

    @property
    def quiet(self) -> bool:
        """Nothing left to settle, run or deliver: a drain can stop."""
        return not (self.outstanding or self.running or self.undelivered)

    def watch(self, pred: Predicate, fn: Callable[[], None]) -> Callable[[], None]:
        """Call `fn` once, on the first event `pred` accepts. Returns a cancel function."""
        entry = (pred, fn)
        self._watchers.append(entry)

        def cancel() -> None:
            if entry in self._watchers:
                self._watchers.remove(entry)
        return cancel
