"""What a broker does where MQTT 3.1.1 leaves room or brokers stray, measured with the
bench's own minimal MQTT clients (raw packets over TCP, so nothing a client library does
on its own — pinging, acking, reconnecting — hides what the broker did).

Each probe uses topics and client ids of its own (a fresh nonce), so it can run against a
long-lived broker others use. The facts:

- `redelivery`: a QoS1 message delivered and never acknowledged, then the subscriber's
  connection dropped and resumed (clean session off): resent, with DUP=1 or without, or
  not at all ([MQTT-4.4.0-1] says resend; [MQTT-3.3.1-1] says DUP=1).
- `keepalive`: a client that goes silent with its socket open (keepalive 2 s): how long
  until the broker publishes its will ([MQTT-3.1.2-24]: after 1.5 x keepalive), or never.
- `keepalive_receiving`: the same, while the broker keeps sending it messages (a broker
  that restarts the timer on what it *sends* never times such a client out).
- `takeover_will`: a second connection with the same client id: which will is published
  (none is what 3.1.1 implies for the taken-over session; the new client's is a defect).
- `overlapping_filters`: one client subscribed to `t/#` and `t/x`, one message to `t/x`:
  how many copies it gets (1 or one per filter; both are allowed, [MQTT-3.3.5-1]).
- `retain_flags`: a retained message, to a subscription already there (RETAIN MUST be 0,
  [MQTT-3.3.1-9]) and to a new one (MUST be 1, [MQTT-3.3.1-8]).
- `subscribe_while_connecting`: clients connect while others subscribe to filters nobody
  had, and retained messages are there for the filters others hold: is each new client's
  SUBSCRIBE then acknowledged ([MQTT-3.8.4-1]: it MUST be)? Up to 30, until one is not.
  amqtt 0.12.1 walks its filters across awaits while it connects a client; a filter added
  meanwhile ends that walk in "dictionary changed size during iteration", and the client
  is closed or, under another event loop (the docker image's), stays connected, answered
  PINGRESP, never served: no SUBACK, no message.
- `persistence`: a persistent session, disconnected, a QoS1 message queued for it, the
  broker restarted gracefully: is the session present, and the queued message delivered?
  Needs a way to restart the broker (the ones the bench starts, or a user's command).
- `shutdown_wills`: a client with a (retained) will still connected when the broker is
  stopped gracefully: is its will published — to a subscriber there at the stop, or kept
  for one after the restart — or not at all? (3.1.1 says nothing; a broker that publishes
  them tells every node that all the others went away.) Needs a restart too.

Then, on a broker that speaks MQTT 5, what v5 adds (`facts5.py`).

    a2a-bench brokers                       amqtt and Mosquitto, started here
    a2a-bench brokers --broker mqtt://host:1883 --json
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bench.substrates.live.brokers import Broker, BrokerError, make_broker, wait_listening
from bench.substrates.live.mqtt import Tls
from bench.substrates.live.proxy import read_packet, split_publish, varint

CONNECT, CONNACK, PUBLISH, PUBACK, SUBSCRIBE, SUBACK = 1, 2, 3, 4, 8, 9
PINGREQ, DISCONNECT = 12, 14
KEEPALIVE_S = 2
#: What a will published right at 1.5 x keepalive takes to be seen: its way to the watcher,
#: whose reads are 0.2 s apart
WILL_SLACK_S = 0.5


def _str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return len(b).to_bytes(2, "big") + b


def _packet(kind: int, flags: int, body: bytes) -> bytes:
    return bytes([kind << 4 | flags]) + varint(len(body)) + body


@dataclass(frozen=True)
class Will:
    topic: str
    payload: bytes
    retain: bool = False


@dataclass(frozen=True)
class Publish:
    topic: str
    payload: bytes
    qos: int
    dup: bool
    retain: bool
    packet_id: int | None


def parse_publish(p: bytes) -> Publish:
    flags = p[0] & 0x0F
    topic, head, payload = split_publish(p)
    qos = (flags >> 1) & 0x03
    pid = int.from_bytes(head[-2:], "big") if qos else None
    return Publish(topic, payload, qos, bool(flags & 0x08), bool(flags & 0x01), pid)


class RawClient:
    """One MQTT 3.1.1 connection, packet by packet: it sends only what it is told to."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 session_present: bool, return_code: int) -> None:
        self.reader, self.writer = reader, writer
        self.session_present, self.return_code = session_present, return_code
        self._pid = 0

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str, *, clean: bool = True,
                      keepalive_s: int = 60, will: Will | None = None,
                      username: str | None = None, password: str | None = None,
                      tls: Tls | None = None, timeout_s: float = 5.0) -> RawClient:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=tls.context() if tls else None), timeout_s)
        username = client_id if username is None else username   # amqtt names sessions so
        flags = (0x02 if clean else 0) | (0x80 if username else 0) | (0x40 if password else 0)
        payload = _str(client_id)
        if will is not None:
            flags |= 0x04 | (1 << 3) | (0x20 if will.retain else 0)     # will, QoS1
            payload += _str(will.topic) + _str(will.payload)
        if username:
            payload += _str(username)
        if password:
            payload += _str(password)
        body = _str("MQTT") + bytes([4, flags]) + keepalive_s.to_bytes(2, "big") + payload
        writer.write(_packet(CONNECT, 0, body))
        await writer.drain()
        ack = await asyncio.wait_for(read_packet(reader), timeout_s)
        if not ack or ack[0] >> 4 != CONNACK:
            writer.transport.abort()
            raise ConnectionError(f"no CONNACK from {host}:{port}")
        return cls(reader, writer, bool(ack[2] & 0x01), ack[3])

    def _next_pid(self) -> int:
        self._pid = self._pid % 65535 + 1
        return self._pid

    async def subscribe(self, *filters: str, timeout_s: float = 5.0) -> None:
        pid = self._next_pid()
        body = pid.to_bytes(2, "big") + b"".join(_str(f) + b"\x01" for f in filters)
        self.writer.write(_packet(SUBSCRIBE, 0x02, body))
        await self.writer.drain()
        await self.expect(SUBACK, timeout_s)

    async def publish(self, topic: str, payload: bytes, qos: int = 1,
                      retain: bool = False) -> None:
        """Publishes and, for QoS1, waits for the PUBACK."""
        pid = self._next_pid()
        body = _str(topic) + (pid.to_bytes(2, "big") if qos else b"") + payload
        self.writer.write(_packet(PUBLISH, qos << 1 | int(retain), body))
        await self.writer.drain()
        if qos:
            await self.expect(PUBACK, 5.0)

    async def ack(self, packet_id: int) -> None:
        self.writer.write(_packet(PUBACK, 0, packet_id.to_bytes(2, "big")))
        await self.writer.drain()

    async def expect(self, kind: int, timeout_s: float) -> bytes:
        """The next packet of `kind` (others are dropped: PUBLISHes are not expected here)."""
        deadline = time.monotonic() + timeout_s
        while True:
            p = await asyncio.wait_for(read_packet(self.reader),
                                       max(0.0, deadline - time.monotonic()))
            if not p:
                raise ConnectionError("connection closed")
            if p[0] >> 4 == kind:
                return p

    async def publishes(self, within_s: float) -> list[Publish]:
        """Every PUBLISH that arrives within `within_s` (none are acknowledged)."""
        out: list[Publish] = []
        deadline = time.monotonic() + within_s
        with contextlib.suppress(TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            while (left := deadline - time.monotonic()) > 0:
                p = await asyncio.wait_for(read_packet(self.reader), left)
                if not p:
                    break
                if p[0] >> 4 == PUBLISH:
                    out.append(parse_publish(p))
        return out

    async def closed_within(self, within_s: float) -> bool:
        """Reads (and drops) what comes until the broker closes the connection."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, OSError):
                    while await read_packet(self.reader):
                        pass
                return True
        return False

    def abort(self) -> None:
        """The connection drops without DISCONNECT (the will is due)."""
        self.writer.transport.abort()

    async def disconnect(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.write(_packet(DISCONNECT, 0, b""))
            await self.writer.drain()
        self.writer.close()


@dataclass(frozen=True)
class Fact:
    """One thing measured of a broker, and, where a normative statement decides it, the
    verdict: `clause` names the statement ([MQTT-x.y.z-n], a section, an A2M- clause),
    `level` how binding it is (MUST, SHOULD; PROFILE: what the A2A-over-MQTT profile needs
    of a broker), `verdict` true, false or unknown — None where the specification leaves the
    choice to the broker (measured, not judged)."""

    name: str
    value: str
    detail: str = ""
    clause: str = ""
    level: str = ""
    verdict: str | None = None

    @property
    def broken(self) -> bool:
        """A MUST the broker was seen to break (MQTT's, or the profile's of a broker)."""
        return self.verdict == FALSE and self.level in (MUST, PROFILE)


TRUE, FALSE, UNKNOWN = "true", "false", "unknown"
MUST, SHOULD, PROFILE = "MUST", "SHOULD", "PROFILE"


def judged(ok: bool | None) -> str:
    return UNKNOWN if ok is None else TRUE if ok else FALSE


#: What MQTT leaves to the broker across its own restart, measured only
PERSISTENCE = "MQTT 3.1.1 §4.1: how long session state lasts is the broker's choice"
SHUTDOWN = ("MQTT 3.1.1 §3.1.2.5: whether a broker stopping publishes its clients' wills "
            "is not said")


@dataclass
class Probe:
    """The broker at host:port; `restart` restarts it gracefully (None: it cannot)."""

    host: str
    port: int
    restart: Callable[[], Awaitable[None]] | None = None
    username: str | None = None
    password: str | None = None
    tls: Tls | None = None
    #: how much later than 1.5 x keepalive this broker may give a silent client up, by the
    #: timer its documentation or source states (seconds, and where it says so)
    keepalive_grace: tuple[float, str] = (0.0, "")

    def __post_init__(self) -> None:
        self.nonce = secrets.token_hex(4)

    def _id(self, role: str) -> str:
        return f"a2a-probe-{self.nonce}-{role}"

    def _topic(self, name: str) -> str:
        return f"a2a-probe/{self.nonce}/{name}"

    async def client(self, role: str, **kw: object) -> RawClient:
        if self.username is not None:
            kw.setdefault("username", self.username)
            kw.setdefault("password", self.password)
        kw.setdefault("tls", self.tls)
        return await RawClient.connect(self.host, self.port, self._id(role), **kw)  # type: ignore[arg-type]

    async def redelivery(self) -> Fact:
        topic = self._topic("redelivery")
        sub = await self.client("r-sub", clean=False)
        await sub.subscribe(topic)
        pub = await self.client("r-pub")
        # three, the first two acknowledged: the third's packet id is not the first a
        # broker that numbers a resumed session afresh would give it
        for payload in (b"m1", b"m2", b"m3"):
            await pub.publish(topic, payload)
        first: list[Publish] = []      # m3's delivery (a broker may hold it back until
        deadline = time.monotonic() + 3.0   # m1 and m2 are acknowledged: ejabberd sends one)
        while not first and time.monotonic() < deadline:
            for p in await sub.publishes(0.3):
                if p.topic != topic:
                    continue
                if p.payload == b"m3":
                    first.append(p)
                elif p.packet_id is not None:
                    await sub.ack(p.packet_id)
        await asyncio.sleep(0.2)                      # the acks on their way
        sub.abort()                                   # the third never acknowledged
        await asyncio.sleep(0.3)
        again = await self.client("r-sub", clean=False)
        resent = [p for p in await again.publishes(3.0) if p.topic == topic]
        for p in resent:
            if p.packet_id is not None:
                await again.ack(p.packet_id)
        resent = [p for p in resent if p.payload == b"m3"]   # (m1, m2 were acknowledged)
        for c in (again, pub):
            await c.disconnect()
        await self._forget("r-sub")
        clause = ("[MQTT-4.4.0-1] a resumed session resends what was unacknowledged, under "
                  "its original packet id, [MQTT-3.3.1-1] with DUP=1")
        if not first:
            return Fact("redelivery", "not delivered at all", "the first delivery never came",
                        clause, MUST, UNKNOWN)
        if not resent:
            return Fact("redelivery", "not resent",
                        "an unacknowledged QoS1 message is lost when the session resumes",
                        clause, MUST, FALSE)
        dup = all(p.dup for p in resent)
        ids = [p.packet_id for p in first]
        same = [p.packet_id for p in resent] == ids[:1] * len(resent)
        value = ", ".join(["resent", "DUP=1" if dup else "DUP=0",
                           *([] if same else ["a new packet id"])])
        return Fact("redelivery", value,
                    f"{len(resent)} copy(ies) on resume, packet id(s) "
                    f"{[p.packet_id for p in resent]} (first sent as {ids[:1]})"
                    + ("" if dup else "; [MQTT-3.3.1-1] wants DUP=1")
                    + ("" if same else "; [MQTT-4.4.0-1] wants its original packet id"),
                    clause, MUST, judged(dup and same))

    async def _forget(self, role: str) -> None:
        """Clean the probe's persistent session off the broker."""
        with contextlib.suppress(OSError, ConnectionError, TimeoutError):
            c = await self.client(role, clean=True)
            await c.disconnect()

    async def _silent(self, receiving: bool) -> Fact:
        name = "keepalive_receiving" if receiving else "keepalive"
        will_topic = self._topic(f"{name}/will")
        watcher = await self.client(f"{name}-w")
        await watcher.subscribe(will_topic)
        silent = await self.client(f"{name}-s", keepalive_s=KEEPALIVE_S,
                                   will=Will(will_topic, b"gone"))
        feed_topic = self._topic(f"{name}/feed")
        feeder = None
        if receiving:
            await silent.subscribe(feed_topic)
            feeder = await self.client(f"{name}-f")
        start = time.monotonic()
        limit = KEEPALIVE_S * 5.0
        got: list[Publish] = []

        async def watch() -> None:
            while time.monotonic() - start < limit and not got:
                got.extend(p for p in await watcher.publishes(0.2) if p.topic == will_topic)

        async def feed() -> None:
            while feeder is not None and not got and time.monotonic() - start < limit:
                await feeder.publish(feed_topic, b"x", qos=0)
                await asyncio.sleep(0.25)

        closed_at: list[float] = []

        async def drain() -> None:                   # reads, never writes
            if await silent.closed_within(limit):
                closed_at.append(time.monotonic() - start)

        drainer = asyncio.ensure_future(drain())
        await asyncio.gather(watch(), feed())
        elapsed = time.monotonic() - start
        await asyncio.sleep(0.05)
        drainer.cancel()
        closed = f"; it closed the connection after {closed_at[0]:.1f} s" if closed_at else \
            "; the connection stayed open"
        silent.abort()
        for c in (watcher, *([feeder] if feeder else [])):
            await c.disconnect()
        how = "while it was sent messages" if receiving else "with nothing to send it"
        grace, why = self.keepalive_grace
        bound = 1.5 * KEEPALIVE_S + grace + WILL_SLACK_S
        clause = ("[MQTT-3.1.2-24] a client silent 1.5 x its keepalive is disconnected (its "
                  "will published)" + (f"; allowed {grace:g} s more: {why}" if grace else ""))
        if not got:
            return Fact(name, "never", f"no will within {limit:g} s of silence {how} "
                                       f"(keepalive {KEEPALIVE_S} s; 3.1.1 wants 1.5 x){closed}",
                        clause, MUST, FALSE)
        return Fact(name, f"will after {elapsed:.1f} s",
                    f"keepalive {KEEPALIVE_S} s, silent {how}; 3.1.1: 1.5 x = "
                    f"{1.5 * KEEPALIVE_S:g} s, judged against {bound:g} s (the will's way "
                    f"back and the watcher's polling: {WILL_SLACK_S:g} s){closed}",
                    clause, MUST, judged(elapsed <= bound))

    async def keepalive(self) -> Fact:
        return await self._silent(receiving=False)

    async def keepalive_receiving(self) -> Fact:
        return await self._silent(receiving=True)

    async def takeover_will(self) -> Fact:
        will_topic = self._topic("takeover/will")
        watcher = await self.client("t-w")
        await watcher.subscribe(will_topic)
        old = await RawClient.connect(self.host, self.port, self._id("t-x"), clean=False,
                                      will=Will(will_topic, b"old"),
                                      username=self.username or self._id("t-x"),
                                      password=self.password)
        new = await RawClient.connect(self.host, self.port, self._id("t-x"), clean=False,
                                      will=Will(will_topic, b"new"),
                                      username=self.username or self._id("t-x"),
                                      password=self.password)
        closed = await old.closed_within(2.0)
        wills = [p.payload.decode() for p in await watcher.publishes(1.5) if p.topic == will_topic]
        await new.disconnect()
        await watcher.disconnect()
        old.abort()
        await self._forget("t-x")
        value = {(): "none", ("old",): "the old client's", ("new",): "the new client's (defect)"
                 }.get(tuple(wills), " + ".join(wills))
        # which will, none or the old one's, 3.1.1 leaves open; the new client's was never
        # closed, and the old connection must be ([MQTT-3.1.4-2])
        return Fact("takeover_will", value,
                    ("old connection closed" if closed else "old connection NOT closed")
                    + f"; session present for the new one: {new.session_present}",
                    "[MQTT-3.1.4-2] the existing client is disconnected; [MQTT-3.1.2-8] a "
                    "will is published only when its connection closes", MUST,
                    judged(closed and "new" not in wills))

    async def overlapping_filters(self) -> Fact:
        base = self._topic("overlap")
        sub = await self.client("o-sub")
        await sub.subscribe(f"{base}/#", f"{base}/x")
        pub = await self.client("o-pub")
        await pub.publish(f"{base}/x", b"once")
        got = [p for p in await sub.publishes(1.5) if p.topic == f"{base}/x"]
        for p in got:
            if p.packet_id is not None:
                await sub.ack(p.packet_id)
        for c in (sub, pub):
            await c.disconnect()
        return Fact("overlapping_filters", f"{len(got)} cop{'y' if len(got) == 1 else 'ies'}",
                    "one client, filters t/# and t/x, one PUBLISH to t/x",
                    "[MQTT-3.3.5-1] one copy per matching subscription, or one in all: the "
                    "broker's choice; none is a message lost", MUST,
                    None if got else FALSE)

    async def retain_flags(self) -> Fact:
        base = self._topic("retained")
        live = await self.client("k-live")
        await live.subscribe(base)
        pub = await self.client("k-pub")
        await pub.publish(base, b"kept", retain=True)
        matched = [p.retain for p in await live.publishes(1.0) if p.topic == base]
        late = await self.client("k-late")
        await late.subscribe(base)
        new = [p.retain for p in await late.publishes(1.0) if p.topic == base]
        await pub.publish(base, b"", retain=True)       # leave no retained message behind
        for c in (live, pub, late):
            await c.disconnect()

        def flag(got: list[bool], must: int) -> str:
            if not got:
                return "not delivered"
            return f"RETAIN={int(got[0])}" + ("" if int(got[0]) == must else " (defect)")
        return Fact("retain_flags", f"established {flag(matched, 0)}; new {flag(new, 1)}",
                    "a retained PUBLISH to a subscriber already there, then to a new "
                    "subscription ([MQTT-3.3.1-9] says 0, [MQTT-3.3.1-8] says 1)",
                    "[MQTT-3.3.1-8] RETAIN=1 to a new subscription, [MQTT-3.3.1-9] RETAIN=0 to "
                    "an established one", MUST,
                    judged(matched[:1] == [False] and new[:1] == [True]))

    async def persistence(self) -> Fact:
        if self.restart is None:
            return Fact("persistence", "not measured",
                        "the bench cannot restart this broker (give --broker-restart-command)",
                        PERSISTENCE)
        topic = self._topic("persist")
        sub = await self.client("p-sub", clean=False)
        await sub.subscribe(topic)
        await sub.disconnect()
        pub = await self.client("p-pub")
        await pub.publish(topic, b"queued")
        await pub.disconnect()
        await asyncio.sleep(1.5)    # Mosquitto saves every autosave_interval (1 s here)
        await self.restart()
        again = await self.client("p-sub", clean=False)
        queued = [p for p in await again.publishes(2.0) if p.topic == topic]
        await again.disconnect()
        await self._forget("p-sub")
        present = again.session_present
        value = ("session and queued message kept" if present and queued else
                 "session kept, queued message lost" if present else "nothing kept")
        return Fact("persistence", value,
                    f"graceful restart; sessionPresent={present}, queued QoS1 delivered: "
                    f"{bool(queued)}", PERSISTENCE)

    async def shutdown_wills(self) -> Fact:
        if self.restart is None:
            return Fact("shutdown_wills", "not measured",
                        "the bench cannot restart this broker (give --broker-restart-command)",
                        SHUTDOWN)
        will_topic = self._topic("shutdown/will")
        watcher = await self.client("s-w")
        await watcher.subscribe(will_topic)
        dying = await RawClient.connect(self.host, self.port, self._id("s-x"), clean=True,
                                        will=Will(will_topic, b"gone", retain=True),
                                        username=self.username or self._id("s-x"),
                                        password=self.password, tls=self.tls)
        seen = asyncio.ensure_future(watcher.publishes(30.0))   # until the stop closes it
        await self.restart()
        before = [p for p in await seen if p.topic == will_topic]
        dying.abort()
        late = await self.client("s-l")
        await late.subscribe(will_topic)
        after = [p for p in await late.publishes(1.0) if p.topic == will_topic]
        if after:
            await late.publish(will_topic, b"", retain=True)   # leave nothing retained
        await late.disconnect()
        value = ("published" if before or after else "none")
        return Fact("shutdown_wills", value,
                    f"graceful restart with a client connected: its will reached a subscriber "
                    f"there: {bool(before)}; retained for one after the restart: {bool(after)}",
                    SHUTDOWN)

    async def subscribe_while_connecting(self, rounds: int = 30, retained: int = 300,
                                         every_s: float = 0.001, churners: int = 3) -> Fact:
        base = self._topic("racing")
        holder = await self.client("w-holder")
        await holder.subscribe(f"{base}/kept/#")
        pub = await self.client("w-pub")
        for i in range(retained):        # what a connecting client's walk awaits on
            await pub.publish(f"{base}/kept/{i}", b"r" * 64, retain=True)
        others = [await self.client(f"w-other{i}") for i in range(churners)]
        deaf = closed = tried = 0

        async def new_filters(other: RawClient, name: str, until: asyncio.Event) -> None:
            """A client subscribing, every `every_s`, to a filter nobody had."""
            pid = 0
            with contextlib.suppress(ConnectionError):
                while not until.is_set():
                    pid = pid % 65535 + 1
                    other.writer.write(_packet(SUBSCRIBE, 0x02, pid.to_bytes(2, "big")
                                               + _str(f"{base}/{name}/{pid}") + b"\x01"))
                    await other.writer.drain()
                    await asyncio.sleep(every_s)

        async def drained(other: RawClient) -> None:
            """Its SUBACKs read and dropped: a client that reads nothing is cut off."""
            with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, OSError):
                while await read_packet(other.reader):
                    pass
        readers = [asyncio.ensure_future(drained(o)) for o in others]
        done = asyncio.Event()
        churn = [asyncio.ensure_future(new_filters(o, f"new{i}", done))
                 for i, o in enumerate(others)]
        try:
            # on a loaded machine the race is rarer: until one goes unanswered, or `rounds`
            for k in range(rounds):
                tried += 1
                late = await self.client(f"w-late{k}")
                try:
                    await late.subscribe(f"{base}/own/{k}", timeout_s=3.0)
                except TimeoutError:
                    deaf += 1
                except (ConnectionError, asyncio.IncompleteReadError):
                    closed += 1
                await late.disconnect()
                if deaf or closed:
                    break
        finally:
            done.set()
            await asyncio.gather(*churn)
            for i in range(retained):    # leave no retained message behind
                await pub.publish(f"{base}/kept/{i}", b"", retain=True)
            for c in (holder, pub, *others):
                await c.disconnect()
            for r in readers:
                r.cancel()
        # how it fails differs with the event loop under the broker (the connection left
        # open and never served, or closed): either way the SUBSCRIBE goes unanswered
        return Fact("subscribe_while_connecting",
                    "not always acknowledged (defect)" if deaf or closed else "acknowledged",
                    f"clients connect one after another while {churners} others subscribe to "
                    f"new filters (each one every {every_s * 1000:g} ms), {retained} retained "
                    f"messages on a filter another holds; each subscribes and waits 3 s for "
                    f"its SUBACK ([MQTT-3.8.4-1]): "
                    + (f"number {tried} went unanswered ({'closed' if closed else 'left open'})"
                       if deaf or closed else f"all {tried} acknowledged"),
                    "[MQTT-3.8.4-1] a SUBSCRIBE is answered with a SUBACK", MUST,
                    judged(not (deaf or closed)))

    async def all(self, say: Callable[[str], None] = lambda line: None) -> list[Fact]:
        """Every fact: whether 3.1.1 is spoken at all, the first six at once (their clients
        and topics are apart), then the subscribe race alone, then persistence, which
        restarts the broker."""
        async def one(probe: Callable[[], Awaitable[Fact]]) -> Fact:
            try:
                return await probe()
            except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError,
                    BrokerError) as exc:
                return Fact(probe.__name__, "error", f"{type(exc).__name__}: {exc}",
                            verdict=UNKNOWN)
        try:
            hello = await self.client("hello")
            await hello.disconnect()
        except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as exc:
            return [Fact("v3.1.1", "refused", f"no CONNACK to a 3.1.1 CONNECT "
                                              f"({type(exc).__name__}: {exc})",
                         "MQTT 3.1.1: the broker does not speak it (nothing else of it judged)")]
        say("measuring redelivery, keepalive, takeover, overlapping filters and retain ...")
        probes = (self.redelivery, self.keepalive, self.keepalive_receiving,
                  self.takeover_will, self.overlapping_filters, self.retain_flags)
        facts = await again_alone(probes, await asyncio.gather(*(one(p) for p in probes)),
                                  one)
        # alone: its churning clients are what makes a broker with the defect leave a
        # SUBSCRIBE unanswered, and the other probes' SUBSCRIBEs were answered none either
        # (retain_flags measured "error" on amqtt beside it, 2026-12-05)
        say("measuring a subscribe racing other clients' connects ...")
        facts.append(await one(self.subscribe_while_connecting))
        say("measuring persistence and wills on shutdown (graceful restarts) ...")
        return [*facts, await one(self.persistence), await one(self.shutdown_wills)]


async def again_alone(probes: tuple[Callable[[], Awaitable[Fact]], ...], facts: list[Fact],
                      one: Callable[[Callable[[], Awaitable[Fact]]], Awaitable[Fact]],
                      ) -> list[Fact]:
    """`facts`, measured side by side, with each probe whose connection failed there
    measured again, alone: an error is no verdict, and one that recurs alone is said as it
    is. Either way the detail says the probe ran twice. (Loaded CI runs saw iotcore's
    user_properties and rumqttd's redelivery lose a connection beside the others,
    2026-12-06.)"""
    out = list(facts)
    for i, (probe, fact) in enumerate(zip(probes, facts, strict=True)):
        if fact.value == "error":
            again = await one(probe)
            said = "and" if again.value == "error" else "measured alone;"
            out[i] = replace(again, detail=f"{again.detail} ({said} beside the others: "
                                           f"{fact.detail})")
    return out


def measure(spec: str, workdir: Path, restart_command: str | None = None,
            say: Callable[[str], None] = lambda line: None,
            ca_file: str | None = None) -> list[Fact]:
    """Every fact about the broker `spec` names (amqtt, mosquitto: started here in
    `workdir` and stopped after; an mqtt:// or mqtts:// URL: reached as it is)."""
    from bench.spec.topology import MqttVersion
    from bench.substrates.live.kinds import KINDS
    kind = KINDS.get(spec)
    if kind is not None and kind.per_version_listener:
        # a listener per version: the 3.1.1 facts on one start, the v5 facts on another
        v311, v5 = (measure_on(make_broker(spec, workdir / v.value, version=v), restart_command,
                               say, part) for v, part in ((MqttVersion.V311, "3.1.1"),
                                                          (MqttVersion.V5, "5")))
        return [*v311, *v5]
    return measure_on(make_broker(spec, workdir, restart_command=restart_command,
                                  ca_file=ca_file), restart_command, say)


def measure_on(broker: Broker, restart_command: str | None, say: Callable[[str], None],
               part: str = "both") -> list[Fact]:
    """The facts of `broker` (started here and stopped after): the 3.1.1 ones, the v5
    ones, or `both`."""
    from bench.substrates.live.kinds import KINDS
    try:
        broker.start()
    except BaseException:
        broker.stop()       # a broker that never listened is still a process to end
        raise

    async def restart_owned() -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, broker.stop)
        await loop.run_in_executor(None, broker.start)

    async def restart_external() -> None:
        assert restart_command is not None
        proc = await asyncio.create_subprocess_shell(
            restart_command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await proc.communicate()
        if proc.returncode:
            raise BrokerError(f"the restart command exited with {proc.returncode}: "
                              f"{out.decode(errors='replace')[-300:]}")
        await asyncio.get_running_loop().run_in_executor(
            None, wait_listening, broker.host, broker.port, 30.0, None, None)

    restart = (restart_owned if broker.kind != "external" else
               restart_external if restart_command else None)
    async def every() -> list[Fact]:
        from bench.substrates.live.facts5 import Probe5
        kind = KINDS.get(broker.kind)
        timer = kind.keepalive_timer if kind is not None else None
        probe = Probe(broker.host, broker.port, restart, broker.username, broker.password,
                      broker.tls, timer or (0.0, ""))
        return [*(await probe.all(say) if part != "5" else []),
                *(await Probe5(probe).all(say) if part != "3.1.1" else [])]
    try:
        return asyncio.run(every())
    finally:
        broker.stop()


def verdict_lines(broker: str, facts: list[Fact]) -> list[str]:
    """One line per fact: its verdict (or `measured` where the specification leaves the
    choice), how binding its clause is, what was seen, and the clause; the detail below."""
    out = [broker]
    for f in facts:
        mark = f.verdict.upper() if f.verdict else "measured"
        level = f.level if f.verdict else "MAY" if f.level else ""
        out.append(f"  {mark:8} {level:7} {f.name:27} {f.value}")
        if f.clause:
            out.append(f"  {'':17}{'':27} by {f.clause}")
        if f.verdict == FALSE and f.detail:
            out.append(f"  {'':17}{'':27} seen: {f.detail}")
    return out


def render(facts: dict[str, list[Fact]]) -> str:
    """A Markdown table, one column per broker, then what each value means."""
    names = list(facts)
    rows = ["| fact | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    order = list(dict.fromkeys(f.name for fs in facts.values() for f in fs))
    for fact in order:
        cells = [next((f.value for f in facts[b] if f.name == fact), "-") for b in names]
        rows.append(f"| `{fact}` | " + " | ".join(cells) + " |")
    details = [f"- {b}, {f.name}: {f.detail}" for b in names for f in facts[b] if f.detail]
    return "\n".join(rows + [""] + details)
