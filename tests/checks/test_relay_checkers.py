"""The relay checkers on small hand-written histories with known verdicts."""

from __future__ import annotations

from bench.checks import Value, Verdict
from bench.core import events as ev
from bench.history import History
from bench.protocols.seed.rules.relay import RELAY_INTEGRITY, RELAY_LOCALITY
from tests.helpers import booted, history

S = "c1|llm.tax"


def emitted(text: str) -> ev.Event:
    return ev.FlowEmitted(S, "c1", "llm.tax", "r1", "token", text, node="exec-1")


def frame(seq: int, text: str, node: str = "exec-1") -> ev.Event:
    return ev.RelayFrame(S, seq, "token", text, "c1", "r1", node=node)


def sent(seq: int) -> ev.Event:
    return ev.RelaySent(S, seq, f"m{seq}", "c1", "orch-1", node="exec-1")


def accepted(seq: int, text: str) -> ev.Event:
    return ev.RelayAccepted(S, seq, text, "c1", node="orch-1")


def delivered(seq: int, text: str, sub_conv: str = "c1", trust: str = "claimed",
              node: str = "orch-1") -> ev.Event:
    return ev.RelayDelivered("tab", sub_conv, "c1", S, seq, "token", text, "lane", trust,
                             node=node)


def pad(n: int) -> list[ev.Event]:
    return [ev.LedgerFlushed(0, 0, 0, 0, node="x")] * n


GOOD = [emitted("a"), frame(1, "a"), sent(1), emitted("b"), frame(2, "b"), sent(2),
        accepted(1, "a"), delivered(1, "a"), accepted(2, "b"), delivered(2, "b")]


def rules_of(v: object) -> set[str]:
    return {c["rule"] for c in v.counterexamples}


def test_a_clean_stream_is_true() -> None:
    assert RELAY_INTEGRITY(history(*GOOD, *pad(3), boots=False)).value is Value.TRUE


def test_each_broken_property_is_false() -> None:
    lost_text = [emitted("a"), emitted("b"), frame(1, "a")]
    assert rules_of(RELAY_INTEGRITY(history(*lost_text, *pad(2500), boots=False,
                                            step_ms=2.0))) == {"frames_carry_the_flow"}
    # emitted just before the end, it may still be coalescing: undecided, not lost
    v = RELAY_INTEGRITY(history(*lost_text, boots=False))
    assert v.value is Value.UNKNOWN and v.counts["thinking_pending_at_end"] == 1
    never_accepted = [emitted("a"), frame(1, "a"), sent(1), *pad(2500)]
    v = RELAY_INTEGRITY(history(*never_accepted, boots=False, step_ms=2.0))
    assert v.value is Value.FALSE
    assert "neither accepted nor recorded as a gap" in v.counterexamples[0]["why"]
    dup = GOOD + [delivered(2, "b")]
    assert rules_of(RELAY_INTEGRITY(history(*dup, boots=False))) == {"delivered_in_order_once"}
    crosstalk = GOOD[:-1] + [delivered(2, "b", sub_conv="c2")]
    assert rules_of(RELAY_INTEGRITY(history(*crosstalk, boots=False))) == \
        {"delivered_to_its_conversation"}
    wrong_trust = GOOD[:-1] + [delivered(2, "b", trust="verified")]
    assert rules_of(RELAY_INTEGRITY(history(*wrong_trust, boots=False))) == {"trust_labels"}
    wrong_text = GOOD[:-1] + [delivered(2, "B")]
    assert RELAY_INTEGRITY(history(*wrong_text, boots=False)).value is Value.FALSE


def test_a_recorded_gap_explains_a_missing_frame() -> None:
    events = [emitted("a"), frame(1, "a"), sent(1), emitted("b"), frame(2, "b"), sent(2),
              ev.RelayGap(S, 1, 1, "test", node="orch-1"), accepted(2, "b")]
    assert RELAY_INTEGRITY(history(*events, *pad(2500), boots=False)).value is Value.TRUE


def test_a_frame_still_in_flight_at_the_end_is_unknown() -> None:
    v = RELAY_INTEGRITY(history(emitted("a"), frame(1, "a"), sent(1), boots=False))
    assert v.value is Value.UNKNOWN


def test_relay_locality() -> None:
    attach = ev.SubscriberAttached("tab", "c1", node="exec-1")
    detach = ev.SubscriberDetached("tab", "c1", node="exec-1")
    assert RELAY_LOCALITY(history(frame(1, "a"), sent(1), boots=False)).value is Value.TRUE
    assert RELAY_LOCALITY(history(frame(1, "a"), attach, sent(1), boots=False)).value \
        is Value.FALSE
    assert RELAY_LOCALITY(history(frame(1, "a"), attach, detach, sent(1), boots=False)).value \
        is Value.TRUE


def test_relay_metrics_from_a_history() -> None:
    from dataclasses import replace

    from bench.metrics import relay_metrics
    events = [(0.0, ev.RequestSent("r1", "m", "fin.o", "llm.tax", "c1", 10_000, 10_000, node="orch-1")),
              (100.0, frame(1, "a")), (104.0, delivered(1, "a")),
              (200.0, frame(2, "b")), (210.0, delivered(2, "b"))]
    h = History(replace(e, seq=i + 1, t_ms=t) for i, (t, e) in enumerate(events))
    m = relay_metrics(h)
    assert m is not None
    assert m["event_latency_ms"]["max"] == 10.0 and m["event_latency_ms"]["p50"] == 4.0
    assert m["time_to_first_token_ms"]["p50"] == 104.0
    assert relay_metrics(History([])) is None


def test_a_frame_lost_for_a_recorded_reason_is_accounted_unless_the_home_saw_past_it() -> None:
    def judged(*why: ev.Event, later: bool = False) -> Value:
        events = [emitted("a"), frame(1, "a"), sent(1), *why]
        if later:   # the home accepted frame 2: frame 1's gap was its to declare
            events += [emitted("b"), frame(2, "b"), sent(2), accepted(2, "b")]
        return RELAY_INTEGRITY(history(*events, *pad(2500), boots=False, step_ms=2.0)).value

    refused = ev.InboundDropped("AUTH_REJECTED", "BAD_SIGNATURE", "ooder/node/orch-1/inbox",
                                "m1", "FLOW_EVENT", "llm.tax", None, "BAD_SIGNATURE", 1,
                                node="orch-1")
    elsewhere = ev.InboundDropped("AUTH_REJECTED", "x", None, "m1", "FLOW_EVENT", None, None,
                                  None, 1, node="exec-2")
    crash = ev.NodeCrashed(0, "test", None, node="exec-1")
    takeover = ev.MqttConnected("orch-1", True, node="exec-2")
    assert judged(refused) is Value.TRUE
    assert judged(refused, later=True) is Value.FALSE
    assert judged(elsewhere) is Value.FALSE
    assert judged(crash) is Value.TRUE
    assert judged(crash, later=True) is Value.FALSE
    # published (acknowledged) before the crash: the crash does not explain it
    acked = ev.OutboundSettled("m1", "FLOW_EVENT", "PUBLISHED", "test", None, "orch-1", None,
                               "ooder/node/orch-1/inbox", node="exec-1")
    assert judged(acked, crash) is Value.FALSE
    assert judged(booted("orch-1"), takeover) is Value.TRUE
    assert judged(booted("orch-1"), takeover, later=True) is Value.FALSE


def test_a_home_back_from_a_crash_with_its_cursor_past_a_frame_makes_it_unknown() -> None:
    """The home accepted frame 2 in the process that died (its cursor was committed), before
    its record got out: the restarted home calls the redelivered copy a duplicate with the
    cursor at 2. Undecided, not lost; without the crash in between it is a violation."""
    crash = ev.NodeCrashed(None, "SIGKILL", None, node="orch-1")
    back = ev.NodeStarted("b2", "fin", "orch-1", "loose", "1", node="orch-1")
    dup = ev.RelayDuplicate(S, 2, 2, "m2", node="orch-1")
    third = [emitted("c"), frame(3, "c"), sent(3)]
    after = [dup, accepted(3, "c"), delivered(3, "c")]
    first = [*GOOD[:6], accepted(1, "a"), delivered(1, "a")]

    def judged(*events: ev.Event) -> Verdict:
        return RELAY_INTEGRITY(history(*events, *pad(2500), boots=False, step_ms=2.0))
    v = judged(*first, crash, *third, back, *after)
    assert v.value is Value.UNKNOWN, v.counterexamples
    assert v.counts["relayed_accepted_by_a_home_that_died_before_recording_it"] == 1
    assert judged(*first, *third, *after).value is Value.FALSE
    assert judged(crash, back, *first, *third, *after).value is Value.FALSE


def test_seqs_run_one_to_n_and_may_skip_only_across_a_producer_crash() -> None:
    crash = ev.NodeCrashed(None, "SIGKILL", None, node="exec-1")

    def seq_rule(*events: ev.Event) -> dict[str, int]:
        return RELAY_INTEGRITY(history(*events, boots=False)).rules["seqs_are_one_to_n"]
    assert seq_rule(frame(1, "a"), frame(2, "b"))["violations"] == 0
    assert seq_rule(frame(1, "a"), frame(3, "b"))["violations"] == 1       # skipped
    assert seq_rule(frame(1, "a"), crash, frame(3, "b"))["violations"] == 0
    assert seq_rule(frame(1, "a"), crash, frame(1, "b"))["violations"] == 1  # from 1 again
    assert seq_rule(frame(2, "a"))["violations"] == 1                        # never framed 1


def test_gaps_are_well_formed_and_disjoint_from_what_was_accepted() -> None:
    def gap(lo: int, hi: int) -> ev.Event:
        return ev.RelayGap(S, lo, hi, "test", node="orch-1")

    def gap_rule(*events: ev.Event) -> dict[str, int]:
        return RELAY_INTEGRITY(history(*events, boots=False)).rules[
            "gaps_and_acceptances_consistent"]
    assert gap_rule(accepted(1, "a"), gap(2, 3), accepted(4, "d"))["violations"] == 0
    assert gap_rule(accepted(1, "a"), gap(1, 2))["violations"] == 1       # over an accepted
    assert gap_rule(gap(2, 1))["violations"] == 1                         # backwards
    assert gap_rule(gap(2, 4), gap(4, 5))["violations"] == 1              # declared twice
    assert gap_rule(accepted(1, "a"), accepted(1, "a"))["violations"] == 1
