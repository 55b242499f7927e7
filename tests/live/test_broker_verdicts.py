"""The brokers the bench starts by name, judged by their MUSTs (`a2a-bench brokers --broker
NAME`): what each broke on its pinned version is pinned here, expected FALSE, so a release
that fixes one is noticed; what each keeps, TRUE. docs/findings/brokers.md has the grid, the
packets and the clauses.

Each FALSE is seen a second way too, by a client the bench did not write (paho), in the
tests below the table: a finding two independent clients agree on is the broker's, not a
probe's. Verdicts that hang on a time bound (a silent client given up at 3.0 s against 3.5 s)
are not pinned: on a loaded machine they measure the machine.

The brokers .ci/run installs are named in A2A_BENCH_REQUIRED_BROKERS, and a test of one
missing there fails; any other not installed is skipped, naming its install command. rmqttd
takes some 40 minutes of one core to build: .ci/run builds it beside the suite and runs its
tests (`-k rmqttd`) after, with rmqttd required."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from bench.spec.topology import MqttVersion
from bench.substrates.live.brokers import Broker, make_broker
from bench.substrates.live.facts import FALSE, TRUE, UNKNOWN, Fact, again_alone, measure
from bench.substrates.live.kinds import KINDS

pytestmark = pytest.mark.slow

#: What each broker was measured to keep and to break (2026-12-06, docs/findings/brokers.md)
PINNED: dict[str, dict[str, str]] = {
    "rumqttd": {
        "redelivery": FALSE,                # resent with DUP=0, a new packet id
        "keepalive_receiving": FALSE,       # never gives up a silent client it sends to
        "session_expiry": FALSE,            # a session kept past its expiry [MQTT-4.1.0-2]
        "receive_maximum": FALSE,           # 5 in flight to a client that allows 2
        "shared_subscription": FALSE,       # a dropped member's in-flight lost
        "profile_paths": FALSE,             # a SUBSCRIBE to $a2a/... closes the connection
        "retain_flags": TRUE, "user_properties": TRUE, "request_response": TRUE,
        "message_expiry": TRUE, "takeover_will": TRUE,
    },
    "rabbitmq": {
        "keepalive": FALSE,                 # gives a silent client up at 3 x, not 1.5 x
        "redelivery": FALSE,                # resent with DUP=1 under a new packet id
        "retain_flags": TRUE, "takeover_will": TRUE,
        "subscribe_while_connecting": TRUE,
    },
    # (its will_delay and user_properties FALSE are not pinned: a paho client saw a delayed
    # will published, and a will's User Property kept, where the bench's raw client did
    # not — disputed until one knows which client ejabberd treats differently, and why)
    "ejabberd": {
        "message_expiry": FALSE,            # an expired message delivered [MQTT-3.3.2-5]
        "profile_paths": FALSE,             # $a2a/... publishes and wills refused (0x90)
        "redelivery": TRUE, "retain_flags": TRUE, "session_expiry": TRUE,
        "request_response": TRUE, "receive_maximum": TRUE,
    },
}
#: iotcore 0.4.0 is rumqttd in a Python wheel: the same verdicts
PINNED["iotcore"] = PINNED["rumqttd"]
#: rmqttd 0.24.0 with its retainer and shared-subscription plugins: the one broker here that
#: serves every path the A2A-over-MQTT profile needs (a pool on $a2a/... included)
PINNED["rmqttd"] = {
    "keepalive": FALSE,                     # a silent client given up after 5 s, not 3
    "profile_paths": TRUE, "shared_subscription": TRUE, "redelivery": TRUE,
    "session_expiry": TRUE, "message_expiry": TRUE, "user_properties": TRUE,
    "request_response": TRUE, "receive_maximum": TRUE, "retain_flags": TRUE,
}


def installed(name: str) -> None:
    """Skip where `name` is not installed, naming its install command — unless it is one of
    A2A_BENCH_REQUIRED_BROKERS (space-separated; what .ci/run installs), where that fails."""
    kind = KINDS[name]
    if not kind.installed:
        if name in os.environ.get("A2A_BENCH_REQUIRED_BROKERS", "").split():
            pytest.fail(kind.missing())
        pytest.skip(kind.missing())


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder every user can reach (pytest's lets only root through, and ejabberd runs as
    its own user)."""
    with tempfile.TemporaryDirectory(prefix="a2a-bench-test-", dir="/tmp") as d:
        os.chmod(d, 0o755)
        yield Path(d)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_a_broker_keeps_and_breaks_what_its_pinned_version_did(name: str,
                                                               reachable: Path) -> None:
    installed(name)
    facts = {f.name: f for f in measure(name, reachable)}
    wrong = {fact: (facts[fact].verdict, facts[fact].value, facts[fact].detail)
             if fact in facts else None for fact, verdict in PINNED[name].items()
             if fact not in facts or facts[fact].verdict != verdict}
    assert not wrong, f"{name}: {wrong} (pinned: {PINNED[name]})"
    assert any(f.broken for f in facts.values())   # `a2a-bench brokers` exits 1 on it


def test_a_probe_whose_connection_failed_beside_the_others_is_measured_again_alone() -> None:
    """An error is no verdict: the probe runs once more, alone; an error that recurs is
    said with both details (the retry a loaded CI run needed for rumqttd's redelivery)."""
    tries: dict[str, int] = {}

    def probe(name: str, fails: int) -> Callable[[], Awaitable[Fact]]:
        async def measured() -> Fact:
            tries[name] = tries.get(name, 0) + 1
            if tries[name] <= fails:
                raise ConnectionError(f"closed {tries[name]}")
            return Fact(name, "resent", verdict=FALSE)
        measured.__name__ = name
        return measured

    async def one(p: Callable[[], Awaitable[Fact]]) -> Fact:
        try:
            return await p()
        except ConnectionError as exc:
            return Fact(p.__name__, "error", f"ConnectionError: {exc}", verdict=UNKNOWN)

    async def measured() -> list[Fact]:
        probes = (probe("fine", 0), probe("once", 1), probe("twice", 2))
        return await again_alone(probes, await asyncio.gather(*(one(p) for p in probes)), one)

    fine, once, twice = asyncio.run(measured())
    assert (fine.value, once.value, twice.value) == ("resent", "resent", "error")
    assert tries == {"fine": 1, "once": 2, "twice": 2}
    assert twice.verdict == UNKNOWN and once.verdict == FALSE
    assert once.detail == " (measured alone; beside the others: ConnectionError: closed 1)"
    assert twice.detail == "ConnectionError: closed 2 (and beside the others: " \
                           "ConnectionError: closed 1)"


def test_a_fact_with_a_false_must_is_broken_and_a_measured_one_is_not() -> None:
    assert Fact("x", "v", clause="[MQTT-1]", level="MUST", verdict=FALSE).broken
    assert Fact("x", "v", clause="A2M-QOS-1", level="PROFILE", verdict=FALSE).broken
    assert not Fact("x", "v", clause="[MQTT-1]", level="MUST", verdict=None).broken
    assert not Fact("x", "v", clause="[MQTT-1]", level="MUST", verdict=TRUE).broken


# -- each FALSE again, by paho ----------------------------------------------------------------
@pytest.fixture
def started(request: pytest.FixtureRequest, reachable: Path) -> Iterator[Broker]:
    name, version = request.param
    installed(name)
    broker = make_broker(name, reachable / "broker", version=version)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def paho_client(broker: Broker, client_id: str, version: MqttVersion, *, clean: bool = True,
                will: tuple[str, bytes, Properties | None] | None = None,
                expiry_s: int | None = None) -> tuple[mqtt.Client, list[mqtt.MQTTMessage],
                                                      list[object]]:
    """A paho client connected to `broker` (its login where it has one), the messages it got
    and the CONNACK reason it was answered with."""
    v5 = version is MqttVersion.V5
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                    protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
                    **({} if v5 else {"clean_session": clean}))
    if broker.username:
        c.username_pw_set(broker.username, broker.password)
    got: list[mqtt.MQTTMessage] = []
    connack: list[object] = []
    c.on_message = lambda _c, _u, m: got.append(m)
    c.on_connect = lambda _c, _u, _f, rc, _p: connack.append(rc)
    if will is not None:
        c.will_set(will[0], will[1], qos=1, retain=True, properties=will[2])
    props = None
    if v5:
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 0 if clean else (expiry_s or 300)
    c.connect(broker.host, broker.port, keepalive=60,
              **({"clean_start": clean, "properties": props} if v5 else {}))
    c.loop_start()
    until(lambda: bool(connack), 5.0)
    return c, got, connack


def until(cond: object, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if cond():   # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V311),
                                     ("iotcore", MqttVersion.V311)], indirect=True)
def test_rumqttd_resends_an_unacknowledged_message_without_dup(started: Broker) -> None:
    """[MQTT-3.3.1-1]: a re-delivery MUST carry DUP=1. A paho subscriber with a persistent
    session that never acknowledges (manual ack, dropped without DISCONNECT) gets the
    message again on resume, with DUP=0."""
    v = MqttVersion.V311
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="dup-sub",
                      protocol=mqtt.MQTTv311, clean_session=False, manual_ack=True)
    first: list[mqtt.MQTTMessage] = []
    sub.on_message = lambda _c, _u, m: first.append(m)
    sub.connect(started.host, started.port)
    sub.loop_start()
    sub.subscribe("dup/t", qos=1)
    time.sleep(0.5)
    pub, _, _ = paho_client(started, "dup-pub", v)
    pub.publish("dup/t", b"m1", qos=1).wait_for_publish(5)
    assert until(lambda: bool(first), 5.0)
    sub.loop_stop()
    sub.socket().close()          # dropped, the message never acknowledged
    time.sleep(0.5)
    again, got, _ = paho_client(started, "dup-sub", v, clean=False)
    assert until(lambda: bool(got), 5.0), "not resent at all"
    assert [m.dup for m in got] == [False]
    for c in (again, pub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("rabbitmq", MqttVersion.V311)], indirect=True)
def test_rabbitmq_resends_an_unacknowledged_message_under_a_new_packet_id(
        started: Broker) -> None:
    """[MQTT-4.4.0-1]: a resumed session's unacknowledged PUBLISH is re-sent under its
    original Packet Identifier. A paho subscriber (manual ack, persistent session)
    acknowledges two messages and not the third, then drops: on resume the third comes
    back with DUP=1 — and a packet id of its own, not the one it had."""
    v = MqttVersion.V311
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="pid-sub",
                      protocol=mqtt.MQTTv311, clean_session=False, manual_ack=True)
    first: list[mqtt.MQTTMessage] = []
    sub.on_message = lambda _c, _u, m: first.append(m)
    sub.username_pw_set(started.username, started.password)
    sub.connect(started.host, started.port)
    sub.loop_start()
    sub.subscribe("pid/t", qos=1)
    time.sleep(0.5)
    pub, _, _ = paho_client(started, "pid-pub", v)
    for payload in (b"m1", b"m2", b"m3"):
        pub.publish("pid/t", payload, qos=1).wait_for_publish(5)
    assert until(lambda: len(first) == 3, 5.0)
    for m in first[:2]:
        sub.ack(m.mid, m.qos)
    time.sleep(0.5)
    sub.loop_stop()
    sub.socket().close()          # dropped, the third never acknowledged
    time.sleep(0.5)
    again, got, _ = paho_client(started, "pid-sub", v, clean=False)
    assert until(lambda: bool(got), 5.0), "not resent at all"
    assert [(m.payload, m.dup) for m in got] == [(b"m3", True)]
    assert got[0].mid != first[2].mid, (got[0].mid, first[2].mid)
    for c in (again, pub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V5),
                                     ("iotcore", MqttVersion.V5)], indirect=True)
def test_rumqttd_closes_the_connection_on_a_subscribe_to_a_dollar_topic(started: Broker) -> None:
    """[MQTT-3.8.4-1]: a SUBSCRIBE is answered with a SUBACK. To `$a2a/v1/request/...` —
    every A2A-over-MQTT responder's request topic — rumqttd answers by closing the
    connection: no profile agent can subscribe its requests there."""
    c, _, _ = paho_client(started, "dollar-sub", MqttVersion.V5)
    acked: list[object] = []
    gone: list[object] = []
    c.on_subscribe = lambda *_a: acked.append(1)
    c.on_disconnect = lambda *_a: gone.append(1)
    c.subscribe("$a2a/v1/request/acme/billing/tax1", qos=1)
    assert until(lambda: bool(gone), 5.0) and not acked
    c.loop_stop()


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V5),
                                     ("iotcore", MqttVersion.V5)], indirect=True)
def test_rumqttd_resumes_a_session_past_its_expiry(started: Broker) -> None:
    """[MQTT-4.1.0-2]: a session ends with its Session Expiry Interval. A paho client
    connects with Clean Start 0 (as every A2A-over-MQTT agent does), asks for 1 s, leaves,
    and is back after 3 s: rumqttd answers Session Present=1. (Measured: a session opened
    with Clean Start 1 and never resumed does expire; one opened or resumed with Clean
    Start 0 never does.)"""
    flags: list[bool] = []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="sx", protocol=mqtt.MQTTv5)
    c.on_connect = lambda _c, _u, f, _rc, _p: flags.append(f.session_present)
    props = Properties(PacketTypes.CONNECT)
    props.SessionExpiryInterval = 1
    c.connect(started.host, started.port, clean_start=False, properties=props)
    c.loop_start()
    assert until(lambda: len(flags) == 1, 5.0)
    c.subscribe("sx/t", qos=1)
    time.sleep(0.5)
    c.disconnect()
    c.loop_stop()
    time.sleep(3.0)                      # three times its expiry
    c.connect(started.host, started.port, clean_start=False, properties=props)
    c.loop_start()
    assert until(lambda: len(flags) == 2, 5.0)
    assert flags == [False, True], flags
    c.disconnect()
    c.loop_stop()


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V5),
                                     ("iotcore", MqttVersion.V5)], indirect=True)
def test_rumqttd_sends_more_than_a_clients_receive_maximum(started: Broker) -> None:
    """[MQTT-3.3.4-9]: no more unacknowledged QoS 1 PUBLISHes to a client than its Receive
    Maximum. A paho subscriber with Receive Maximum 2 that acknowledges nothing (manual
    ack) gets all five messages published to it."""
    got: list[mqtt.MQTTMessage] = []
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="rm-sub",
                      protocol=mqtt.MQTTv5, manual_ack=True)
    sub.on_message = lambda _c, _u, m: got.append(m)
    props = Properties(PacketTypes.CONNECT)
    props.ReceiveMaximum = 2
    sub.connect(started.host, started.port, properties=props)
    sub.loop_start()
    sub.subscribe("rm/t", qos=1)
    time.sleep(0.5)
    pub, _, _ = paho_client(started, "rm-pub", MqttVersion.V5)
    for i in range(5):
        pub.publish("rm/t", f"m{i}".encode(), qos=1).wait_for_publish(5)
    until(lambda: len(got) >= 5, 3.0)
    assert len(got) == 5, [m.payload for m in got]      # MQTT allows 2
    for c in (sub, pub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V311),
                                     ("iotcore", MqttVersion.V311)], indirect=True)
def test_rumqttd_never_gives_up_a_silent_client_it_sends_to(started: Broker) -> None:
    """[MQTT-3.1.2-24]: a client silent 1.5 x its keepalive is disconnected, whatever the
    broker sends it. A paho client with keepalive 2 s, subscribed to a topic fed every
    0.5 s, goes silent (its loop stopped, the socket open): its will is not published in
    10 s (3 s is the bound) — rumqttd counts its own sends as the client's life."""
    watcher, wills, _ = paho_client(started, "kr-w", MqttVersion.V311)
    watcher.subscribe("kr/will", qos=1)
    silent = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="kr-s",
                         protocol=mqtt.MQTTv311)
    silent.will_set("kr/will", b"gone", qos=1)
    silent.connect(started.host, started.port, keepalive=2)
    silent.loop_start()
    silent.subscribe("kr/feed", qos=0)
    time.sleep(0.5)
    feeder, _, _ = paho_client(started, "kr-f", MqttVersion.V311)
    silent.loop_stop()                   # silent from here
    for _ in range(20):                  # 10 s of feed
        feeder.publish("kr/feed", b"x", qos=0)
        time.sleep(0.5)
    assert not wills, "its will was published: given up"
    silent.socket().close()
    for c in (watcher, feeder):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("rumqttd", MqttVersion.V5),
                                     ("iotcore", MqttVersion.V5)], indirect=True)
def test_rumqttd_loses_what_a_dropped_shared_member_held(started: Broker) -> None:
    """MQTT 5 §4.8.2: a shared group member's unacknowledged messages are re-sent to it
    when it is back, or sent to another member — never lost. Paho members A (manual ack,
    its session kept 30 s) and B of `$share/g/t`; four messages, A's share left
    unacknowledged, A's socket closed, A back: A's messages reach neither member."""
    def member(cid: str, manual: bool) -> tuple[mqtt.Client, list[bytes]]:
        got: list[bytes] = []
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid,
                        protocol=mqtt.MQTTv5, manual_ack=manual)
        c.on_message = lambda _c, _u, m: got.append(m.payload)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = 30
        c.connect(started.host, started.port, clean_start=False, properties=props)
        c.loop_start()
        return c, got
    a, held = member("sh-a", manual=True)
    b, moved = member("sh-b", manual=False)
    for c in (a, b):
        c.subscribe("$share/g/sh/t", qos=1)
    time.sleep(0.5)
    pub, _, _ = paho_client(started, "sh-pub", MqttVersion.V5)
    for i in range(4):
        pub.publish("sh/t", f"d{i}".encode(), qos=1).wait_for_publish(5)
    assert until(lambda: len(held) + len(moved) == 4, 5.0)
    assert held, "A got none of the four: nothing held to lose"
    mine = set(held)
    a.loop_stop()
    a.socket().close()               # A's share never acknowledged
    time.sleep(2.0)
    back, kept = member("sh-a", manual=False)
    time.sleep(1.5)
    assert not mine & (set(moved) | set(kept)), (mine, moved, kept)
    for c in (back, b, pub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("ejabberd", MqttVersion.V5)], indirect=True)
def test_ejabberd_refuses_a_will_and_a_publish_on_a_dollar_topic(started: Broker) -> None:
    """A profile agent's will and card live on `$a2a/v1/discovery/...`: ejabberd 23.01
    answers a CONNECT with its will there CONNACK 0x90 (Topic Name invalid), and a PUBLISH
    there PUBACK 0x90."""
    _, _, connack = paho_client(started, "will-dollar", MqttVersion.V5,
                                will=("$a2a/v1/discovery/acme/billing/tax1", b"{}", None))
    assert connack and getattr(connack[0], "value", None) == 0x90, connack
    pub, _, _ = paho_client(started, "pub-dollar", MqttVersion.V5)
    codes: list[int] = []
    pub.on_publish = lambda _c, _u, _mid, rc, _p: codes.append(rc.value)
    pub.publish("$a2a/v1/request/acme/billing/tax1", b"{}", qos=1)
    assert until(lambda: bool(codes), 5.0) and codes == [0x90], codes
    pub.disconnect()
    pub.loop_stop()


@pytest.mark.parametrize("started", [("ejabberd", MqttVersion.V5)], indirect=True)
def test_ejabberd_delivers_a_message_past_its_expiry(started: Broker) -> None:
    """[MQTT-3.3.2-5]: a message past its Message Expiry Interval is not delivered. A QoS 1
    message with a 1 s expiry, queued for a paho subscriber away 2.5 s, reaches it."""
    v = MqttVersion.V5
    sub, _, _ = paho_client(started, "exp-sub", v, clean=False, expiry_s=60)
    sub.subscribe("exp/t", qos=1)
    time.sleep(0.5)
    sub.disconnect()
    sub.loop_stop()
    pub, _, _ = paho_client(started, "exp-pub", v)
    props = Properties(PacketTypes.PUBLISH)
    props.MessageExpiryInterval = 1
    pub.publish("exp/t", b"short", qos=1, properties=props).wait_for_publish(5)
    time.sleep(2.5)
    back, got, _ = paho_client(started, "exp-sub", v, clean=False, expiry_s=60)
    assert until(lambda: bool(got), 3.0) and got[0].payload == b"short"
    for c in (back, pub):
        c.disconnect()
        c.loop_stop()


@pytest.mark.parametrize("started", [("rabbitmq", MqttVersion.V311)], indirect=True)
def test_rabbitmq_gives_a_silent_client_up_after_three_keepalives(started: Broker) -> None:
    """[MQTT-3.1.2-24]: a client silent 1.5 x its keepalive is disconnected. A paho client
    with keepalive 2 s whose socket goes silent (its network loop stopped, nothing sent):
    RabbitMQ 3.10.8 publishes its will only after about 3 x (6 s), not at 3 s."""
    v = MqttVersion.V311
    watcher, got, _ = paho_client(started, "ka-w", v)
    watcher.subscribe("ka/will", qos=1)
    time.sleep(0.5)
    silent = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="ka-s",
                         protocol=mqtt.MQTTv311)
    silent.username_pw_set(started.username, started.password)
    silent.will_set("ka/will", b"gone", qos=1)
    silent.connect(started.host, started.port, keepalive=2)
    silent.loop_start()
    time.sleep(0.5)
    silent.loop_stop()               # silent from here: no PINGREQ, socket open
    t0 = time.monotonic()
    assert until(lambda: bool(got), 12.0)
    assert time.monotonic() - t0 > 1.5 * 2 + 1.5     # well past 3 s (5.5 s and more)
    watcher.disconnect()
    watcher.loop_stop()


def test_a_profile_run_on_a_broker_refusing_its_wills_is_one_line_exit_3(
        reachable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A broker refusing what the run needs is said, not crashed (issue 48): ejabberd 23.01
    answers a responder's CONNECT, whose will is its card on `$a2a/v1/discovery/...`,
    CONNACK 0x90; the run ends in one line naming the broker, the node and the reason code,
    exit 3 — not "nodes not up" as a harness error."""
    from bench.cli import EXIT_INVALID, main
    installed("ejabberd")
    capsys.readouterr()
    assert main(["run", "a2a_quickstart", "--mode", "live", "--broker", "ejabberd",
                 "--no-plots", "--out", str(reachable / "run")]) == EXIT_INVALID
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith("a2a-bench: ")]
    assert len(err) == 1 and "broker ejabberd" in err[0] \
        and "the broker refused its CONNECT" in err[0] and "Topic name invalid" in err[0], err


def test_a_profile_run_on_a_broker_closing_its_subscribes_is_one_line_exit_3(
        reachable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rumqttd answers a SUBSCRIBE to `$a2a/...` by closing the connection, no SUBACK: the
    nodes reconnect and are closed again. The run stops waiting at the third close (not at
    the self-check's 45 s) and says so in one line, exit 3."""
    from bench.cli import EXIT_INVALID, main
    installed("rumqttd")
    capsys.readouterr()
    t0 = time.monotonic()
    assert main(["run", "a2a_quickstart", "--mode", "live", "--broker", "rumqttd",
                 "--no-plots", "--out", str(reachable / "run")]) == EXIT_INVALID
    err = [line for line in capsys.readouterr().err.splitlines()
           if line.startswith("a2a-bench: ")]
    assert len(err) == 1 and "broker rumqttd" in err[0] \
        and "closed its connection 3 times before it was up" in err[0], err
    assert time.monotonic() - t0 < 30, "waited for the self-check's time out"


def test_rmqttd_serves_an_a2a_pool_on_dollar_topics(
        reachable: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rmqttd 0.24.0, with its shared-subscription and retainer plugins, is the broker here
    that serves every path of the A2A-over-MQTT profile: a pool on `$a2a/v1/request/...`
    runs, and every verdict of a2a_pool is as the scenario expects (docs/findings/rmqttd.md)."""
    from bench.cli import main
    installed("rmqttd")
    assert main(["run", "a2a_pool", "--mode", "live", "--broker", "rmqttd", "--no-plots",
                 "--out", str(reachable / "run")]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("name", ["rabbitmq", "ejabberd"])
def test_an_erlang_broker_whose_port_was_taken_starts_on_another(name: str,
                                                                  reachable: Path) -> None:
    """Its start says "eaddrinuse", not the C library's "address already in use" (a clean
    clone's suite, 2026-12-07: RabbitMQ's boot failed on a port another test had taken since
    it was chosen, and was not moved): the first start takes another port all the same."""
    import socket
    installed(name)
    broker = make_broker(name, reachable)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", broker.port))
        squatter.listen()
        taken = broker.port
        try:
            broker.start()
            assert broker.port != taken
        finally:
            broker.stop()
