"""What an A2A-over-MQTT agent prints as it comes up, read off the events recorded of it
(their JSON form): its MQTT 5 session — as it reported it, or, for an agent not written
here, the CONNECT its wire tap saw — and its subscriptions acknowledged (a responder's
request topics, a requester's reply topic: its `executors_registered`); its store where it
reports one. A live deployment waits for the two before the run starts (a requester that
keeps no connection between requests says so instead of its session). No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core.startup import last

#: how many lines an agent that came up prints at least (its session and its subscriptions)
LINES = 2


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
    else:
        tapped = [e for e in events if e["node"] == node and e["kind"] == "wire"
                  and e.get("packet") == "CONNECT" and e.get("direction") == "out"]
        if tapped:
            c = tapped[-1]
            lines.append(f"[a2a] connected (seen on the wire): clientId={c.get('clientId')}, "
                         f"MQTT {c.get('mqtt') or '3.1.1'}, cleanStart={c.get('cleanSession')}, "
                         f"sessionExpiry={c.get('sessionExpiryS')}s")
        elif ready and not ready["agents"] and not ready["subscribed"]:
            # a requester that opens a connection per request has no session to show yet
            lines.append("[a2a] no standing connection: it connects per request")
    if ready:
        role = f"agents {ready['agents']}" if ready["agents"] else "requester"
        lines.append(f"[a2a] subscribed {ready['subscribed']} ({role}, nodeId={node})")
    return lines
