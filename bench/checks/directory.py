"""Directory liveness and deployment red lines (seed 000 §3.3, seed 002 §3.1, §11.1)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.checks import Collector, History, Verdict
from bench.core.directory import DEFAULT_EXECUTOR_ID, namespace_of


def directory_liveness(h: History) -> Verdict:
    """No mute receiver: every connected node registers at least one executor, all it
    expected; and a roster holds only agents of the node's own namespace (a namespace
    switch that kept the old roster announces two sets of executors)."""
    c = Collector("directory_liveness")
    ns_at_boot: dict[str, str] = {}
    for e in sorted(h.of("node_started") + h.of("roster_loaded") + h.of("executors_registered"),
                    key=lambda x: x["seq"]):
        node = e["node"]
        if e["kind"] == "node_started":
            ns_at_boot[node] = e["namespace"]
            c.count("boots")
        elif e["kind"] == "roster_loaded":
            foreign = [a for a in e["agents"] if a != DEFAULT_EXECUTOR_ID
                       and namespace_of(a) != ns_at_boot.get(node)]
            if foreign:
                c.violation(f"{node} (namespace {ns_at_boot.get(node)!r}) registered foreign "
                            f"executors {foreign}", e)
        else:
            c.count("registrations")
            if e["registered"] < 1:
                c.violation(f"{node} is connected with {e['registered']} executors: a mute "
                            "receiver", e)
            elif e["registered"] != e["expected"]:
                c.violation(f"{node} registered {e['registered']} of {e['expected']} executors", e)
    return c.verdict()


def deployment(h: History) -> Verdict:
    """Seed 002 §11.1 red line 1: node ids and MQTT client ids are unique per node."""
    c = Collector("deployment")
    users: dict[str, set[str]] = defaultdict(set)
    first: dict[str, dict[str, Any]] = {}
    for e in h.of("node_started") + h.of("mqtt_connected"):
        users[e["clientId"]].add(e["node"])
        first.setdefault(f"{e['clientId']}|{e['node']}", e)
    for client_id, nodes in sorted(users.items()):
        c.count("client_ids")
        if len(nodes) > 1:
            evidence = [first[f"{client_id}|{n}"] for n in sorted(nodes)]
            takeovers = [e for e in h.of("session_takeover") if e["clientId"] == client_id]
            c.violation(f"client id {client_id!r} used by {sorted(nodes)} "
                        f"({len(takeovers)} session takeovers)", *evidence, *takeovers[:3])
    return c.verdict()
