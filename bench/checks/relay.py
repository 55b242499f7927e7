"""FLOW-RELAY checkers (DESIGN §7, seed 002 §6): relay integrity and relay locality."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from bench.checks import NOTHING, Collector, History, Verdict

IN_FLIGHT_AT_END_MS = 2_000


def relay_integrity(h: History) -> Verdict:
    """Per stream: frames carry exactly the emitted text (coalescing loses nothing); every
    relayed frame is accepted by the home node with the same text or falls in an explicit
    gap; per subscriber, seqs strictly increase (no duplicate, no reordering), the text is
    the frame's, nothing lands in another conversation, and the trust label is verified
    on the producing node and claimed elsewhere."""
    c = Collector("relay_integrity")
    frames: dict[tuple[str, int], dict[str, Any]] = {}
    producer: dict[str, str] = {}
    for e in h.of("relay_frame"):
        frames[(e["stream"], e["streamSeq"])] = e
        producer[e["stream"]] = e["node"]
    c.count("frames", len(frames))
    crashed = {e["node"] for e in h.of("node_crashed")}
    emitted: dict[str, str] = defaultdict(str)
    for e in h.of("flow_emitted"):
        emitted[e["stream"]] += e["text"]
    for stream, text in sorted(emitted.items()):
        framed = "".join(f["text"] for (s, _q), f in sorted(frames.items()) if s == stream)
        if producer.get(stream) in crashed:
            continue   # pending thinking dies with a crashed producer; judged per frame below
        if framed != text:
            first = [e for e in h.of("flow_emitted") if e["stream"] == stream][:1]
            c.violation(f"stream {stream}: frames carry {framed[:60]!r}, the flow emitted "
                        f"{text[:60]!r}", *first)
    accepted: dict[tuple[str, int], dict[str, Any]] = {}
    for e in h.of("relay_accepted"):
        accepted[(e["stream"], e["streamSeq"])] = e
    gaps: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in h.of("relay_gap"):
        gaps[e["stream"]].append((e["fromSeq"], e["toSeq"]))
        c.count("gaps_recorded")
    for e in h.of("relay_sent"):
        key = (e["stream"], e["streamSeq"])
        c.count("relayed")
        got = accepted.get(key)
        if got is not None:
            if got["text"] != frames[key]["text"]:
                c.violation(f"{key[0]} seq {key[1]} accepted as {got['text']!r}, sent as "
                            f"{frames[key]['text']!r}", e, got)
            continue
        if any(lo <= key[1] <= hi for lo, hi in gaps[key[0]]):
            continue
        if float(e["tMs"]) > h.end_ms - IN_FLIGHT_AT_END_MS:
            c.unknown("relayed_in_flight_at_end")
            continue
        c.violation(f"{key[0]} seq {key[1]} was relayed but neither accepted nor recorded as a "
                    "gap at the home node", e)
    last: dict[tuple[str, str], int] = {}
    for e in h.of("relay_delivered"):
        c.count("delivered")
        key = (e["subscriberId"], e["stream"])
        if e["streamSeq"] <= last.get(key, 0):
            c.violation(f"subscriber {e['subscriberId']} got {e['stream']} seq {e['streamSeq']} "
                        f"after seq {last[key]}", e)
        last[key] = max(last.get(key, 0), e["streamSeq"])
        if e.get("subscriberConversation") != e["conversationId"]:
            c.violation(f"an event of conversation {e['conversationId']} was pushed to "
                        f"{e['subscriberId']}, who watches {e.get('subscriberConversation')!r}", e)
        frame = frames.get((e["stream"], e["streamSeq"]))
        if frame is not None and frame["text"] != e["text"]:
            c.violation(f"{e['stream']} seq {e['streamSeq']} delivered as {e['text']!r}, framed as "
                        f"{frame['text']!r}", frame, e)
        want = "verified" if producer.get(e["stream"]) == e["node"] else "claimed"
        if e["trust"] != want:
            c.violation(f"{e['stream']} seq {e['streamSeq']} delivered on {e['node']} labelled "
                        f"{e['trust']}, should be {want}", e)
    return c.verdict("" if frames else NOTHING + "no flow streamed in this run")


def relay_locality(h: History) -> Verdict:
    """Seed 002 §6: local first — no FLOW_EVENT leaves a node while that node has a
    subscriber for the conversation."""
    c = Collector("relay_locality")
    watching: dict[str, dict[str, str]] = defaultdict(dict)   # node -> subscriber -> conversation
    for e in sorted(h.of("subscriber_attached") + h.of("subscriber_detached") + h.of("relay_sent"),
                    key=lambda x: x["seq"]):
        node = e["node"]
        if e["kind"] == "subscriber_attached":
            watching[node][e["subscriberId"]] = e["conversationId"]
        elif e["kind"] == "subscriber_detached":
            watching[node].pop(e["subscriberId"], None)
        else:
            c.count("relayed")
            if e["conversationId"] in watching[node].values():
                c.violation(f"{node} relayed {e['stream']} seq {e['streamSeq']} although it has a "
                            f"local subscriber for {e['conversationId']}", e)
    return c.verdict("" if h.of("relay_frame") else NOTHING + "no flow streamed in this run")
