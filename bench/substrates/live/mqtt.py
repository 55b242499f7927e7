"""One MQTT connection (paho-mqtt 2.x, MQTT 3.1.1 or 5) driven by an asyncio loop.

paho is the client with manual acknowledgement (`manual_ack=True`): the node acks a QoS1
message only after the batch that handled it is durable. Persistent session
(clean_session=False on 3.1.1; on 5, clean start 0 and a Session Expiry Interval), the client
id as username (amqtt keeps sessions only for named clients), TCP_NODELAY on the socket,
automatic reconnect; re-subscribing after a reconnect is the core's job (it answers every
Connected with a Subscribe). On 5 a PUBACK's reason code reaches `on_published`.

No network thread: paho's own external-loop interface (`loop_read` when the socket is
readable, `loop_write` when paho has bytes to send and the socket can take them,
`loop_misc` every second for keepalive), on the event loop the node runs on — the network
thread and a cross-thread hand-off per message were three quarters of a live node's busy
time. What paho's `loop_forever` does around that loop is done here, as it does it: the
first connection retried, and a lost one reconnected after `reconnect_delay_set`'s wait,
doubling from min to max and back to min once a CONNACK says success. A (re)connect runs in
a thread of the loop's executor: it blocks (a TCP connect to a far broker, a TLS handshake
with the fault proxy on this very loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from bench.core.properties import Props
from bench.spec.brokers import CLIENT
from bench.spec.topology import MqttVersion


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS to the broker: verified by this CA file (an mqtts:// broker's), by these PEM
    certificates (the run's own authority, where the bench offers TLS), or by the system's
    CAs. `port`: TLS is at this port of the broker's host, beside its plain port (as a
    broker listens on 1883 and 8883); None: the broker's port itself speaks TLS."""

    ca_file: str | None = None
    ca_pem: str | None = None
    port: int | None = None

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_pem)

    def endpoint(self, plain: tuple[str, int]) -> tuple[str, int]:
        """Where to connect for TLS, given the broker's plain endpoint."""
        return plain[0], self.port or plain[1]

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("ca_file", self.ca_file), ("ca_pem", self.ca_pem),
                                  ("port", self.port)) if v is not None}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Tls:
        return Tls(d.get("ca_file"), d.get("ca_pem"), d.get("port"))


@dataclass(frozen=True, slots=True)
class Delivery:
    """One PUBLISH the broker sent this client, as it came."""

    topic: str
    payload: bytes
    mid: int
    qos: int
    dup: bool
    retain: bool
    props: Props | None = None     # MQTT 5: its properties (None: it came with none)


def to_paho(props: Props, packet: int = PacketTypes.PUBLISH) -> Properties:
    """The bench's properties as paho sends them (a PUBLISH's, or a will's)."""
    out = Properties(packet)
    if props.response_topic is not None:
        out.ResponseTopic = props.response_topic
    if props.correlation_data is not None:
        out.CorrelationData = props.correlation_data
    if props.user_properties:
        out.UserProperty = list(props.user_properties)
    if props.content_type is not None:
        out.ContentType = props.content_type
    if props.message_expiry_s is not None:
        out.MessageExpiryInterval = props.message_expiry_s
    if props.payload_format is not None:
        out.PayloadFormatIndicator = props.payload_format
    return out


def from_paho(props: Properties | None) -> Props | None:
    """A received PUBLISH's properties as the bench carries them; None when it had none."""
    if props is None:
        return None
    got = Props(getattr(props, "ResponseTopic", None),
                bytes(props.CorrelationData) if hasattr(props, "CorrelationData") else None,
                tuple((str(k), str(v)) for k, v in getattr(props, "UserProperty", ())),
                getattr(props, "ContentType", None),
                getattr(props, "MessageExpiryInterval", None),
                getattr(props, "PayloadFormatIndicator", None))
    return None if got == Props() else got


#: How long a graceful leave waits for its last publish to be acknowledged.
LEAVE_S = 2.0
#: How often paho's keepalive runs (its own loop's select timeout)
MISC_S = 1.0
#: At most this many packets read per readable socket before the loop takes a turn
READ_BATCH = 64


class MqttLink:
    def __init__(self, loop: asyncio.AbstractEventLoop, host: str, port: int, client_id: str, *,
                 on_message: Callable[[Delivery], None],
                 on_connected: Callable[[bool], None],
                 on_disconnected: Callable[[str], None],
                 on_published: Callable[[int, int | None], None],
                 on_subscribed: Callable[[tuple[str, ...]], None] = lambda filters: None,
                 keepalive_s: int = CLIENT.keepalive_s, clean_session: bool = False,
                 login: tuple[str, str | None] | None = None, tls: Tls | None = None,
                 version: MqttVersion = MqttVersion.V311,
                 session_expiry_s: int = CLIENT.session_expiry_s) -> None:
        self.loop = loop
        self.host, self.port = host, port
        self.client_id = client_id
        self.keepalive_s = keepalive_s
        self.version = version
        self.clean_session = clean_session
        #: MQTT 5: the Session Expiry Interval a persistent session's CONNECT asks for;
        #: None on 3.1.1
        self.session_expiry_s = (0 if clean_session else session_expiry_s) \
            if version is MqttVersion.V5 else None
        if version is MqttVersion.V5:
            c = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                            protocol=paho.MQTTv5, manual_ack=True, reconnect_on_failure=True)
        else:
            c = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                            clean_session=clean_session, protocol=paho.MQTTv311, manual_ack=True,
                            reconnect_on_failure=True)
        # a broker's own users when it has them; else the client id (amqtt keeps sessions
        # only for named clients)
        c.username_pw_set(*(login or (client_id, None)))
        if tls is not None:
            c.tls_set_context(tls.context())
        c.max_inflight_messages_set(1000)
        c.max_queued_messages_set(0)       # unlimited: publishes while down are queued
        c.on_socket_open = self._socket_open
        c.on_socket_close = self._socket_close
        c.on_socket_register_write = self._socket_to_write
        c.on_socket_unregister_write = self._socket_written
        c.on_connect = self._connacked(on_connected, on_disconnected)
        c.on_disconnect = lambda _c, _u, _f, rc, _p: self._disconnected(on_disconnected, str(rc))
        c.on_message = lambda _c, _u, m: self._hand(on_message, Delivery(
            m.topic, bytes(m.payload), m.mid, m.qos, bool(m.dup), bool(m.retain),
            from_paho(m.properties) if version is MqttVersion.V5 else None))
        c.on_publish = lambda _c, _u, mid, rc, _p: self._hand(
            on_published, mid, rc.value if version is MqttVersion.V5 else None)
        self._subscriptions: dict[int, tuple[str, ...]] = {}
        self._last_publish: paho.MQTTMessageInfo | None = None
        # Look the filters up in the loop thread: the SUBACK can beat subscribe()'s return.
        c.on_subscribe = lambda _c, _u, mid, _codes, _p: self._hand(
            lambda m: on_subscribed(self._subscriptions.pop(m, ())), mid)
        self.client = c
        #: the owner is done with it: nothing reaches it any more, nothing reconnects
        self.closed = False
        self._dead = False              # killed: its socket is not the loop's to watch
        self._sock: Any = None          # the socket the loop watches
        self._misc: asyncio.TimerHandle | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._connecting = False        # a (re)connect is under way in the executor
        self._delay: float | None = None      # the wait before the next reconnect
        self._loop_thread: int | None = None  # the loop's thread (known once connect() ran)

    # -- from paho into the node --------------------------------------------------------------
    def _hand(self, fn: Callable[..., None], *args: Any) -> None:
        """From inside paho's processing to the node, after it: node code never runs inside
        paho's callbacks (an exception there would leave a packet half handled)."""
        if not self.closed and not self.loop.is_closed():
            if self._on_loop():
                self.loop.call_soon(self._guarded, fn, args)
            else:
                self.loop.call_soon_threadsafe(self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if not self.closed:
            fn(*args)

    def _on_loop(self) -> bool:
        return threading.get_ident() == self._loop_thread

    def _in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn` on the loop: now from the loop itself, else handed over (a reconnect's
        thread opens sockets too). Nothing once the loop is closed (a client collected
        after its run closes its socket once more)."""
        if self.loop.is_closed():
            return
        if self._on_loop():
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def _connacked(self, on_connected: Callable[[bool], None],
                   on_disconnected: Callable[[str], None]) -> Callable[..., None]:
        def connacked(_c: Any, _u: Any, flags: Any, rc: Any, _p: Any) -> None:
            if rc.is_failure:
                self._hand(on_disconnected, f"CONNACK {rc}")
                return
            self._delay = None     # as paho: the next loss waits the least again
            self._hand(on_connected, bool(getattr(flags, "session_present", False)))
        return connacked

    def _disconnected(self, on_disconnected: Callable[[str], None], reason: str) -> None:
        self._hand(on_disconnected, reason)
        self._in_loop(self._reconnect_later)

    # -- the socket on the loop -----------------------------------------------------------------
    def _socket_open(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._in_loop(self._watch, sock)

    def _watch(self, sock: Any) -> None:
        if self._dead:      # a reconnect that ended after the kill: nothing of it stays
            with contextlib.suppress(OSError):
                sock.close()
            return
        self._sock = sock
        self.loop.add_reader(sock, self._readable)
        if self.client.want_write():
            self.loop.add_writer(sock, self._writable)
        if self._misc is None:
            self._misc = self.loop.call_later(MISC_S, self._tick)

    def _socket_close(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        self._in_loop(self._unwatch, sock)

    def _unwatch(self, sock: Any) -> None:
        if sock is None or self._sock is not sock:
            return
        self._sock = None
        for remove in (self.loop.remove_reader, self.loop.remove_writer):
            with contextlib.suppress(ValueError, OSError):
                remove(sock)

    def _socket_to_write(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        self._in_loop(self._want_write, sock)

    def _want_write(self, sock: Any) -> None:
        if self._sock is sock and sock is not None:
            self.loop.add_writer(sock, self._writable)

    def _socket_written(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        self._in_loop(self._written, sock)

    def _written(self, sock: Any) -> None:
        if self._sock is sock and sock is not None:
            with contextlib.suppress(ValueError, OSError):
                self.loop.remove_writer(sock)

    def _readable(self) -> None:
        client = self.client
        client.loop_read(READ_BATCH)
        # TLS: records already decrypted wait in the SSL object, where no selector sees them
        sock = client.socket()
        while isinstance(sock, ssl.SSLSocket) and sock is self._sock and sock.pending():
            client.loop_read(READ_BATCH)
            sock = client.socket()

    def _writable(self) -> None:
        self.client.loop_write()

    def _tick(self) -> None:
        """paho's keepalive: a PINGREQ when due; a PINGRESP overdue closes the connection.
        What has arrived is read first, as paho's own loop reads before its keepalive check:
        after the loop stalled (a busy machine), a PINGRESP may wait unread in the socket
        while this timer runs ahead of the reader, and would be taken for one never sent."""
        self._misc = None
        if self._dead or (self.closed and self._sock is None):
            return
        if self._sock is not None and self._arrived(self._sock):
            self._readable()
        if self._sock is not None:
            self.client.loop_misc()
        self._misc = self.loop.call_later(MISC_S, self._tick)

    @staticmethod
    def _arrived(sock: Any) -> bool:
        """Whether bytes wait to be read on `sock` (a TLS socket's decrypted ones included)."""
        if isinstance(sock, ssl.SSLSocket) and sock.pending():
            return True
        try:
            return bool(select.select([sock], [], [], 0)[0])
        except (OSError, ValueError):   # closed meanwhile: paho finds out as it reads
            return True

    # -- (re)connecting ---------------------------------------------------------------------------
    def _reconnect_later(self) -> None:
        """A connection lost (or never made): try again after paho's wait, with the backoff
        the simulated clients use (one ClientConfig for both)."""
        if self.closed or self._connecting or self._retry is not None:
            return
        self._delay = CLIENT.backoff_min_s if self._delay is None else \
            min(self._delay * 2, CLIENT.backoff_max_s)
        self._retry = self.loop.call_later(self._delay, self._reconnect)

    def _reconnect(self) -> None:
        self._retry = None
        if self.closed or self._connecting:
            return
        self._connecting = True
        self.loop.run_in_executor(None, self._connect_blocking)

    def _connect_blocking(self) -> None:
        """In the executor: paho's own reconnect (a TCP connect, TLS, the CONNECT queued)."""
        try:
            self.client.reconnect()
        except (OSError, ValueError):     # refused, unreachable, TLS failed: wait, again
            failed = True
        else:
            failed = False
        self._in_loop(self._connected_or_not, failed)

    def _connected_or_not(self, failed: bool) -> None:
        self._connecting = False
        # (a connection lost already, while this was under way, asked for no retry)
        if failed or self.client.socket() is None:
            self._reconnect_later()

    def _stop_watching(self) -> None:
        for handle in (self._misc, self._retry):
            if handle is not None:
                handle.cancel()
        self._misc = self._retry = None
        if self._sock is not None:
            self._unwatch(self._sock)

    def connect(self, will_topic: str | None = None, will_payload: bytes = b"",
                will_retain: bool = True, will_props: Props | None = None,
                will_delay_s: int = 0) -> None:
        """Connect in the background; on MQTT 5 the will carries its properties and delay.
        Called on the loop, whose thread it notes."""
        try:
            if asyncio.get_running_loop() is self.loop:
                self._loop_thread = threading.get_ident()
        except RuntimeError:
            pass     # (not on the loop: every hand-over goes through call_soon_threadsafe)
        if will_topic is not None:
            wprops = None
            if self.version is MqttVersion.V5 and (will_props is not None or will_delay_s):
                wprops = to_paho(will_props or Props(), PacketTypes.WILLMESSAGE)
                if will_delay_s:
                    wprops.WillDelayInterval = will_delay_s
            self.client.will_set(will_topic, will_payload, qos=1, retain=will_retain,
                                 properties=wprops)
        if self.version is MqttVersion.V5:
            # a persistent session is clean start 0 plus an expiry; every reconnect resumes it
            props = Properties(PacketTypes.CONNECT)
            props.SessionExpiryInterval = self.session_expiry_s
            self.client.connect_async(self.host, self.port, keepalive=self.keepalive_s,
                                      clean_start=self.clean_session, properties=props)
        else:
            self.client.connect_async(self.host, self.port, keepalive=self.keepalive_s)
        self._in_loop(self._reconnect)   # as paho's loop_start: the first attempt at once

    def subscribe(self, filters: tuple[str, ...], qos: int) -> None:
        _rc, mid = self.client.subscribe([(f, qos) for f in filters])
        if mid is not None:
            self._subscriptions[mid] = filters

    def publish(self, topic: str, payload: bytes, qos: int, retain: bool,
                props: Props | None = None) -> int:
        """Queued by paho while disconnected (QoS1) and sent after the reconnect; `props`
        only on MQTT 5."""
        info = self.client.publish(topic, payload, qos=qos, retain=retain,
                                   properties=to_paho(props) if props is not None
                                   and self.version is MqttVersion.V5 else None)
        self._last_publish = info
        return int(info.mid)

    def ack(self, mid: int, qos: int) -> None:
        if qos > 0:
            self.client.ack(mid, qos)

    def close(self) -> None:
        """A clean DISCONNECT (no will): written when the socket next takes it; paho
        closes the socket once it is."""
        self.closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        self.client.disconnect()

    async def leave(self, within_s: float = LEAVE_S) -> None:
        """A graceful leave: what was published last is acknowledged (or `within_s` passed),
        then a clean DISCONNECT that has left the socket when this returns — a node that
        says goodbye (its card offline) must not have it cut by what closes next. The
        waits run off the event loop, which may carry the node's own proxy."""
        self.closed = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        deadline = self.loop.time() + within_s
        last = self._last_publish
        # its PUBACK comes in on this loop: wait for it here (polled, bounded by within_s)
        while last is not None and self.client.is_connected() and not last.is_published() \
                and self.loop.time() < deadline:
            await asyncio.sleep(0.005)
        self.client.disconnect()
        # the DISCONNECT leaves when the socket takes it; paho then closes the socket
        deadline = self.loop.time() + within_s
        while self._sock is not None and self.loop.time() < deadline:
            await asyncio.sleep(0.005)
        self._stop_watching()

    def kill(self) -> None:
        """Drop the TCP connection without DISCONNECT: the broker publishes the will."""
        self.closed = self._dead = True
        sock = self.client.socket()
        self._stop_watching()    # first: nothing reads, writes or reconnects after the cut
        if isinstance(sock, socket.socket):
            # ENOTCONN here means the peer already closed it: the crash happened anyway.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
