"""What a seed-protocol node prints as it comes up: seed 002 §11.3's four start-up lines,
read off the events it recorded (their JSON form). A live deployment waits for them before
the run starts; a node missing one did not come up. No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core.startup import last

#: how many lines a node that came up prints
LINES = 4


def startup_lines(events: Sequence[Mapping[str, Any]], node: str) -> list[str]:
    """The start-up lines `node` printed, in order, from its recorded events."""
    lines = []
    roster, store = last(events, node, "roster_loaded"), last(events, node, "self_check")
    conn, execs = last(events, node, "connected"), last(events, node, "executors_registered")
    if roster:
        lines.append(f"[AgentRoster] executors: ids={roster['agents']}, nodeId={node}, "
                     f"domain={roster['namespace']}")
    if store:
        lines.append(f"[A2AMessageStore] ready: sqlite:{store['store']}")
    if conn:
        lines.append(f"[A2A-MQTT] connected: clientId={conn['clientId']}, localNodeId={node}, "
                     f"subscribed {conn['subscriptions']}")
    if execs:
        lines.append(f"[A2aRegistrar] executors registered: {execs['registered']} / "
                     f"{execs['expected']} (nodeId={node})")
    return lines
