"""The simulated broker on MQTT 5, against fake clients (no node), each behaviour as the
broker rows of `bench.spec.brokers` say, the way `a2a-bench brokers` measured Mosquitto:
properties forwarded unchanged, message expiry, shared subscriptions, will delay."""

from __future__ import annotations

import random

from bench.core.properties import Props
from bench.spec.distribution import fixed
from bench.spec.topology import LinkSpec
from bench.substrates.sim.broker import Connection, Message, SimBroker
from bench.substrates.sim.link import Link
from tests.sim.test_broker import Fake, setup


class Props5(Fake):
    """A fake client that keeps what each delivery carried."""

    def __init__(self) -> None:
        super().__init__()
        self.msgs: list[Message] = []

    def on_deliver(self, conn: Connection, msg: Message, pid: int, dup: bool) -> None:
        self.msgs.append(msg)
        super().on_deliver(conn, msg, pid, dup)


def conn5(broker: SimBroker, client: Fake, cid: str, *, will: Message | None = None,
          will_delay_s: int = 0, expiry_s: int = 60) -> Connection:
    client.broker = broker
    c = Connection(cid, client, Link(LinkSpec(fixed(1.0)), random.Random(0)), False, will,
                   "primary", session_expiry_s=expiry_s, will_delay_s=will_delay_s)
    broker.connect(c)
    return c


PROPS = Props(response_topic="$a2a/v1/reply/o/u/a/r1", correlation_data=b"\x00\xffc1",
              user_properties=(("a2a-status", "online"), ("k", "1"), ("k", "2")),
              content_type="application/json")


def test_properties_reach_the_subscriber_unchanged_retained_ones_too() -> None:
    env, broker, _ = setup("mosquitto")
    a = Props5()
    c = conn5(broker, a, "a")
    broker.subscribe(c, ("$a2a/v1/request/o/u/x",), 1)
    broker.publish(Message("$a2a/v1/request/o/u/x", b"{}", 1, False, PROPS))
    broker.publish(Message("$a2a/v1/discovery/o/u/x", b"card", 1, True, PROPS))
    broker.subscribe(c, ("$a2a/v1/discovery/o/u/+",), 1)
    env.run(10)
    assert [m.props for m in a.msgs] == [PROPS, PROPS]
    assert [m.retain for m in a.msgs] == [False, True]


def test_a_queued_message_past_its_expiry_is_not_delivered_the_rest_count_down() -> None:
    env, broker, _ = setup("mosquitto")
    a = Props5()
    c = conn5(broker, a, "a")
    broker.subscribe(c, ("t",), 1)
    broker.disconnect(c, graceful=True)
    broker.publish(Message("t", b"short", 1, False, Props(message_expiry_s=2)))
    broker.publish(Message("t", b"long", 1, False, Props(message_expiry_s=60)))
    env.run(3_500)
    conn5(broker, a, "a")
    env.run(3_600)
    assert [(m.payload, m.props.message_expiry_s if m.props else None) for m in a.msgs] == \
        [(b"long", 57)]
    assert broker.stats["expired_undelivered"] == 1


def test_a_shared_group_gets_each_message_once_members_in_turn() -> None:
    env, broker, _ = setup("generic")
    members = [Props5() for _ in range(3)]
    plain = Props5()
    for i, m in enumerate(members):
        broker.subscribe(conn5(broker, m, f"m{i}"), ("$share/g/jobs/+",), 1)
    broker.subscribe(conn5(broker, plain, "p"), ("jobs/+",), 1)
    for n in range(6):
        assert broker.publish(Message(f"jobs/{n}", b"x", 1)) == 2   # the group, and p
    env.run(10)
    assert [len(m.msgs) for m in members] == [2, 2, 2]
    assert len(plain.msgs) == 6
    assert sorted(msg.topic for m in members for msg in m.msgs) == [f"jobs/{n}" for n in range(6)]


def test_a_shared_member_away_is_passed_over_and_keeps_what_it_held() -> None:
    env, broker, _ = setup("generic")
    a, b = Props5(), Props5()
    ca = conn5(broker, a, "a")
    broker.subscribe(ca, ("$share/g/jobs",), 1)
    broker.subscribe(conn5(broker, b, "b"), ("$share/g/jobs",), 1)
    broker.disconnect(ca, graceful=False)
    for _ in range(3):
        broker.publish(Message("jobs", b"x", 1))
    env.run(10)
    assert (len(a.msgs), len(b.msgs)) == (0, 3)


def test_a_shared_filter_on_a_dollar_topic_as_each_broker_row_says() -> None:
    for model, delivered in (("generic", 1), ("mosquitto", 0)):
        env, broker, _ = setup(model)
        a = Props5()
        broker.subscribe(conn5(broker, a, "a"), ("$share/g/$a2a/v1/request/o/u/pool/p",), 1)
        matched = broker.publish(Message("$a2a/v1/request/o/u/pool/p", b"x", 1))
        env.run(10)
        assert (matched, len(a.msgs)) == (delivered, delivered), model


def test_a_will_waits_its_delay_and_is_not_sent_if_the_client_is_back() -> None:
    env, broker, _ = setup("mosquitto")
    watcher = Props5()
    broker.subscribe(conn5(broker, watcher, "w"), ("wills/+",), 1)
    a = Props5()
    will = Message("wills/a", b"gone", 1, False,
                   Props(user_properties=(("a2a-status", "offline"),)))
    ca = conn5(broker, a, "a", will=will, will_delay_s=2)
    broker.disconnect(ca, graceful=False)
    env.run(1_000)
    conn5(broker, a, "a", will=will, will_delay_s=2)     # back within the delay: no will
    env.run(3_000)
    assert watcher.msgs == []
    b = Props5()
    cb = conn5(broker, b, "b", will=Message("wills/b", b"gone", 1), will_delay_s=2)
    broker.disconnect(cb, graceful=False)               # at 3 s: its will is due at 5 s
    env.run(4_900)
    assert watcher.msgs == []
    env.run(5_100)
    assert [m.topic for m in watcher.msgs] == ["wills/b"]
