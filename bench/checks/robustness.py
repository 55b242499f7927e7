"""Robustness (DESIGN §3: malformed or unknown input is a recorded rejection, never a crash):
the node under test never dies of an exception of its own."""

from __future__ import annotations

from bench.checks import Checker, Collector, rule
from bench.core.events import (
    Event,
    InboundAdmitted,
    MqttConnected,
    MqttDisconnected,
    NodeCrashed,
    NodeStarted,
    Warning,
    WarningKind,
)
from bench.history import History

#: Warnings a node gives only when its own bookkeeping or its store went wrong: no fault
#: of the bench corrupts a store, sends a malformed process definition or settles a
#: publish the node never made.
NEVER_PROVOKED = frozenset({
    WarningKind.UNKNOWN_SETTLEMENT, WarningKind.BAD_PROCESS_DEFINITION,
    WarningKind.SNAPSHOT_UNREADABLE, WarningKind.GATE_RECORD_UNREADABLE,
    WarningKind.STREAM_RECORD_UNREADABLE, WarningKind.ROSTER_UNREADABLE,
    WarningKind.RESTORE_TASKS, WarningKind.RESTORE_REQUESTS})


@rule("DESIGN §3: malformed or unknown input is a recorded rejection, never a crash")
def never_raises(h: History, c: Collector) -> None:
    """No node raises while handling an input: whatever it is given — a duplicate, a
    malformed payload, a late timer — it answers with a recorded outcome."""
    c.count("boots", len(h.of(NodeStarted)))
    for e in h.of(NodeCrashed):
        if e.error is not None:
            c.count("raised")
            c.violation(f"{e.node} raised {e.error} ({e.how}) and its process died", e)


@rule("DESIGN §3: a warning is worth a human's attention, so it must be true")
def warnings_are_true(h: History, c: Collector) -> None:
    """Every warning says something the history confirms: a missing replyNodeId is
    warned about for a request admitted without one; a publish without a connection
    while the node had none; the warnings of broken bookkeeping or a broken store never
    (see NEVER_PROVOKED), nor an unrestorable ledger. Undeliverable messages are judged
    by directory_liveness and reply_routing."""
    without_reply = {(a.node, a.request_id) for a in h.of(InboundAdmitted)
                     if a.request_id and a.reply_node_id is None}
    connected: dict[str, bool] = {}
    events: list[Event] = sorted([*h.of(MqttConnected), *h.of(MqttDisconnected),
                                  *h.of(NodeCrashed), *h.of(NodeStarted), *h.of(Warning)],
                                 key=lambda e: e.seq)
    for e in events:
        match e:
            case MqttConnected():
                connected[e.node] = True
            case MqttDisconnected() | NodeCrashed() | NodeStarted():
                connected[e.node] = False
            case Warning():
                c.count("warnings")
                if e.what in NEVER_PROVOKED:
                    c.violation(f"{e.node} warned {e.what.value!r}: {e.reason or e.message_id}", e)
                elif e.what is WarningKind.MISSING_REPLY_NODE and \
                        (e.node, e.task_id) not in without_reply:
                    c.violation(f"{e.node} warned that request {e.task_id} had no replyNodeId, "
                                "but it was admitted with one (or never)", e)
                elif e.what is WarningKind.PUBLISH_WITHOUT_CONNECTION and \
                        connected.get(e.node, False):
                    c.violation(f"{e.node} warned it published to {e.topic!r} without a "
                                "connection while it was connected", e)


def _no_node(h: History) -> str | None:
    return None if h.of(NodeStarted) else "no node started"


ROBUSTNESS = Checker("robustness", "No node dies of its own exception: every input gets a "
                     "recorded outcome (DESIGN §3); every warning it gives is true.",
                     (never_raises, warnings_are_true), _no_node)
