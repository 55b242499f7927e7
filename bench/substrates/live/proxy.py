"""An MQTT-aware TCP fault proxy between one node and the broker (127.0.0.1 only).

It forwards whole MQTT packets (it reads the fixed header and the remaining length), so
it can act per packet: delay them (latency), delay them as TCP retransmission would
(loss), blackhole everything (partition: nothing crosses and nothing is closed — each
side finds out through its own keepalive, and a side that gives up and closes does not
close the other, which stays open and silent until the heal, as across a real partition
where no FIN gets through; a new connection is accepted and then hears nothing until the
heal, as a SYN unanswered) or one way only (what goes the other way, a close among it,
still crosses; a new connection still hears nothing: TCP's handshake needs both ways),
withhold the node's PUBACKs (the broker
keeps the messages in flight and redelivers them, with DUP, when the connection comes
back), deliver a broker's PUBLISH twice, or rewrite a PUBLISH's payload on its way to the
node (a man in the middle), or refuse an MQTT 5 PUBLISH from the node as a broker would
(not forwarded: a PUBACK with a failure reason code is written back to the node), or strip
or alter one of an MQTT 5 PUBLISH's properties on its way to the broker (decoded and
encoded again by the `mqtt5` codec, every other property kept).

Where the run offers TLS (`server_tls`), it listens on a second port for it, beside the
plain one, as a broker listens on 8883 beside 1883: it terminates the node's TLS there,
and tells the tap which of the two each connection came by.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

import mqtt5

from bench.core.properties import Props
from bench.faults.primitives import Tampering
from bench.spec.distribution import Distribution
from bench.substrates.live.mqtt import Tls
from bench.substrates.live.tap import protocol_level
from bench.substrates.tcp import retransmission_delay_ms

CONNECT, PUBLISH, PUBACK = 1, 3, 4


@dataclass
class _Connection:
    """What one proxied connection has said of itself (its CONNECT's protocol level), and
    where to write to its client (a PUBACK the proxy answers itself)."""

    v5: bool = False
    client: asyncio.StreamWriter | None = None
    tls: bool = False          # it came by the TLS port


@dataclass
class Counters:
    connections: int = 0
    unanswered: int = 0          # connections opened during a partition: they heard nothing
    packets: int = 0
    delayed: int = 0
    retransmitted: int = 0
    blackholed: int = 0
    passed: int = 0              # crossed a one-way partition the way it left open
    pubacks_withheld: int = 0
    publishes_duplicated: int = 0
    publishes_rewritten: int = 0
    publishes_refused: int = 0


@dataclass
class Faults:
    latency_ms: Distribution | None = None
    loss: float = 0.0
    partitioned: bool = False
    unplugged: bool = False       # partitioned with no interface: a new connection fails at once
    #: the ways the partition cuts: "up" (the node's packets), "down" (the broker's), or both
    blocked: frozenset[str] = frozenset({"up", "down"})
    withhold_puback: bool = False
    duplicate_publish: float = 0.0
    #: (topic, payload) -> new payload, or None to leave it: applied to PUBLISHes to the node
    rewrite: Callable[[str, bytes], bytes | None] | None = None
    #: MQTT 5: (share of the node's QoS1 PUBLISHes refused, the PUBACK's reason code)
    refuse_publish: tuple[float, int] | None = None
    #: MQTT 5: property_tampering faults acting on the node's PUBLISHes, by fault index
    tampering: dict[int, Tampering] = field(default_factory=dict)


async def read_packet(reader: asyncio.StreamReader) -> bytes:
    """One whole MQTT control packet, or b"" at EOF."""
    first = await reader.read(1)
    if not first:
        return b""
    length_bytes = bytearray()
    multiplier, remaining = 1, 0
    while True:
        b = await reader.readexactly(1)
        length_bytes += b
        remaining += (b[0] & 0x7F) * multiplier
        if not b[0] & 0x80:
            break
        multiplier *= 128
        if multiplier > 128 ** 3:
            raise ValueError("malformed MQTT remaining length")
    body = await reader.readexactly(remaining) if remaining else b""
    return first + bytes(length_bytes) + body


def varint(n: int) -> bytes:
    """MQTT's variable-length integer (the fixed header's remaining length)."""
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def rewrite_publish(packet: bytes, fn: Callable[[str, bytes], bytes | None],
                    v5: bool = False) -> bytes:
    """The same PUBLISH packet (flags, topic, packet id, MQTT 5 properties) with the
    payload `fn` gives."""
    topic, head, payload = split_publish(packet, v5)
    new = fn(topic, payload)
    if new is None:
        return packet
    rest = head + new
    return bytes([packet[0]]) + varint(len(rest)) + rest


def split_publish(packet: bytes, v5: bool = False) -> tuple[str, bytes, bytes]:
    """A whole PUBLISH packet's topic, its variable header (topic, the packet id at QoS > 0
    and, on MQTT 5, the properties, kept byte for byte) and its payload."""
    i = 1
    while packet[i] & 0x80:
        i += 1
    body = packet[i + 1:]
    tlen = int.from_bytes(body[:2], "big")
    head_len = 2 + tlen + (2 if (packet[0] >> 1) & 0x03 else 0)
    if v5:
        length, used = read_varint(body, head_len)
        head_len += used + length
    return body[2:2 + tlen].decode("utf-8", "replace"), body[:head_len], body[head_len:]


def read_varint(b: bytes, at: int) -> tuple[int, int]:
    """MQTT's variable-length integer at `b[at:]`: (value, bytes it took)."""
    value, shift, used = 0, 0, 0
    while True:
        byte = b[at + used]
        used += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, used
        shift += 7
        if used == 4:
            raise ValueError("malformed MQTT variable-length integer")


@dataclass
class FaultProxy:
    upstream: tuple[str, int]
    rng: random.Random
    upstream_tls: Tls | None = None     # nodes speak plain MQTT to the proxy; it speaks TLS on
    host: str = "127.0.0.1"
    port: int = 0
    #: the TLS the proxy offers nodes, on `tls_port` (None: plain TCP only)
    server_tls: ssl.SSLContext | None = None
    tls_port: int = 0
    faults: Faults = field(default_factory=Faults)
    counters: Counters = field(default_factory=Counters)
    #: the wire tap: told of every packet as it is written to the other side (to_broker,
    #: packet, whether the connection speaks MQTT 5, whether it came by TLS), so what it
    #: sees is what crossed, after every fault acted
    tap: Callable[[bool, bytes, bool, bool], None] | None = None
    _server: asyncio.base_events.Server | None = None
    _tls_server: asyncio.base_events.Server | None = None
    _links: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.server_tls is not None:
            self._tls_server = await asyncio.start_server(
                lambda r, w: self._accept(r, w, tls=True), self.host, self.tls_port,
                ssl=self.server_tls)
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        self.drop_all()
        for server in (self._server, self._tls_server):
            if server is not None:
                server.close()
                await server.wait_closed()

    def drop_all(self) -> int:
        """Close every proxied connection (both ends see a reset, not a DISCONNECT)."""
        n = len(self._links)
        for w in list(self._links):
            w.transport.abort()
        self._links.clear()
        return n

    async def _accept(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter,
                      tls: bool = False) -> None:
        if self.faults.partitioned and self.faults.unplugged:
            self.counters.unanswered += 1
            c_writer.transport.abort()   # no route to the broker: refused at once
            return
        if self.faults.partitioned:
            # its SYN would go unanswered: the client hears nothing until the heal ends it
            self.counters.unanswered += 1
            self._links.add(c_writer)
            with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
                while await read_packet(c_reader):
                    self.counters.blackholed += 1
            self._links.discard(c_writer)
            c_writer.transport.abort()
            return
        try:
            b_reader, b_writer = await asyncio.open_connection(
                *self.upstream, ssl=self.upstream_tls.context() if self.upstream_tls else None)
        except OSError:
            c_writer.transport.abort()   # the broker is down: so is the proxied connection
            return
        self.counters.connections += 1
        self._links |= {c_writer, b_writer}
        conn = _Connection(client=c_writer, tls=tls)
        up = asyncio.create_task(self._pump(c_reader, b_writer, True, conn))
        down = asyncio.create_task(self._pump(b_reader, c_writer, False, conn))
        _done, pending = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        f = self.faults
        if f.partitioned and pending and ("up" if up in _done else "down") in f.blocked:
            # no FIN crosses a partition: the side still open stays open (its pump goes on
            # reading and dropping) until its own keepalive closes it or the heal does. Cut
            # one way only, a close the other way crosses: the far side sees it end.
            await asyncio.wait(pending)
        for task in (up, down):
            task.cancel()
        for w in (c_writer, b_writer):
            self._links.discard(w)
            w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    to_broker: bool, conn: _Connection) -> None:
        """One direction of a proxied connection. Each packet gets a due time of its own
        (now + its delay), never earlier than the one before it: packets of one TCP stream
        arrive in order, but a link delays them side by side, not one after the other (a
        sleep per packet in turn would queue them, and a 300-700 ms link measured up to
        2.5 s). A reader queues, a sender writes each when it is due."""
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        sender = asyncio.create_task(self._send(queue, writer, to_broker, conn))
        try:
            if await self._read(reader, queue, to_broker, conn):
                queue.put_nowait(None)   # what was read reaches the other side, then EOF
                with contextlib.suppress(OSError, ConnectionError):
                    await sender
        finally:
            sender.cancel()

    async def _read(self, reader: asyncio.StreamReader,
                    queue: asyncio.Queue[tuple[float, bytes] | None], to_broker: bool,
                    conn: _Connection) -> bool:
        """Reads and schedules packets until EOF (True) or until the connection dies: a
        reset, a malformed stream, TCP giving up on a segment (False)."""
        loop = asyncio.get_running_loop()
        last_due = 0.0
        # EOF, a reset or a malformed stream ends this proxied connection; both sides then
        # see it close, as they would if the network between them failed.
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, ValueError):
            while True:
                packet = await read_packet(reader)
                if not packet:
                    return True
                self.counters.packets += 1
                if to_broker and packet[0] >> 4 == CONNECT:
                    conn.v5 = protocol_level(packet) == 5
                f = self.faults
                if f.partitioned:
                    if ("up" if to_broker else "down") in f.blocked:
                        self.counters.blackholed += 1
                        continue
                    self.counters.passed += 1
                kind = packet[0] >> 4
                if to_broker and kind == PUBACK and f.withhold_puback:
                    self.counters.pubacks_withheld += 1
                    continue
                if to_broker and kind == PUBLISH and f.refuse_publish is not None \
                        and self._refused(packet, conn, *f.refuse_publish):
                    continue
                if to_broker and kind == PUBLISH and f.tampering and conn.v5:
                    packet = self._tampered(packet, list(f.tampering.values()))
                delay = 0.0
                if f.latency_ms is not None:
                    delay += f.latency_ms.sample(self.rng) / 1000
                    self.counters.delayed += 1
                extra_ms, retransmissions = retransmission_delay_ms(self.rng, f.loss)
                self.counters.retransmitted += retransmissions
                if extra_ms == float("inf"):
                    return False     # TCP gave up on the segment: the connection dies
                last_due = max(loop.time() + delay + extra_ms / 1000, last_due)
                queue.put_nowait((last_due, packet))
        return False

    def _refused(self, packet: bytes, conn: _Connection, share: float, reason: int) -> bool:
        """puback_refused: a QoS1 PUBLISH of an MQTT 5 connection, drawn with `share`, is
        kept from the broker and answered with PUBACK(`reason`): its packet id, the reason
        code, no properties (MQTT 5 §3.4.2)."""
        if not conn.v5 or conn.client is None or (packet[0] >> 1) & 0x03 != 1 \
                or self.rng.random() >= share:
            return False
        _topic, head, _payload = split_publish(packet)      # topic, then the packet id
        puback = bytes([PUBACK << 4, 3]) + head[-2:] + bytes([reason])
        self.counters.publishes_refused += 1
        conn.client.write(puback)
        if self.tap is not None:
            self.tap(False, puback, conn.v5, conn.tls)
        return True

    @staticmethod
    def _tampered(packet: bytes, tampering: list[Tampering]) -> bytes:
        """property_tampering: the PUBLISH with its properties as each fault leaves them
        (Tampering.act, as the simulated link does it), re-encoded by the `mqtt5` codec
        with every other field kept; the same bytes if none acted."""
        try:
            got, _n = mqtt5.read(memoryview(packet))
        except Exception:   # noqa: BLE001 - the codec's own errors: forwarded as it came
            return packet
        if not isinstance(got, mqtt5.PublishPacket):
            return packet
        props = Props(got.response_topic, None if got.correlation_data is None
                      else bytes(got.correlation_data), tuple(got.user_properties or ()),
                      got.content_type, got.message_expiry_interval)
        new = props
        for t in tampering:
            new = t.act(new) or new
        if new is props:
            return packet
        return bytes(mqtt5.PublishPacket(
            got.topic, got.payload, qos=got.qos, retain=got.retain, packet_id=got.packet_id,
            duplicate=got.duplicate, payload_format_indicator=got.payload_format_indicator,
            message_expiry_interval=got.message_expiry_interval, content_type=got.content_type,
            response_topic=new.response_topic, correlation_data=new.correlation_data,
            subscription_ids=got.subscription_ids, topic_alias=got.topic_alias,
            user_properties=list(new.user_properties) or None).write())

    async def _send(self, queue: asyncio.Queue[tuple[float, bytes] | None],
                    writer: asyncio.StreamWriter, to_broker: bool, conn: _Connection) -> None:
        """Writes each packet when it is due; a write that fails ends only this sender (the
        reader sees the connection end on its own)."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(OSError, ConnectionError):
            while (item := await queue.get()) is not None:
                due, packet = item
                if due > loop.time():
                    await asyncio.sleep(due - loop.time())
                kind = packet[0] >> 4
                f = self.faults
                if not to_broker and kind == PUBLISH and f.rewrite is not None:
                    rewritten = rewrite_publish(packet, f.rewrite, conn.v5)
                    if rewritten != packet:
                        self.counters.publishes_rewritten += 1
                        packet = rewritten
                writer.write(packet)
                if self.tap is not None:
                    self.tap(to_broker, packet, conn.v5, conn.tls)
                if not to_broker and kind == PUBLISH and f.duplicate_publish \
                        and self.rng.random() < f.duplicate_publish:
                    self.counters.publishes_duplicated += 1
                    writer.write(packet)
                    if self.tap is not None:
                        self.tap(to_broker, packet, conn.v5, conn.tls)
                await writer.drain()
