"""The simulated broker's MQTT 3.1.1 semantics, against fake clients (no node), and where
brokers differ, each row of `bench.spec.brokers.BEHAVIOURS` doing what it says."""

from __future__ import annotations

import random
from typing import Any

from bench.core.events import to_fields
from bench.spec.brokers import BEHAVIOURS, CLIENT
from bench.spec.distribution import fixed
from bench.spec.topology import LinkSpec
from bench.substrates.sim.broker import Connection, Message, Redelivery, SimBroker
from bench.substrates.sim.link import Link
from bench.substrates.sim.timers import SimEnvironment


class Fake:
    def __init__(self) -> None:
        self.got: list[tuple[str, bytes, bool, int]] = []
        self.lost: list[str] = []
        self.auto_ack = True
        self.broker: SimBroker | None = None

    def on_deliver(self, conn: Connection, msg: Message, pid: int, dup: bool) -> None:
        self.got.append((msg.topic, msg.payload, dup, pid))
        if self.auto_ack and self.broker is not None:
            self.broker.puback(conn, pid)

    def on_connection_lost(self, conn: Connection, reason: str) -> None:
        self.lost.append(reason)


def setup(model: str = "generic") -> tuple[SimEnvironment, SimBroker, list[tuple[str, Any]]]:
    env = SimEnvironment()
    records: list[tuple[str, Any]] = []
    broker = SimBroker(env, behaviour=BEHAVIOURS[model],
                       record=lambda e: records.append((e.KIND.value, to_fields(e))))
    return env, broker, records


def conn(broker: SimBroker, client: Fake, cid: str, clean: bool = False,
         will: Message | None = None) -> Connection:
    client.broker = broker
    c = Connection(cid, client, Link(LinkSpec(fixed(1.0)), random.Random(0)), clean, will, "primary")
    broker.connect(c)
    return c


def test_qos1_unacked_is_redelivered_with_dup_on_reconnect() -> None:
    env, broker, _ = setup()
    a = Fake()
    a.auto_ack = False
    c1 = conn(broker, a, "a")
    broker.subscribe(c1, ("t/+",), 1)
    broker.publish(Message("t/1", b"x", 1))
    env.run(10)
    assert [(t, d) for t, _, d, _ in a.got] == [("t/1", False)]
    broker.disconnect(c1, graceful=False)
    a.auto_ack = True
    c2 = conn(broker, a, "a")
    env.run(20)
    assert [(t, d) for t, _, d, _ in a.got] == [("t/1", False), ("t/1", True)]
    assert c2.alive


def test_offline_persistent_session_queues_qos1_and_drops_qos0() -> None:
    env, broker, _ = setup()
    a = Fake()
    c1 = conn(broker, a, "a")
    broker.subscribe(c1, ("t",), 1)
    broker.disconnect(c1, graceful=True)
    broker.publish(Message("t", b"q1", 1))
    broker.publish(Message("t", b"q0", 0))
    conn(broker, a, "a")
    env.run(10)
    assert [p for _, p, _, _ in a.got] == [b"q1"]
    assert broker.stats["dropped_offline_qos0"] == 1


def test_clean_session_forgets_subscriptions() -> None:
    env, broker, _ = setup()
    a = Fake()
    c1 = conn(broker, a, "a", clean=True)
    broker.subscribe(c1, ("t",), 1)
    broker.disconnect(c1, graceful=True)
    conn(broker, a, "a", clean=True)
    broker.publish(Message("t", b"x", 1))
    env.run(10)
    assert a.got == []


def test_retained_is_sent_on_subscribe_and_cleared_by_empty_payload() -> None:
    env, broker, _ = setup()
    broker.publish(Message("d/n1", b"hello", 1, retain=True))
    broker.publish(Message("d/n2", b"bye", 1, retain=True))
    broker.publish(Message("d/n2", b"", 1, retain=True))
    a = Fake()
    broker.subscribe(conn(broker, a, "a"), ("d/+",), 1)
    env.run(10)
    assert [(t, p) for t, p, _, _ in a.got] == [("d/n1", b"hello")]


def test_will_on_ungraceful_disconnect_only() -> None:
    env, broker, _ = setup()
    watcher = Fake()
    broker.subscribe(conn(broker, watcher, "w"), ("will/#",), 1)
    a, b = Fake(), Fake()
    ca = conn(broker, a, "a", will=Message("will/a", b"offline", 1))
    cb = conn(broker, b, "b", will=Message("will/b", b"offline", 1))
    broker.disconnect(ca, graceful=False)
    broker.disconnect(cb, graceful=True)
    env.run(10)
    assert [t for t, _, _, _ in watcher.got] == ["will/a"]


def test_overlapping_filters_amqtt_one_copy_per_filter_mosquitto_one_per_client() -> None:
    for model, copies in (("amqtt", 2), ("mosquitto", 1), ("generic", 2)):
        env, broker, _ = setup(model)
        a = Fake()
        broker.subscribe(conn(broker, a, "a"), ("x/#", "x/+"), 1)
        broker.publish(Message("x/y", b"m", 1))
        env.run(10)
        assert len(a.got) == copies


def test_duplicate_client_id_takes_the_session_over() -> None:
    env, broker, records = setup()
    a, b = Fake(), Fake()
    ca = conn(broker, a, "same", will=Message("w", b"gone", 1))
    broker.subscribe(ca, ("in/a",), 1)
    cb = conn(broker, b, "same")
    assert not ca.alive and cb.alive
    assert a.lost == ["session taken over by a new connection with the same client id"]
    assert records[0][0] == "session_takeover"
    broker.publish(Message("in/a", b"for a", 1))
    env.run(10)
    assert [p for _, p, _, _ in b.got] == [b"for a"]   # the impostor inherited a's session


def test_broker_crash_without_persistence_loses_sessions() -> None:
    for persistence, expected in ((True, [b"later"]), (False, [])):
        env, broker, _ = setup()
        a = Fake()
        broker.subscribe(conn(broker, a, "a"), ("t",), 1)
        broker.crash(persistence)
        assert a.lost == ["broker crashed"]
        broker.start()
        conn(broker, a, "a")
        broker.publish(Message("t", b"later", 1))
        env.run(10)
        assert [p for _, p, _, _ in a.got] == expected


def test_delayed_redelivery_fault_resends_after_the_ack() -> None:
    env, broker, records = setup()
    broker.redelivery = Redelivery(1.0, fixed(5000.0), random.Random(0), index=3)
    a = Fake()
    broker.subscribe(conn(broker, a, "a"), ("t",), 1)
    broker.publish(Message("t", b"m", 1))
    env.run(4000)
    assert len(a.got) == 1
    env.run(6000)
    assert [(p, d) for _, p, d, _ in a.got][:2] == [(b"m", False), (b"m", True)]
    fired = [f for k, f in records if k == "fault_fired"]
    assert fired and fired[0]["faultIndex"] == 3


def test_the_redelivery_fault_resends_a_delivery_once_not_its_copies_again() -> None:
    """With probability 1 each copy's PUBACK drew again and re-sent it: a storm of copies
    until the run ended (explore seed 4 run 746: a 30 s draft wrote 1.5 GB of history and
    hung). A delivery is re-sent once at most; its copy's PUBACK ends it."""
    env, broker, records = setup()
    broker.redelivery = Redelivery(1.0, fixed(50.0), random.Random(0), index=0)
    a = Fake()
    broker.subscribe(conn(broker, a, "a"), ("t",), 1)
    for k in range(3):
        broker.publish(Message("t", f"m{k}".encode(), 1))
    env.run(10_000)
    assert sorted((p, d) for _, p, d, _ in a.got) == [
        (b"m0", False), (b"m0", True), (b"m1", False), (b"m1", True), (b"m2", False),
        (b"m2", True)]
    assert len([f for k, f in records if k == "fault_fired"]) == 3


def test_a_takeover_publishes_the_will_its_row_says() -> None:
    for model, wills in (("generic", []), ("mosquitto", []), ("amqtt", [b"new"])):
        env, broker, records = setup(model)
        w, a, b = Fake(), Fake(), Fake()
        broker.subscribe(conn(broker, w, "watch"), ("w",), 1)
        conn(broker, a, "same", will=Message("w", b"old", 1))
        conn(broker, b, "same", will=Message("w", b"new", 1))
        env.run(10)
        assert [p for _, p, _, _ in w.got] == wills, model
        whose = [f["will"] for k, f in records if k == "takeover_will"]
        assert whose == (["new"] if wills else ["none"]), model


def test_amqtt_loses_what_was_in_flight_when_a_session_resumes() -> None:
    for model, again in (("generic", 1), ("mosquitto", 1), ("amqtt", 0)):
        env, broker, _ = setup(model)
        a = Fake()
        a.auto_ack = False
        c1 = conn(broker, a, "a")
        broker.subscribe(c1, ("t",), 1)
        broker.publish(Message("t", b"x", 1))
        env.run(10)
        broker.disconnect(c1, graceful=False)
        conn(broker, a, "a")
        env.run(20)
        assert sum(d for _, _, d, _ in a.got) == again, model


def test_a_graceful_stop_publishes_every_will_before_closing_where_the_row_says() -> None:
    for model, graceful, wills in (("mosquitto", True, [b"gone"]), ("mosquitto", False, []),
                                   ("generic", True, []), ("amqtt", True, [])):
        env, broker, _ = setup(model)
        w, a = Fake(), Fake()
        broker.subscribe(conn(broker, w, "watch"), ("w",), 1)
        conn(broker, a, "a", will=Message("w", b"gone", 1))
        broker.crash(persistence=True, graceful=graceful)
        env.run(10)   # the will was written before the close: it still arrives (FIN)
        assert [p for _, p, _, _ in w.got] == wills, (model, graceful)


def test_a_silent_client_is_closed_with_its_will_when_the_row_says() -> None:
    for model in ("generic", "mosquitto", "amqtt"):
        env, broker, _ = setup(model)
        w, a = Fake(), Fake()
        broker.subscribe(conn(broker, w, "watch"), ("w",), 1)
        ca = conn(broker, a, "a", will=Message("w", b"gone", 1))
        ca.link.up = False
        ca.link.downs += 1
        broker.silent(ca, lambda: True, notify=False)
        window = BEHAVIOURS[model].keepalive_close_ms(CLIENT.keepalive_s)
        if window is None:
            env.run(600_000)
            assert ca.alive and not w.got, model     # amqtt: never
            continue
        low, high = window     # silent since its CONNECT at 0; Mosquitto sweeps every 6 s
        env.run(low - 1)
        assert ca.alive, model
        env.run(high + 10)
        assert not ca.alive and [p for _, p, _, _ in w.got] == [b"gone"], model


def test_amqtt_keeps_nothing_over_a_restart_whatever_the_fault_asks() -> None:
    env, broker, _ = setup("amqtt")
    a = Fake()
    broker.subscribe(conn(broker, a, "a"), ("t",), 1)
    broker.crash(persistence=True, graceful=True)
    broker.start()
    conn(broker, a, "a")
    broker.publish(Message("t", b"later", 1))
    env.run(10)
    assert a.got == []


def test_mqtt5_a_session_ends_with_its_expiry_interval_and_not_before() -> None:
    """MQTT 5 §3.1.2.11.2: a disconnected session lives for its Session Expiry Interval;
    resumed within it, it is present with what it queued; after it, it is gone."""
    env, broker, _ = setup()
    a = Fake()

    def v5(expiry: int) -> Connection:
        a.broker = broker
        c = Connection("a", a, Link(LinkSpec(fixed(1.0)), random.Random(0)), False, None,
                       "primary", session_expiry_s=expiry)
        return c
    first = v5(2)
    assert broker.connect(first) is False
    broker.subscribe(first, ("t",), 1)
    broker.disconnect(first, graceful=True)
    broker.publish(Message("t", b"kept", 1))
    env.run(1_500)
    assert broker.connect(again := v5(2)) is True     # within 2 s: resumed, queue delivered
    env.run(1_600)
    assert [p for _, p, _, _ in a.got] == [b"kept"]
    broker.disconnect(again, graceful=True)
    broker.publish(Message("t", b"lost", 1))
    env.run(5_000)
    assert broker.connect(v5(2)) is False             # 3.4 s later: expired, a new session
    env.run(5_100)
    assert [p for _, p, _, _ in a.got] == [b"kept"] and broker.stats["sessions_expired"] == 1


def test_mqtt5_zero_expiry_ends_the_session_with_its_connection() -> None:
    env, broker, _ = setup()
    a = Fake()
    a.broker = broker
    c = Connection("a", a, Link(LinkSpec(fixed(1.0)), random.Random(0)), False, None,
                   "primary", session_expiry_s=0)
    broker.connect(c)
    broker.disconnect(c, graceful=True)
    assert "a" not in broker.sessions
