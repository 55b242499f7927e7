"""What a node dropped, read where the node and the wire tap agree: the one place the rules
read InboundDropped from, so every rule matches a drop to a message the same way."""

from __future__ import annotations

import bisect
import dataclasses
from collections import defaultdict

from bench.core.events import InboundDropped, Wire
from bench.history import History


def drops(h: History) -> list[InboundDropped]:
    """The history's InboundDropped events, in order. A drop that names no messageId (the
    contract leaves it optional: a node that refuses an envelope may not have read it) names
    here the one the wire tap read, with its own parser, off the PUBLISH the node refused:
    the last one that reached the same node, on the same topic, before the drop was recorded
    — with the same packet id where the drop gives one. The drop's other fields stay as the
    node said them. Untapped, or where the tap read no messageId (the payload is no JSON
    object), the drop keeps None."""
    return h.memo(_drops)


def _drops(h: History) -> list[InboundDropped]:
    got = h.of(InboundDropped)
    if all(d.message_id is not None or d.topic is None for d in got):
        return got
    # every PUBLISH that reached a tapped node with an envelope the tap could read, by node
    arrived: dict[str, list[Wire]] = defaultdict(list)
    for e in h.of(Wire):
        if e.packet == "PUBLISH" and e.direction == "in" and e.message_id is not None:
            arrived[e.node].append(e)
    out: list[InboundDropped] = []
    for d in got:
        if d.message_id is None and d.topic is not None and arrived[d.node]:
            ins = arrived[d.node]
            for e in reversed(ins[:bisect.bisect_left(ins, d.seq, key=lambda w: w.seq)]):
                if e.topic == d.topic and (d.packet_id is None or e.packet_id == d.packet_id):
                    # (dataclasses' replace: a judge uses none of the judged code's helpers)
                    d = dataclasses.replace(d, message_id=e.message_id)
                    break
        out.append(d)
    return out
