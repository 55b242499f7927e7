"""Directory liveness and deployment red lines (DESIGN §3 Directory and roster; seed 000 §3.3,
seed 002 §3.1, §11.1)."""

from __future__ import annotations

from collections import defaultdict

from bench.checks import Checker, Collector, rule
from bench.core.events import (
    Event,
    ExecutorsRegistered,
    MqttConnected,
    NodeStarted,
    RosterLoaded,
    SessionTakeover,
)
from bench.history import History

#: DESIGN §3: the executor every node registers when its roster is empty.
DEFAULT_EXECUTOR = "a2a-local-executor"


@rule("DESIGN §3: an empty roster still registers a default executor; seed 000 §3.3 (C3)")
def no_mute_receiver(h: History, c: Collector) -> None:
    """Every node that connects registers at least one executor: none is online but
    handling nothing."""
    c.count("boots", len(h.of(NodeStarted)))
    for e in h.of(ExecutorsRegistered):
        c.count("registrations")
        if e.registered < 1:
            c.violation(f"{e.node} is connected with {e.registered} executors: a mute "
                        "receiver", e)


@rule("seed 002 §11.3: executors registered: N / N")
def registers_all_expected(h: History, c: Collector) -> None:
    """A node registers every executor it expected to."""
    for e in h.of(ExecutorsRegistered):
        if e.registered >= 1 and e.registered != e.expected:
            c.violation(f"{e.node} registered {e.registered} of {e.expected} executors", e)


@rule("DESIGN §3: a namespace switch rotates the roster file; seed 000 §2.3")
def roster_of_own_namespace(h: History, c: Collector) -> None:
    """A roster holds only agents of the node's own namespace (a switch that kept the old
    roster announces two sets of executors)."""
    for e in h.of(RosterLoaded):
        ns = h.namespace_at(e.node, e.seq)
        foreign = [a for a in e.agents if a != DEFAULT_EXECUTOR and a.split(".", 1)[0] != ns]
        if foreign:
            c.violation(f"{e.node} (namespace {ns!r}) registered foreign executors {foreign}", e)


@rule("seed 002 §11.1 red line 1: node ids and MQTT client ids unique per node")
def unique_client_ids(h: History, c: Collector) -> None:
    """No MQTT client id is used by two nodes."""
    users: dict[str, set[str]] = defaultdict(set)
    first: dict[tuple[str, str], Event] = {}
    for s in h.of(NodeStarted):
        users[s.client_id].add(s.node)
        first.setdefault((s.client_id, s.node), s)
    for m in h.of(MqttConnected):
        users[m.client_id].add(m.node)
        first.setdefault((m.client_id, m.node), m)
    for client_id, nodes in sorted(users.items()):
        c.count("client_ids")
        if len(nodes) > 1:
            evidence = [first[(client_id, n)] for n in sorted(nodes)]
            takeovers = [e for e in h.of(SessionTakeover) if e.client_id == client_id]
            c.violation(f"client id {client_id!r} used by {sorted(nodes)} "
                        f"({len(takeovers)} session takeovers)", *evidence, *takeovers[:3])


def _no_node(h: History) -> str | None:
    return None if h.of(NodeStarted) else "no node started in this run"


DIRECTORY_LIVENESS = Checker(
    "directory_liveness", "No mute receiver: every connected node registers at least one "
    "executor, all it expected; a roster holds only agents of the node's namespace.",
    (no_mute_receiver, registers_all_expected, roster_of_own_namespace), _no_node)
DEPLOYMENT = Checker(
    "deployment", "Seed 002 §11.1 red line 1: node ids and MQTT client ids are unique per node.",
    (unique_client_ids,), _no_node)
