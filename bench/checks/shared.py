"""Rules more than one protocol's checkers hold, each judged from the history alone."""

from __future__ import annotations

from bench.checks import Collector, rule
from bench.core.events import NodeCrashed, NodeStarted
from bench.history import History


@rule("DESIGN §3: malformed or unknown input is a recorded rejection, never a crash")
def never_raises(h: History, c: Collector) -> None:
    """No node raises while handling an input: whatever it is given — a duplicate, a
    malformed payload, a late timer — it answers with a recorded outcome."""
    c.count("boots", len(h.of(NodeStarted)))
    for e in h.of(NodeCrashed):
        if e.error is not None:
            c.count("raised")
            c.violation(f"{e.node} raised {e.error} ({e.how}) and its process died", e)
