"""FLOW-RELAY through two cores back to back."""

from __future__ import annotations

import json
from collections.abc import Callable

from bench.core.envelope import Envelope, MessageType, decode, encode
from bench.core.inputs import (
    AgentEmitted,
    MessageReceived,
    SubscriberJoined,
    SubscriberLeft,
    TaskRequested,
)
from bench.substrates.wire import Wire
from tests.helpers import orchestrator

Pair = Callable[..., Wire]


def start_stream(w: Wire, conversation: str = "c1", rid: str = "r1") -> None:
    w.executor = lambda cmd: (60_000, True, "ok", None)   # the task streams for a while
    w.feed("orch-1", TaskRequested(w.now_ms, rid, f"m-{rid}", "fin.orchestrator", "llm.tax", {},
                                   conversation_id=conversation))


def emit(w: Wire, kind: str, text: str, rid: str = "r1", node: str = "exec-1") -> None:
    w.feed(node, AgentEmitted(w.now_ms, rid, kind, text))


def delivered(w: Wire) -> list[tuple[str, int, str, str, str]]:
    return [(d.subscriber_id, d.seq, d.kind, d.text, d.trust) for _, d in w.delivered]


def test_relayed_events_reach_the_conversations_subscribers_in_order_as_claimed(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab-1", "c1"))
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab-2", "c1"))
    w.feed("orch-1", SubscriberJoined(w.now_ms, "other", "c2"))
    start_stream(w)
    for t in ("Hel", "lo"):
        emit(w, "token", t)
    assert delivered(w) == [("tab-1", 1, "token", "Hel", "claimed"), ("tab-2", 1, "token", "Hel", "claimed"),
                            ("tab-1", 2, "token", "lo", "claimed"), ("tab-2", 2, "token", "lo", "claimed")]
    lanes = {d.lane for _, d in w.delivered}
    assert lanes == {"llm.tax:pi-r1:act-1:token"}


def capture_flow(w: Wire) -> list[bytes]:
    got: list[bytes] = []

    def hook(node: str, topic: str, payload: bytes) -> list[bytes]:
        env = decode(payload)
        if isinstance(env, Envelope) and env.message_type is MessageType.FLOW_EVENT:
            got.append(payload)
            return []          # withheld: the test hands them over in its own order
        return [payload]
    w.on_publish = hook
    return got


INBOX = "ooder/node/orch-1/inbox"


def withheld_stream(w: Wire, texts: list[str]) -> list[bytes]:
    """A tab watches c1 on orch-1 and the executor streams `texts` as tokens; every
    FLOW_EVENT is withheld, for the test to hand over (`arrive`) in its own order."""
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    start_stream(w)
    flows = capture_flow(w)
    for text in texts:
        emit(w, "token", text)
    return flows


def arrive(w: Wire, raw: bytes) -> None:
    w.feed("orch-1", MessageReceived(w.now_ms, INBOX, raw))


def test_duplicates_are_dropped_reordering_is_repaired_and_gaps_are_explicit(pair: Pair) -> None:
    w = pair()
    f1, f2, f3, f4, f5 = withheld_stream(w, ["a", "b", "c", "d", "e"])
    for raw in (f2, f1, f1):                       # out of order, then a duplicate
        arrive(w, raw)
    again = decode(f2)
    assert isinstance(again, Envelope)
    arrive(w, encode(                              # same seq, new messageId
        Envelope("re-sent", again.message_type, again.from_agent_id, again.timestamp_ms,
                 again.to_agent_id, again.target_node_id, again.conversation_id, None,
                 again.payload, again.headers)))
    arrive(w, f5)                                  # 3 and 4 missing
    assert [(s, t) for _, s, _, t, _ in delivered(w)] == [(1, "a"), (2, "b")]
    w.advance(w.now_ms + 600)                       # past the 500 ms reorder window
    assert [(s, t) for _, s, _, t, _ in delivered(w)] == [(1, "a"), (2, "b"), (5, "e")]
    (gap,) = w.history.of_kind("relay_gap")
    assert (gap.fields["fromSeq"], gap.fields["toSeq"]) == (3, 4)
    dups = w.history.of_kind("relay_duplicate")
    assert [d.fields["streamSeq"] for d in dups] == [2]   # the byte-identical copy died in the ledger
    arrive(w, f3)                                  # too late: below the cursor
    assert len(w.history.of_kind("relay_duplicate")) == 2


def test_thinking_is_coalesced_and_flushed_before_a_token(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    start_stream(w)
    emit(w, "thinking", "I ")
    emit(w, "thinking", "think")
    emit(w, "token", "Answer")
    assert [(s, k, t) for _, s, k, t, _ in delivered(w)] == [(1, "thinking", "I think"), (2, "token", "Answer")]
    emit(w, "thinking", "more")
    w.advance(w.now_ms + 150)                       # the coalescing window flushes it
    assert delivered(w)[-1][1:4] == (3, "thinking", "more")


def test_thinking_frames_are_capped_in_bytes(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    start_stream(w)
    for _ in range(5):
        emit(w, "thinking", "x" * 1000)
    frames = [t for _, _, k, t, _ in delivered(w) if k == "thinking"]
    assert [len(f) for f in frames] == [5000]  # flushed once it reached 4,096 bytes


def test_a_local_subscriber_means_no_relay_traffic_and_verified_trust() -> None:
    w = Wire()
    w.add(orchestrator(agents=("fin.orchestrator", "fin.tax")))
    w.start("orch-1")
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    w.executor = lambda cmd: (60_000, True, "ok", None)
    w.feed("orch-1", TaskRequested(w.now_ms, "r1", "m1", "fin.orchestrator", "fin.tax", {},
                                   conversation_id="c1"))
    emit(w, "token", "hi", node="orch-1")
    assert delivered(w) == [("tab", 1, "token", "hi", "verified")]
    assert not w.history.of_kind("relay_sent")


def test_no_subscriber_of_that_conversation_means_no_delivery(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "someone-else", "c2"))
    start_stream(w)
    emit(w, "token", "secret")
    assert delivered(w) == []
    assert [e.fields["text"] for e in w.history.of_kind("relay_accepted")] == ["secret"]


def test_the_stream_ends_with_complete_and_seq_survives_an_executor_restart(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    w.executor = lambda cmd: (100, True, "ok", None)
    w.feed("orch-1", TaskRequested(w.now_ms, "r1", "m1", "fin.orchestrator", "llm.tax", {},
                                   conversation_id="c1"))
    emit(w, "token", "one")
    w.advance(w.now_ms + 200)
    assert [(s, k) for _, s, k, _, _ in delivered(w)] == [(1, "token"), (2, "complete")]
    w.crash("exec-1")
    w.start("exec-1")
    w.feed("orch-1", TaskRequested(w.now_ms, "r2", "m2", "fin.orchestrator", "llm.tax", {},
                                   conversation_id="c1"))
    emit(w, "token", "two", rid="r2")
    assert delivered(w)[-1][1:4] == (3, "token", "two")   # not seq 1 again: it would be dropped


def test_detached_tabs_get_nothing(pair: Pair) -> None:
    w = pair()
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    start_stream(w)
    emit(w, "token", "a")
    w.feed("orch-1", SubscriberLeft(w.now_ms, "tab"))
    emit(w, "token", "b")
    w.feed("orch-1", SubscriberJoined(w.now_ms, "tab", "c1"))
    emit(w, "token", "c")
    assert [(s, t) for _, s, _, t, _ in delivered(w)] == [(1, "a"), (3, "c")]
    assert json.dumps([e.to_json() for e in w.history.events])  # all JSON


def test_a_hole_in_a_busy_stream_is_declared_within_one_window(pair: Pair) -> None:
    """The reorder window counts from when the gap appeared, not from the latest arrival."""
    w = pair()
    flows = withheld_stream(w, [f"t{k}" for k in range(12)])
    arrive(w, flows[0])                                                  # seq 1
    for raw in flows[2:]:                                                # seq 2 never comes
        w.advance(w.now_ms + 100)                                        # one every 100 ms
        arrive(w, raw)
    gaps = w.history.of_kind("relay_gap")
    assert gaps and gaps[0].t_ms - 100 <= 600, "the gap waited for the stream to pause"
    assert [s for _, s, _, _, _ in delivered(w)][-1] == 12


def test_holes_behind_a_declared_gap_do_not_each_wait_a_window_of_their_own(pair: Pair) -> None:
    """Found by `a2a-bench explore`: with every other frame lost, the home declared one
    hole per 500 ms window, one after the other, and fell seconds behind the stream. A
    hole's window runs from when it appeared: holes that appeared together are declared
    together."""
    w = pair()
    flows = withheld_stream(w, [f"t{k}" for k in range(9)])
    t0 = w.now_ms
    for raw in flows[::2]:                                   # seqs 1, 3, 5, 7, 9: four holes
        arrive(w, raw)
    w.advance(t0 + 600)                                      # one window after they appeared
    gaps = [(g.fields["fromSeq"], g.fields["toSeq"]) for g in w.history.of_kind("relay_gap")]
    assert gaps == [(2, 2), (4, 4), (6, 6), (8, 8)]
    assert [s for _, s, _, _, _ in delivered(w)] == [1, 3, 5, 7, 9]
