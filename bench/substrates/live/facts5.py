"""What a broker does with what MQTT 5 adds, measured with a raw v5 client: packets made
and read by the `mqtt5` codec, sent over TCP one by one, so nothing a client library does
on its own (acking, flow control, reconnecting) hides what the broker did.

Like the 3.1.1 facts (`facts.py`), each probe has topics and client ids of its own. The
facts, each with the clause it concerns:

- `v5`: does the broker accept a v5 CONNECT at all (a CONNACK with reason 0x84,
  Unsupported Protocol Version, or a 3.1.1 refusal: it does not, and nothing else here
  is measured).
- `session_expiry`: a session with a Session Expiry Interval of 2 s, disconnected: kept
  (session present, its queued message delivered) when the client is back within 1 s,
  gone when it is back after 4 s ([MQTT-3.1.2-23]: the broker MUST keep it until then;
  after it, it is discarded).
- `message_expiry`: two QoS1 messages queued for an offline session, one with a Message
  Expiry Interval of 1 s, one of 60 s, the client back 2.5 s later: the expired one is
  not delivered, and the other carries what is left of its interval ([MQTT-3.3.2-5],
  [MQTT-3.3.2-6]).
- `will_delay`: a client dropped without DISCONNECT, Will Delay Interval 2 s: when its
  will is published; and a client that reconnects within the delay: no will
  ([MQTT-3.1.3-9]).
- `user_properties`: a PUBLISH with repeated and ordered User Properties, and a will with
  one: forwarded unchanged, in order ([MQTT-3.3.2-17], [MQTT-3.3.2-18]).
- `request_response`: Response Topic, Correlation Data and Content Type forwarded
  unchanged ([MQTT-3.3.2-15], [MQTT-3.3.2-16], [MQTT-3.3.2-20]).
- `puback_no_subscribers`: the PUBACK's reason for a QoS1 PUBLISH nobody subscribes to:
  0x10 No Matching Subscribers, or 0x00 (the broker MAY say either).
- `receive_maximum`: a subscriber that says Receive Maximum 2 and acknowledges nothing,
  five QoS1 messages: how many it is sent before it acknowledges ([MQTT-3.3.4-9]: at
  most 2), and that the rest follow once it does.
- `shared_subscription`: two members of `$share/g/…` and one plain subscriber, ten
  QoS1 messages: each to exactly one member (how they were split), all ten to the plain
  one; then a member dropped holding unacknowledged messages: are they sent to the other
  member, kept for its session, or lost; and a shared filter on a topic that starts with
  `$` (the A2A profile's `$a2a/…`).
- `retained_properties`: a retained message with a User Property and a Content Type,
  to a new subscriber: its properties kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import mqtt5

from bench.substrates.live.facts import (
    FALSE,
    MUST,
    PROFILE,
    UNKNOWN,
    Fact,
    Probe,
    again_alone,
    judged,
)
from bench.substrates.live.proxy import read_packet

QOS1 = mqtt5.QoS.AT_LEAST_ONCE


#: MQTT 5 §4.8.2, what a shared subscription is
SHARED = ("MQTT 5 §4.8.2: each message to one session of a shared group; a dropped member's "
          "unacknowledged ones kept for it or sent to another, never lost")


PROFILE_PATHS = ("A2M-QOS-1 QoS 1 on discovery, request and reply paths; the profile's "
                 "cards (A2M-DISC-1), wills (A2M-PRES-2) and pools (A2M-POOL-1) on $a2a/...")


class Refused(ConnectionError):
    """The broker would not take a v5 CONNECT."""


@dataclass(frozen=True)
class Got:
    """A PUBLISH as it arrived, with the properties a probe looks at."""

    topic: str
    payload: bytes
    packet_id: int | None
    dup: bool
    retain: bool
    user_properties: tuple[tuple[str, str], ...]
    response_topic: str | None
    correlation_data: bytes | None
    content_type: str | None
    message_expiry_s: int | None

    @classmethod
    def of(cls, p: mqtt5.PublishPacket) -> Got:
        return cls(p.topic, bytes(p.payload), p.packet_id, p.duplicate, p.retain,
                   tuple(p.user_properties or ()), p.response_topic,
                   None if p.correlation_data is None else bytes(p.correlation_data),
                   p.content_type, p.message_expiry_interval)


class Client5:
    """One MQTT 5 connection, packet by packet: it sends only what it is told to."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 ack: mqtt5.ConnAckPacket) -> None:
        self.reader, self.writer, self.connack = reader, writer, ack
        self.session_present = ack.session_present
        self._pid = 0
        self.pending: list[Got] = []      # PUBLISHes read while waiting for something else

    @classmethod
    async def connect(cls, probe: Probe, role: str, *, clean: bool = True,
                      session_expiry_s: int = 0, keepalive_s: int = 60,
                      will: mqtt5.Will | None = None, receive_max: int = 65535,
                      timeout_s: float = 5.0) -> Client5:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            probe.host, probe.port, ssl=probe.tls.context() if probe.tls else None), timeout_s)
        client_id = probe._id(role)
        username = probe.username if probe.username is not None else client_id
        packet = mqtt5.ConnectPacket(
            client_id, username=username,
            password=probe.password.encode() if probe.password else None, clean_start=clean,
            will=will, keep_alive=keepalive_s, session_expiry_interval=session_expiry_s,
            receive_max=receive_max)
        writer.write(packet.write())
        await writer.drain()
        try:
            raw = await asyncio.wait_for(read_packet(reader), timeout_s)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError) as exc:
            writer.transport.abort()
            raise Refused(f"no CONNACK within {timeout_s:g} s" if isinstance(exc, TimeoutError)
                          else "the connection closed instead of a CONNACK") from None
        if not raw or raw[0] >> 4 != 2:
            writer.transport.abort()
            raise Refused("no CONNACK")
        if len(raw) == 4 and raw[1] == 2:     # a 3.1.1 CONNACK: it read the CONNECT as one
            writer.transport.abort()
            raise Refused(f"a 3.1.1 CONNACK, return code {raw[3]}")
        try:
            ack, _ = mqtt5.read(memoryview(raw))
        except Exception as exc:  # noqa: BLE001 - the codec's errors: not a v5 CONNACK
            writer.transport.abort()
            raise Refused(f"an unreadable CONNACK ({exc})") from None
        assert isinstance(ack, mqtt5.ConnAckPacket)
        if ack.reason_code != mqtt5.ConnAckReasonCode.SUCCESS:
            writer.transport.abort()
            raise Refused(f"CONNACK {ack.reason_code.name} (0x{int(ack.reason_code):02x})")
        return cls(reader, writer, ack)

    def _next_pid(self) -> int:
        self._pid = self._pid % 65535 + 1
        return self._pid

    async def _send(self, packet: object) -> None:
        self.writer.write(packet.write())  # type: ignore[attr-defined]
        await self.writer.drain()

    async def _next(self, timeout_s: float) -> object | None:
        raw = await asyncio.wait_for(read_packet(self.reader), timeout_s)
        if not raw:
            raise ConnectionError("connection closed")
        return mqtt5.read(memoryview(raw))[0]

    async def expect(self, kind: type, timeout_s: float = 5.0) -> object:
        """The next packet of `kind`; PUBLISHes read meanwhile are kept in `pending`."""
        deadline = time.monotonic() + timeout_s
        while True:
            p = await self._next(max(0.0, deadline - time.monotonic()))
            if isinstance(p, kind):
                return p
            if isinstance(p, mqtt5.PublishPacket):
                self.pending.append(Got.of(p))

    async def subscribe(self, *filters: str) -> list[int]:
        pid = self._next_pid()
        await self._send(mqtt5.SubscribePacket(pid, [mqtt5.TopicFilter(f, max_qos=QOS1)
                                                     for f in filters]))
        ack = await self.expect(mqtt5.SubAckPacket)
        return [int(c) for c in ack.reason_codes]  # type: ignore[attr-defined]

    async def publish(self, topic: str, payload: bytes, qos: int = 1, **props: object) -> int:
        """Publishes and, for QoS1, waits for the PUBACK: its reason code (0 for QoS 0)."""
        pid = self._next_pid() if qos else None
        await self._send(mqtt5.PublishPacket(topic, payload, qos=mqtt5.QoS(qos),
                                             packet_id=pid, **props))  # type: ignore[arg-type]
        if not qos:
            return 0
        while True:
            ack = await self.expect(mqtt5.PubAckPacket)
            if ack.packet_id == pid:  # type: ignore[attr-defined]
                return int(ack.reason_code)  # type: ignore[attr-defined]

    async def ack(self, packet_id: int) -> None:
        await self._send(mqtt5.PubAckPacket(packet_id))

    async def ack_all(self, got: list[Got]) -> None:
        """Acknowledges every QoS1 PUBLISH of `got`."""
        for g in got:
            if g.packet_id is not None:
                await self.ack(g.packet_id)

    async def publishes(self, within_s: float, topic: str | None = None) -> list[Got]:
        """Every PUBLISH (to `topic`, if given) within `within_s`; none acknowledged."""
        out, self.pending = self.pending, []
        deadline = time.monotonic() + within_s
        with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            while (left := deadline - time.monotonic()) > 0:
                p = await self._next(left)
                if isinstance(p, mqtt5.PublishPacket):
                    out.append(Got.of(p))
        return [g for g in out if topic is None or g.topic == topic]

    async def at_least(self, n: int, within_s: float, topic: str,
                       then_s: float = 0.0) -> list[Got]:
        """PUBLISHes to `topic` until `n` came or `within_s` passed (a loaded machine
        delivers late), then whatever else comes in `then_s`; none acknowledged."""
        out: list[Got] = []
        deadline = time.monotonic() + within_s
        while len(out) < n and (left := deadline - time.monotonic()) > 0:
            out += await self.publishes(min(left, 0.1), topic)
        return out + (await self.publishes(then_s, topic) if then_s else [])

    def abort(self) -> None:
        """The connection drops without DISCONNECT (the will is due)."""
        self.writer.transport.abort()

    async def disconnect(self, session_expiry_s: int | None = None) -> None:
        with contextlib.suppress(OSError):
            await self._send(mqtt5.DisconnectPacket(session_expiry_interval=session_expiry_s))
        self.writer.close()


@dataclass
class Probe5:
    """The v5 facts of the broker `probe` reaches (its address, login and nonce)."""

    probe: Probe

    def _topic(self, name: str) -> str:
        return self.probe._topic(f"v5/{name}")

    async def client(self, role: str, **kw: object) -> Client5:
        return await Client5.connect(self.probe, f"v5-{role}", **kw)  # type: ignore[arg-type]

    async def _forget(self, role: str) -> None:
        with contextlib.suppress(OSError, ConnectionError, TimeoutError):
            c = await self.client(role, clean=True)
            await c.disconnect()

    async def v5(self) -> Fact:
        c = await self.client("hello")
        await c.disconnect()
        limits = [f"{name} {value}" for name, value in (
            ("receive maximum", c.connack.receive_max),
            ("maximum QoS", int(c.connack.max_qos)),
            ("shared subscriptions", c.connack.shared_subscription_available),
            ("session expiry", c.connack.session_expiry_interval)) if value is not None]
        return Fact("v5", "accepted", "CONNACK: " + (", ".join(limits) or "no limits stated"),
                    "MQTT 5.0: the broker speaks it")

    async def session_expiry(self) -> Fact:
        topic = self._topic("session")
        sub = await self.client("se", clean=False, session_expiry_s=2)
        await sub.subscribe(topic)
        await sub.disconnect()
        pub = await self.client("se-pub")
        await pub.publish(topic, b"one")
        await asyncio.sleep(0.5)
        soon = await self.client("se", clean=False, session_expiry_s=2)
        kept = bool(await soon.publishes(1.0, topic))
        await soon.disconnect()
        await asyncio.sleep(0.3)
        await pub.publish(topic, b"two")
        await asyncio.sleep(4.0)
        late = await self.client("se", clean=False, session_expiry_s=2)
        stale = await late.publishes(1.0, topic)
        await late.disconnect()
        await pub.disconnect()
        await self._forget("se")
        first = "kept within it" if soon.session_present and kept else \
            "session kept, its message lost" if soon.session_present else "not kept"
        then = "gone after it" if not late.session_present and not stale else \
            "still there after it (defect)"
        return Fact("session_expiry", f"{first}; {then}",
                    f"Session Expiry Interval 2 s: back after 0.5 s session present "
                    f"{soon.session_present}, queued delivered {kept}; back after 4 s "
                    f"session present {late.session_present}, queued delivered {bool(stale)}",
                    "[MQTT-3.1.2-23] the session is kept until its Session Expiry Interval "
                    "ends, [MQTT-4.1.0-2] and discarded then", MUST,
                    judged(soon.session_present and kept and not late.session_present
                           and not stale))

    async def message_expiry(self) -> Fact:
        topic = self._topic("expiry")
        sub = await self.client("me", clean=False, session_expiry_s=60)
        await sub.subscribe(topic)
        await sub.disconnect()
        pub = await self.client("me-pub")
        await pub.publish(topic, b"short", message_expiry_interval=1)
        await pub.publish(topic, b"long", message_expiry_interval=60)
        await pub.disconnect()
        await asyncio.sleep(2.5)
        again = await self.client("me", clean=False, session_expiry_s=60)
        got = {g.payload: g for g in await again.publishes(1.0, topic)}
        await again.ack_all(list(got.values()))
        await again.disconnect()
        await self._forget("me")
        long = got.get(b"long")
        if b"short" in got:
            value = "expired message delivered (defect)"
        elif long is None:
            value = "both dropped (defect: the unexpired one too)"
        elif long.message_expiry_s is not None and long.message_expiry_s < 60:
            value = "expired dropped; the rest counts down"
        else:
            value = f"expired dropped; the rest forwarded with {long.message_expiry_s} s " \
                    "(defect: [MQTT-3.3.2-6] wants what is left)"
        return Fact("message_expiry", value,
                    "queued for 2.5 s: 1 s and 60 s intervals; the 60 s one arrived with "
                    f"{None if long is None else long.message_expiry_s} s",
                    "[MQTT-3.3.2-5] an expired message is not delivered, [MQTT-3.3.2-6] the "
                    "rest carry what is left of their interval", MUST,
                    judged("defect" not in value))

    async def will_delay(self) -> Fact:
        topic = self._topic("will-delay")
        watcher = await self.client("wd-w")
        await watcher.subscribe(topic)
        will = mqtt5.Will(topic, payload=b"late", qos=QOS1, will_delay_interval=2)
        dying = await self.client("wd-x", keepalive_s=60, session_expiry_s=30, will=will)
        start = time.monotonic()
        dying.abort()
        got = await watcher.publishes(6.0, topic)
        after = time.monotonic() - start if got else None
        if got:   # the moment it came is not kept by publishes(): measured again, precisely
            back = await self.client("wd-y", keepalive_s=60, session_expiry_s=30, will=will)
            t0 = time.monotonic()
            back.abort()
            first = await self._first(watcher, topic, 6.0)
            after = None if first is None else first - t0
        returner = await self.client("wd-z", keepalive_s=60, session_expiry_s=30, will=will)
        returner.abort()
        await asyncio.sleep(0.5)
        again = await self.client("wd-z", clean=False, session_expiry_s=30)
        spared = not await watcher.publishes(3.0, topic)
        await again.disconnect(session_expiry_s=0)
        await watcher.disconnect()
        for role in ("wd-x", "wd-y"):
            await self._forget(role)
        when = "never" if after is None else f"after {after:.1f} s"
        return Fact("will_delay", f"will {when}; " + ("none if back in time" if spared
                                                     else "sent though it came back (defect)"),
                    "Will Delay Interval 2 s, session expiry 30 s, dropped without "
                    "DISCONNECT; then one back within 0.5 s ([MQTT-3.1.3-9]: no will)",
                    "[MQTT-3.1.2-8] a will is published when its connection closes without "
                    "DISCONNECT, after its Will Delay Interval; [MQTT-3.1.3-9] not if the "
                    "client is back before it", MUST, judged(after is not None and spared))

    @staticmethod
    async def _first(c: Client5, topic: str, within_s: float) -> float | None:
        deadline = time.monotonic() + within_s
        while (left := deadline - time.monotonic()) > 0:
            if await c.publishes(min(left, 0.05), topic):
                return time.monotonic()
        return None

    async def user_properties(self) -> Fact:
        topic, will_topic = self._topic("props"), self._topic("props/will")
        sub = await self.client("up-sub")
        await sub.subscribe(topic, will_topic)
        sent = (("a", "1"), ("b", "x"), ("a", "2"))
        pub = await self.client("up-pub")
        await pub.publish(topic, b"p", user_properties=list(sent))
        will = mqtt5.Will(will_topic, payload=b"w", qos=QOS1,
                          user_properties=[("presence", "offline")])
        dying = await self.client("up-x", will=will)
        dying.abort()
        got = await sub.publishes(1.5)
        on_publish = next((g.user_properties for g in got if g.topic == topic), None)
        on_will = next((g.user_properties for g in got if g.topic == will_topic), None)
        for c in (sub, pub):
            await c.disconnect()
        ok = on_publish == sent and on_will == (("presence", "offline"),)
        return Fact("user_properties", "kept in order" if ok else "changed (defect)",
                    f"sent {list(sent)} and a will's [('presence', 'offline')]; got "
                    f"{None if on_publish is None else list(on_publish)} and "
                    f"{None if on_will is None else list(on_will)}",
                    "[MQTT-3.3.2-17] User Properties forwarded unaltered, [MQTT-3.3.2-18] in "
                    "their order (a will's too)", MUST, judged(ok))

    async def request_response(self) -> Fact:
        topic = self._topic("request")
        sub = await self.client("rr-sub")
        await sub.subscribe(topic)
        pub = await self.client("rr-pub")
        reply, corr = self._topic("reply/7"), bytes(range(16))
        await pub.publish(topic, b"q", response_topic=reply, correlation_data=corr,
                          content_type="application/json")
        got = await sub.publishes(1.5, topic)
        for c in (sub, pub):
            await c.disconnect()
        g = got[0] if got else None
        ok = g is not None and (g.response_topic, g.correlation_data, g.content_type) == \
            (reply, corr, "application/json")
        return Fact("request_response", "passed unchanged" if ok else
                    "not delivered" if g is None else "changed (defect)",
                    "Response Topic, 16 bytes of Correlation Data, Content Type"
                    + ("" if ok or g is None else
                       f"; got {g.response_topic!r}, {g.correlation_data!r}, {g.content_type!r}"),
                    "[MQTT-3.3.2-15] Response Topic, [MQTT-3.3.2-16] Correlation Data, "
                    "[MQTT-3.3.2-20] Content Type forwarded unaltered", MUST,
                    UNKNOWN if g is None else judged(ok))

    async def puback_no_subscribers(self) -> Fact:
        pub = await self.client("pa")
        code = await pub.publish(self._topic("nobody"), b"x")
        await pub.disconnect()
        name = {0: "0x00 success", 0x10: "0x10 no matching subscribers"}.get(code, f"0x{code:02x}")
        return Fact("puback_no_subscribers", name,
                    "a QoS1 PUBLISH to a topic nobody subscribes to (0x10 is allowed, not "
                    "required)", "MQTT 5 §3.4.2.1: 0x10 No matching subscribers MAY be sent",
                    MUST, None)

    async def receive_maximum(self) -> Fact:
        topic = self._topic("flow")
        sub = await self.client("rm-sub", receive_max=2)
        await sub.subscribe(topic)
        pub = await self.client("rm-pub")
        for i in range(5):
            await pub.publish(topic, f"m{i}".encode())
        first = await sub.at_least(2, 5.0, topic, then_s=1.0)   # a third would break it
        await sub.ack_all(first)
        rest: list[Got] = []
        for _ in range(5):
            more = await sub.publishes(0.5, topic)
            rest += more
            await sub.ack_all(more)
            if len(first) + len(rest) >= 5 or not more:
                break
        for c in (sub, pub):
            await c.disconnect()
        total = len(first) + len(rest)
        value = (f"{len(first)} in flight" + ("" if len(first) <= 2 else " (defect)")
                 + ("; the rest after the acks" if total == 5 else f"; {5 - total} never came"))
        return Fact("receive_maximum", value,
                    "Receive Maximum 2, five QoS1 messages, nothing acknowledged for 1 s "
                    "([MQTT-3.3.4-9]: at most 2)",
                    "[MQTT-3.3.4-9] no more unacknowledged QoS 1 PUBLISHes than the client's "
                    "Receive Maximum", MUST, judged(len(first) <= 2))

    async def shared_subscription(self) -> Fact:
        topic = self._topic("pool")
        shared = f"$share/g{self.probe.nonce}/{topic}"
        a = await self.client("ss-a", clean=False, session_expiry_s=30)
        if a.connack.shared_subscription_available is False:
            # MQTT 5 §3.2.2.3.15: a broker may say it has none; a SUBSCRIBE to one is then
            # a protocol error it closes the connection on (0x9E)
            await a.disconnect(session_expiry_s=0)
            return Fact("shared_subscription", "not offered",
                        "CONNACK: Shared Subscription Available 0", SHARED, MUST, None)
        b = await self.client("ss-b", clean=False, session_expiry_s=30)
        plain = await self.client("ss-p")
        codes = [*(await a.subscribe(shared)), *(await b.subscribe(shared))]
        if any(c >= 0x80 for c in codes):
            for c in (a, b, plain):
                await c.disconnect(session_expiry_s=0)
            return Fact("shared_subscription", "refused", f"SUBACK reason codes {codes}",
                        SHARED, MUST, None)
        await plain.subscribe(topic)
        pub = await self.client("ss-pub")
        for i in range(10):
            await pub.publish(topic, f"m{i}".encode())
        got_p = await plain.at_least(10, 5.0, topic)      # all ten are out by then
        got_a, got_b = await asyncio.gather(a.publishes(0.5, topic), b.publishes(0.5, topic))
        for c, got in ((a, got_a), (b, got_b)):
            await c.ack_all(got)
        once = sorted(g.payload for g in got_a + got_b) == sorted(f"m{i}".encode()
                                                                  for i in range(10))
        split = f"{len(got_a)}/{len(got_b)}"
        # a member that drops holding unacknowledged messages
        for i in range(4):
            await pub.publish(topic, f"d{i}".encode())
        held_a, held_b = await asyncio.gather(a.publishes(0.6, topic), b.publishes(0.6, topic))
        await b.ack_all(held_b)
        a.abort()                                           # a's copies never acknowledged
        moved = await b.publishes(2.0, topic)
        await b.ack_all(moved)
        back = await self.client("ss-a", clean=False, session_expiry_s=30)
        kept = await back.publishes(1.5, topic)
        held = {g.payload for g in held_a}
        fate = ("none held" if not held else
                "sent to the other member" if held <= {g.payload for g in moved} else
                "kept for its session" if held <= {g.payload for g in kept} else "lost")
        await back.disconnect(session_expiry_s=0)
        # a shared filter on a topic that starts with $, beside a plain one on another
        dollar = f"$a2a-probe/{self.probe.nonce}/pool"
        dollar_works = await self._dollar(pub, dollar, f"$share/d{self.probe.nonce}/{dollar}")
        dollar_plain = await self._dollar(pub, dollar + "-plain", dollar + "-plain")
        for x in (b, plain, pub):
            await x.disconnect(session_expiry_s=0)
        value = (("one member each" if once else "not once per group (defect)") + "; "
                 f"a dropped member's in-flight: {fate}; on $ topics: {dollar_works}")
        return Fact("shared_subscription", value,
                    f"two members, ten QoS1 messages split {split}, the plain subscriber got "
                    f"{len(got_p)}; then {len(held)} left unacknowledged by a member dropped; "
                    f"a plain subscription on a $ topic: {dollar_plain}", SHARED, MUST,
                    judged(once and fate != "lost"))

    async def _dollar(self, pub: Client5, topic: str, subscription: str) -> str:
        """Whether one QoS1 message to `topic` reaches a subscriber of `subscription`."""
        c = await self.client(f"ss-{len(subscription) % 97}")
        try:
            codes = await c.subscribe(subscription)
        except ConnectionError:
            return "SUBSCRIBE answered by closing the connection, no SUBACK"
        if any(x >= 0x80 for x in codes):
            await c.disconnect()
            return f"refused (SUBACK {codes})"
        code = await pub.publish(topic, b"$")
        got = await c.publishes(1.0, topic)
        await c.disconnect()
        return "works" if got else f"not delivered (PUBACK 0x{code:02x})"

    async def retained_properties(self) -> Fact:
        topic = self._topic("card")
        pub = await self.client("rp-pub")
        await pub.publish(topic, b"{}", retain=True, content_type="application/json",
                          user_properties=[("kind", "card")])
        late = await self.client("rp-late")
        await late.subscribe(topic)
        got = await late.publishes(1.0, topic)
        await pub.publish(topic, b"", retain=True)    # leave nothing retained
        for c in (pub, late):
            await c.disconnect()
        g = got[0] if got else None
        ok = g is not None and g.retain and g.content_type == "application/json" \
            and g.user_properties == (("kind", "card"),)
        return Fact("retained_properties", "kept" if ok else
                    "not delivered" if g is None else "lost (defect)",
                    "a retained message with a Content Type and a User Property, to a new "
                    "subscriber (§3.3.1.3: the retained Application Message, properties included)"
                    if ok or g is None else
                    f"got retain={g.retain}, {g.content_type!r}, {list(g.user_properties)}",
                    "[MQTT-3.3.1-5] a retained message is stored and sent to new subscribers; "
                    "[MQTT-3.3.2-17], [MQTT-3.3.2-20] its properties unaltered", MUST,
                    judged(ok))

    async def profile_paths(self) -> Fact:
        """What the A2A-over-MQTT profile needs of a broker, on the profile's own topics
        (they start with `$`, which MQTT 5 §4.7.2 lets a broker keep to itself): a QoS 1
        request to `$a2a/v1/request/...` accepted and delivered with its Response Topic and
        Correlation Data; a card retained on `$a2a/v1/discovery/...` for a later subscriber;
        a will there published when its client drops; a pool's shared subscription on a
        request topic served."""
        org = f"probe{self.probe.nonce}"
        request = f"$a2a/v1/request/{org}/unit/agent"
        card, gone = f"$a2a/v1/discovery/{org}/unit/agent", f"$a2a/v1/discovery/{org}/unit/lwt"
        pool = f"$a2a/v1/request/{org}/unit/pool/p1"
        failed: list[str] = []
        responder = await self.client("pp-r")
        try:
            codes = await responder.subscribe(request, gone)
        except ConnectionError:
            return Fact("profile_paths", "SUBSCRIBE to $a2a/... answered by closing the "
                        "connection, no SUBACK", "a responder's request topic and a "
                        "discovery topic, in one SUBSCRIBE", PROFILE_PATHS, PROFILE, FALSE)
        if any(c >= 0x80 for c in codes):
            failed.append(f"SUBSCRIBE refused (SUBACK {codes})")
        first = await self.client("pp-m")
        member: Client5 | None = first
        if first.connack.shared_subscription_available is False:
            failed.append("no pools: the broker offers no shared subscriptions")
            first.abort()
            member = None
        else:
            try:
                codes = await first.subscribe(f"$share/a2a.{org}.unit.p1/{pool}")
                if any(c >= 0x80 for c in codes):
                    failed.append(f"pool SUBSCRIBE refused (SUBACK {codes})")
            except ConnectionError:
                failed.append("pool SUBSCRIBE answered by closing the connection")
                member = None
        requester = await self.client("pp-q")
        reply, corr = f"$a2a/v1/reply/{org}/unit/requester/r-1", b"\x01corr"
        code = await requester.publish(request, b"{}", response_topic=reply,
                                       correlation_data=corr)
        got = await responder.publishes(1.5, request)
        if code >= 0x80:
            failed.append(f"request refused (PUBACK 0x{code:02x})")
        elif not got:
            failed.append("request not delivered")
        elif (got[0].response_topic, got[0].correlation_data) != (reply, corr):
            failed.append("request's Response Topic or Correlation Data changed")
        if member is not None:
            code = await requester.publish(pool, b"{}")
            if not await member.publishes(1.5, pool):
                failed.append(f"pool request not delivered (PUBACK 0x{code:02x})")
            await member.disconnect()
        code = await requester.publish(card, b"{}", retain=True)
        later = await self.client("pp-l")
        await later.subscribe(card)
        kept = await later.publishes(1.5, card)
        if not kept or not kept[0].retain:
            failed.append(f"card not retained (PUBACK 0x{code:02x})")
        try:
            dying = await self.client("pp-x", will=mqtt5.Will(gone, payload=b"{}", qos=QOS1,
                                                              retain=True))
            dying.abort()
            if not await responder.publishes(2.0, gone):
                failed.append("will not published")
        except Refused as exc:
            failed.append(f"a CONNECT with its will on $a2a/... refused ({exc})")
        for topic in (card, gone):              # leave nothing retained
            await requester.publish(topic, b"", retain=True)
        for c in (responder, requester, later):
            await c.disconnect()
        return Fact("profile_paths", "all served" if not failed else "; ".join(failed),
                    "on $a2a/v1/...: a QoS 1 request with its reply path, a pool's shared "
                    "subscription, a retained card, a will",
                    PROFILE_PATHS, PROFILE, judged(not failed))

    async def all(self, say: Callable[[str], None] = lambda line: None) -> list[Fact]:
        """Every v5 fact: first whether v5 is spoken at all, then the rest side by side."""
        try:
            hello = await self.v5()
        except Refused as exc:
            return [Fact("v5", "refused", str(exc))]

        async def one(probe: Callable[[], Awaitable[Fact]]) -> Fact:
            try:
                return await probe()
            except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as exc:
                return Fact(probe.__name__, "error", f"{type(exc).__name__}: {exc}",
                            verdict=UNKNOWN)
        say("measuring MQTT 5: session and message expiry, will delay, properties, reason "
            "codes, flow control, shared subscriptions ...")
        probes = (self.session_expiry, self.message_expiry, self.will_delay,
                  self.user_properties, self.request_response, self.puback_no_subscribers,
                  self.receive_maximum, self.shared_subscription, self.retained_properties,
                  self.profile_paths)
        facts = await again_alone(probes, await asyncio.gather(*(one(p) for p in probes)),
                                  one)
        return [hello, *facts]
