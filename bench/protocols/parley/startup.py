"""What a Parley node prints as it comes up (`ProtocolSpec.startup`), read off the events
recorded of it (JSON): the CONNECT its wire tap saw — the library's user starts paho, and
the bench sees only the wire — and its subscriptions acknowledged (its adapter's
`executors_registered`). A live deployment waits for the two. No I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core.startup import last

#: how many lines a Parley node that came up prints (its connection, its subscriptions)
LINES = 2


def startup_lines(events: Sequence[Mapping[str, Any]], node: str) -> list[str]:
    """The start-up lines `node` printed, in order."""
    lines = []
    tapped = [e for e in events if e["node"] == node and e["kind"] == "wire"
              and e.get("packet") == "CONNECT" and e.get("direction") == "out"]
    if tapped:
        c = tapped[-1]
        lines.append(f"[parley] connected (seen on the wire): clientId={c.get('clientId')}, "
                     f"MQTT {c.get('mqtt') or '3.1.1'}, cleanSession={c.get('cleanSession')}")
    ready = last(events, node, "executors_registered")
    if ready:
        role = f"handler of {ready['agents']}" if ready["agents"] else "commander"
        lines.append(f"[parley] subscribed {ready['subscribed']} ({role}, nodeId={node})")
    return lines
