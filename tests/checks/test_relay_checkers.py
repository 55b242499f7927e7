"""The relay checkers on small hand-written histories with known verdicts."""

from __future__ import annotations

from typing import Any

from bench.checks import History, Value
from bench.checks.relay import relay_integrity, relay_locality

S = "c1|llm.tax"


def hist(*events: tuple[str, str, dict[str, Any]]) -> History:
    return History({"seq": i + 1, "tMs": float(i), "node": n, "kind": k, **f}
                   for i, (n, k, f) in enumerate(events))


def emitted(text: str) -> tuple[str, str, dict[str, Any]]:
    return ("exec-1", "flow_emitted", {"stream": S, "text": text})


def frame(seq: int, text: str, node: str = "exec-1") -> tuple[str, str, dict[str, Any]]:
    return (node, "relay_frame", {"stream": S, "streamSeq": seq, "text": text, "conversationId": "c1"})


def sent(seq: int) -> tuple[str, str, dict[str, Any]]:
    return ("exec-1", "relay_sent", {"stream": S, "streamSeq": seq, "conversationId": "c1"})


def accepted(seq: int, text: str) -> tuple[str, str, dict[str, Any]]:
    return ("orch-1", "relay_accepted", {"stream": S, "streamSeq": seq, "text": text})


def delivered(seq: int, text: str, sub_conv: str = "c1", trust: str = "claimed",
              node: str = "orch-1") -> tuple[str, str, dict[str, Any]]:
    return (node, "relay_delivered", {"subscriberId": "tab", "subscriberConversation": sub_conv,
                                      "conversationId": "c1", "stream": S, "streamSeq": seq,
                                      "text": text, "trust": trust})


GOOD = [emitted("a"), frame(1, "a"), sent(1), emitted("b"), frame(2, "b"), sent(2),
        accepted(1, "a"), delivered(1, "a"), accepted(2, "b"), delivered(2, "b")]


def test_a_clean_stream_is_true() -> None:
    assert relay_integrity(hist(*GOOD, ("x", "pad", {}), ("x", "pad", {}), ("x", "pad", {}))).value is Value.TRUE


def test_each_broken_property_is_false() -> None:
    lost_text = [emitted("a"), emitted("b"), frame(1, "a")]
    assert relay_integrity(hist(*lost_text)).value is Value.FALSE
    never_accepted = [emitted("a"), frame(1, "a"), sent(1)] + [("x", "pad", {})] * 2500
    v = relay_integrity(History({"seq": i + 1, "tMs": float(i * 2), "node": n, "kind": k, **f}
                                for i, (n, k, f) in enumerate(never_accepted)))
    assert v.value is Value.FALSE and "neither accepted nor recorded as a gap" in v.counterexamples[0]["why"]
    dup = GOOD + [delivered(2, "b")]
    assert relay_integrity(hist(*dup)).value is Value.FALSE
    crosstalk = GOOD[:-1] + [delivered(2, "b", sub_conv="c2")]
    assert relay_integrity(hist(*crosstalk)).value is Value.FALSE
    wrong_trust = GOOD[:-1] + [delivered(2, "b", trust="verified")]
    assert relay_integrity(hist(*wrong_trust)).value is Value.FALSE
    wrong_text = GOOD[:-1] + [delivered(2, "B")]
    assert relay_integrity(hist(*wrong_text)).value is Value.FALSE


def test_a_recorded_gap_explains_a_missing_frame() -> None:
    events = [emitted("a"), frame(1, "a"), sent(1), emitted("b"), frame(2, "b"), sent(2),
              ("orch-1", "relay_gap", {"stream": S, "fromSeq": 1, "toSeq": 1}), accepted(2, "b")]
    assert relay_integrity(hist(*events, *[("x", "pad", {})] * 2500)).value is Value.TRUE


def test_a_frame_still_in_flight_at_the_end_is_unknown() -> None:
    assert relay_integrity(hist(emitted("a"), frame(1, "a"), sent(1))).value is Value.UNKNOWN


def test_relay_locality() -> None:
    attach = ("exec-1", "subscriber_attached", {"subscriberId": "tab", "conversationId": "c1"})
    detach = ("exec-1", "subscriber_detached", {"subscriberId": "tab", "conversationId": "c1"})
    assert relay_locality(hist(sent(1))).value is Value.TRUE
    assert relay_locality(hist(attach, sent(1))).value is Value.FALSE
    assert relay_locality(hist(attach, detach, sent(1))).value is Value.TRUE


def test_relay_metrics_from_a_history() -> None:
    from bench.metrics import relay_metrics
    h = History([
        {"seq": 1, "tMs": 0.0, "node": "orch-1", "kind": "request_sent", "requestId": "r1"},
        {"seq": 2, "tMs": 100.0, "node": "exec-1", "kind": "relay_frame", "stream": S,
         "streamSeq": 1, "text": "a", "taskId": "r1"},
        {"seq": 3, "tMs": 104.0, "node": "orch-1", "kind": "relay_delivered", "stream": S,
         "streamSeq": 1, "subscriberId": "tab", "text": "a"},
        {"seq": 4, "tMs": 200.0, "node": "exec-1", "kind": "relay_frame", "stream": S,
         "streamSeq": 2, "text": "b", "taskId": "r1"},
        {"seq": 5, "tMs": 210.0, "node": "orch-1", "kind": "relay_delivered", "stream": S,
         "streamSeq": 2, "subscriberId": "tab", "text": "b"},
    ])
    m = relay_metrics(h)
    assert m is not None
    assert m["event_latency_ms"]["max"] == 10.0 and m["event_latency_ms"]["p50"] == 4.0
    assert m["time_to_first_token_ms"]["p50"] == 104.0
    assert relay_metrics(History([])) is None
