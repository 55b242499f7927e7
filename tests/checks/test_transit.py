"""Losses the journal explains, shared by the delivery, gate, relay and attack rules
(network.Transit), and freshness judged on a clock a fault set off."""

from __future__ import annotations

from bench.checks import Value
from bench.core import events as ev
from bench.protocols.seed.rules.auth import AUTH_ADMISSION
from bench.protocols.seed.rules.delivery import QOS1_DELIVERY
from tests.helpers import booted, fault_healed, fault_start, history, outbound

SENT = outbound("m1", "PUBLISHED", target="exec-1", topic="ooder/node/exec-1/inbox")


def qos1(*events: ev.Event) -> Value:
    return QOS1_DELIVERY(history(*events, step_ms=1_000)).value


def test_a_message_on_a_lossy_link_or_to_a_node_cut_off_until_the_end_is_unknown() -> None:
    assert qos1(SENT, booted(), booted()) is Value.FALSE
    lossy = fault_start("loss", nodes=["exec-1"], probability=0.5)
    assert qos1(lossy, SENT, booted(), booted()) is Value.UNKNOWN
    # healed, and the target's connection had caught up (a message it sent after the heal
    # was acknowledged) before this one was accepted: it should have arrived
    caught_up = [ev.RelaySent("s", 1, "x1", "c", "orch-1", node="exec-1"),
                 outbound("x1", "PUBLISHED", target="orch-1", node="exec-1")]
    healed = fault_healed("loss")
    assert qos1(lossy, healed, *caught_up, SENT, booted(), booted()) is Value.FALSE
    # not yet caught up: it may be queued behind what the loss made TCP send again
    assert qos1(lossy, healed, SENT, booted(), booted()) is Value.UNKNOWN
    cut = fault_start("partition", nodes=["exec-1"])
    assert qos1(cut, SENT, booted(), booted()) is Value.UNKNOWN
    assert qos1(cut, fault_healed("partition"), SENT, booted(), booted()) is Value.FALSE


def test_a_takeover_just_after_the_message_was_accepted_explains_it() -> None:
    takeover = ev.MqttConnected("exec-1", True, node="exec-2")
    # the session handed what it still held to the impostor: within the in-flight window
    later = [booted()] * 8
    assert QOS1_DELIVERY(history(booted("exec-1"), SENT, takeover, *later,
                                 step_ms=500)).value is Value.TRUE
    assert QOS1_DELIVERY(history(booted("exec-1"), SENT, *later, takeover, *later,
                                 step_ms=500)).value is Value.FALSE
    # once the borrower's connection is gone, a loss is no longer the takeover's doing
    # (amqtt keeps delivering the real node's messages nowhere: that must show)
    gone = ev.MqttDisconnected("exec-1", "taken over", node="exec-2")
    assert QOS1_DELIVERY(history(booted("exec-1"), takeover, gone, *later, SENT, *later,
                                 step_ms=500)).value is Value.FALSE
    assert QOS1_DELIVERY(history(booted("exec-1"), takeover, SENT, gone, *later,
                                 step_ms=500)).value is Value.TRUE


def attack(honest: str) -> ev.AttackSent:
    return ev.AttackSent("replay", "fresh", 0, "m1", "r1", "exec-1", "llm.tax", "fin.orch",
                         "fin.orch", honest, node="nemesis")


def judged(honest: str, recorded: str, *faults: ev.Event) -> set[str]:
    drop = ev.InboundDropped("AUTH_REJECTED", recorded, "ooder/node/exec-1/inbox", "m1",
                             "TASK_REQUEST", "fin.orch", "r1", recorded, 1, node="exec-1")
    v = AUTH_ADMISSION(history(*faults, attack(honest), drop))
    return {c["rule"] for c in v.counterexamples}


def test_freshness_may_differ_only_on_a_clock_a_fault_set_off() -> None:
    skew = fault_start("clock_skew", node="exec-1", skew_ms=400_000)
    assert "verdict_is_honest" in judged("VERIFIED", "STALE")
    assert "verdict_is_honest" not in judged("VERIFIED", "STALE", skew)
    # the skew excuses freshness alone, and only on the node whose clock it set off
    assert "verdict_is_honest" in judged("BAD_SIGNATURE", "VERIFIED", skew)
    other = fault_start("clock_skew", node="exec-2", skew_ms=400_000)
    assert "verdict_is_honest" in judged("VERIFIED", "STALE", other)


def test_a_message_accepted_before_its_target_first_subscribed_had_nowhere_to_go() -> None:
    up = ev.MqttConnected("orch-1", False, node="orch-1")
    inbox = ev.ExecutorsRegistered(2, 2, [], ["ooder/node/exec-1/inbox"], node="exec-1")
    later = [booted()] * 4
    assert QOS1_DELIVERY(history(up, SENT, inbox, *later * 20, step_ms=50)).value is Value.TRUE
    # acknowledged well after the target's SUBACK: it was routable, and it is lost
    assert QOS1_DELIVERY(history(up, inbox, *later * 3, SENT, *later * 20,
                                 step_ms=50)).value is Value.FALSE


def test_a_puback_a_lossy_link_slowed_may_belong_to_a_message_still_in_the_loss() -> None:
    both = fault_start("loss", nodes=["orch-1", "exec-1"], probability=0.5)
    target_only = fault_start("loss", nodes=["exec-1"], probability=0.5)
    tail = [booted()] * 60
    # acknowledged after the heal, but the publisher's own link was losing: the broker may
    # have taken it in during the loss and still be retransmitting it to the target
    assert QOS1_DELIVERY(history(both, *tail[:10], fault_healed("loss"), *tail[:10], SENT,
                                 *tail, step_ms=50)).value is Value.UNKNOWN
    # only the target's link lost, and it had caught up before the message was accepted
    caught_up = [ev.RelaySent("s", 1, "x1", "c", "orch-1", node="exec-1"),
                 outbound("x1", "PUBLISHED", target="orch-1", node="exec-1")]
    assert QOS1_DELIVERY(history(target_only, *tail[:10], fault_healed("loss"), *caught_up,
                                 *tail[:10], SENT, *tail, step_ms=50)).value is Value.FALSE

