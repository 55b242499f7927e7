"""Session takeovers seen live, and the will a broker publishes at one.

The simulated broker journals a takeover as it does one; a real broker says nothing, so the
live deployment reads it off what the nodes report. A node connecting with a client id
another node's connection holds takes the session over ([MQTT-3.1.4-2]: the broker
disconnects the old one). The old connection's end may be reported first (the broker
closed it as the new one came): one that ended within TAKEOVER_MS before counts as taken
over.

Then which will the broker published: a will here is a node's offline announcement, so
the offline announcements the nodes receive in the moments around the takeover say whose
it was — the old connection's, the new one's (a defect: that connection is open, and
[MQTT-3.1.2-8] publishes a will only when its connection closes), both or none. Wills
announce the node that connected, not the client id it used, so the two are told apart
even when an impostor borrowed the id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bench.core import events as ev

#: A connection of a client id that ended this shortly before another node connected with
#: that id was taken over (the broker closed it as the new one came); an offline
#: announcement this shortly before a takeover is journaled may be its will.
TAKEOVER_MS = 250.0
#: How long after a takeover an offline announcement counts as the broker's will for it
#: (a client reconnects no sooner than 1 s, so two takeovers of one id do not overlap).
WILL_WITHIN_MS = 750.0


@dataclass
class _Pending:
    takeover: ev.SessionTakeover
    t_ms: float
    seen: set[str] = field(default_factory=set)     # nodes announced offline
    done: bool = False


class TakeoverWatch:
    """Observes the run's events (a RunLog observer) and journals SessionTakeover and,
    WILL_WITHIN_MS later, TakeoverWill on the "broker" line."""

    def __init__(self, record: Callable[[str, ev.Event], None],
                 call_later: Callable[[float, Callable[[], None]], None]) -> None:
        self._record = record
        self._call_later = call_later
        self._holding: dict[str, str] = {}                  # client id -> node holding it
        self._released: dict[str, tuple[str, float]] = {}   # client id -> (node, when)
        self._pending: list[_Pending] = []
        self._offline: list[tuple[float, str]] = []         # recent (when, node announced)

    def observe(self, node: str, event: ev.Event, t_ms: float) -> None:
        match event:
            case ev.MqttConnected():
                holder = self._holding.get(event.client_id)
                gone = self._released.pop(event.client_id, None)
                if holder is None and gone is not None and t_ms - gone[1] <= TAKEOVER_MS:
                    holder = gone[0]
                if holder is not None and holder != node:
                    self._taken_over(ev.SessionTakeover(event.client_id, holder, node), t_ms)
                self._holding[event.client_id] = node
            case ev.MqttDisconnected() if self._holding.get(event.client_id) == node:
                del self._holding[event.client_id]
                self._released[event.client_id] = (node, t_ms)
            case ev.NodeCrashed():
                for cid in [c for c, n in self._holding.items() if n == node]:
                    del self._holding[cid]
            case ev.DirectoryUpdated(online=False, cleared=None, retain=False | None):
                # an offline announcement as it was published (not a retained copy)
                self._offline = [(t, n) for t, n in self._offline if t_ms - t <= TAKEOVER_MS]
                self._offline.append((t_ms, event.node_id))
                for p in self._pending:
                    if not p.done:
                        p.seen.add(event.node_id)

    def _taken_over(self, takeover: ev.SessionTakeover, t_ms: float) -> None:
        for p in list(self._pending):   # an earlier takeover of the id: its window ends
            if p.takeover.client_id == takeover.client_id:
                self._finish(p)
        self._record("broker", takeover)
        pending = _Pending(takeover, t_ms, {n for t, n in self._offline if t_ms - t <= TAKEOVER_MS})
        self._pending.append(pending)
        self._call_later(WILL_WITHIN_MS, lambda: self._finish(pending))

    def _finish(self, p: _Pending) -> None:
        if p.done:
            return
        p.done = True
        self._pending.remove(p)
        t = p.takeover
        old, new = t.old_label in p.seen, t.new_label in p.seen
        will = (ev.TakeoverWillOf.BOTH if old and new else ev.TakeoverWillOf.OLD if old
                else ev.TakeoverWillOf.NEW if new else ev.TakeoverWillOf.NONE)
        self._record("broker", ev.TakeoverWill(t.client_id, t.old_label, t.new_label, will))

    def flush(self) -> None:
        """The run ends: every takeover still watched is journaled with what was seen."""
        for p in list(self._pending):
            self._finish(p)
