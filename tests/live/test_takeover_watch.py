"""The live takeover watch, fed the events nodes report: which takeovers it journals, and
whose will it says the broker published."""

from __future__ import annotations

from collections.abc import Callable

from bench.core import events as ev
from bench.substrates.live.takeovers import WILL_WITHIN_MS, TakeoverWatch


class Feed:
    def __init__(self) -> None:
        self.journal: list[ev.Event] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.now = 0.0
        self.watch = TakeoverWatch(lambda node, e: self.journal.append(e),
                                   lambda delay, fn: self.timers.append((self.now + delay, fn)))

    def at(self, t_ms: float, node: str, event: ev.Event) -> None:
        self.now = t_ms
        for due, fn in [x for x in self.timers if x[0] <= t_ms]:
            self.timers.remove((due, fn))
            fn()
        self.watch.observe(node, event, t_ms)

    def wills(self) -> list[str]:
        return [e.will.value for e in self.journal if isinstance(e, ev.TakeoverWill)]


def offline(of: str, retain: bool = False) -> ev.DirectoryUpdated:
    return ev.DirectoryUpdated(node_id=of, online=False, agents=[], known=1, qos=1,
                               dup=False, retain=retain)


def test_the_new_connections_will_is_named_whichever_comes_first() -> None:
    f = Feed()
    f.at(0, "exec-1", ev.MqttConnected("exec-1", False))
    f.at(5_000, "orch", offline("exec-2"))           # delivered before the CONNACK is seen
    f.at(5_010, "exec-2", ev.MqttConnected("exec-1", True))
    f.at(5_100, "exec-3", offline("exec-2"))
    f.at(5_000 + WILL_WITHIN_MS + 100, "orch", ev.DirectoryUpdated(
        node_id="exec-2", online=True, agents=[], known=1))
    takeover = [e for e in f.journal if isinstance(e, ev.SessionTakeover)]
    assert [(t.old_label, t.new_label) for t in takeover] == [("exec-1", "exec-2")]
    assert f.wills() == ["new"]


def test_an_old_will_a_retained_copy_and_none() -> None:
    f = Feed()
    f.at(0, "exec-1", ev.MqttConnected("exec-1", False))
    f.at(1_000, "exec-1", ev.MqttDisconnected("exec-1", "taken over"))   # reported first
    f.at(1_100, "exec-2", ev.MqttConnected("exec-1", True))
    f.at(1_150, "orch", offline("exec-1"))
    f.at(2_200, "exec-1", ev.MqttConnected("exec-1", True))    # takes it back: ends the first
    f.at(2_300, "late", offline("exec-2", retain=True))        # a retained copy: not published now
    f.watch.flush()                                            # the run ends
    assert f.wills() == ["old", "none"]
