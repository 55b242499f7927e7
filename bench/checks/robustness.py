"""Robustness (DESIGN §3: malformed or unknown input is a recorded rejection, never a crash):
the node under test never dies of an exception of its own."""

from __future__ import annotations

from bench.checks import Checker, Collector, rule
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


def _no_node(h: History) -> str | None:
    return None if h.of(NodeStarted) else "no node started"


ROBUSTNESS = Checker("robustness", "No node dies of its own exception: every input gets a "
                     "recorded outcome (DESIGN §3).", (never_raises,), _no_node)
