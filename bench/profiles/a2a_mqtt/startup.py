"""What an A2A-over-MQTT agent of the bench prints as it comes up, read off the events it
recorded (their JSON form): its store, its MQTT 5 session, and its subscriptions acknowledged
(a responder's request topics, a requester's reply topic). A live deployment waits for
them before the run starts. No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core.startup import last

#: how many lines an agent that came up prints
LINES = 3


def startup_lines(events: Sequence[Mapping[str, Any]], node: str) -> list[str]:
    """The start-up lines `node` printed, in order, from its recorded events."""
    lines = []
    store, conn = last(events, node, "self_check"), last(events, node, "mqtt_connected")
    ready = last(events, node, "executors_registered")
    if store:
        lines.append(f"[a2a] store ready: sqlite:{store['store']}")
    if conn:
        lines.append(f"[a2a] connected: clientId={conn['clientId']}, "
                     f"sessionExpiry={conn.get('sessionExpiryS')}s, "
                     f"sessionPresent={conn['sessionPresent']}")
    if ready:
        role = f"agents {ready['agents']}" if ready["agents"] else "requester"
        lines.append(f"[a2a] subscribed {ready['subscribed']} ({role}, nodeId={node})")
    return lines
