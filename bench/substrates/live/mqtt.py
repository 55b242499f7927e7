"""One MQTT connection (paho-mqtt 2.x, MQTT 3.1.1 or 5) whose events land in an asyncio loop.

paho is the client with manual acknowledgement (`manual_ack=True`): the node acks a QoS1
message only after the batch that handled it is durable. Persistent session
(clean_session=False on 3.1.1; on 5, clean start 0 and a Session Expiry Interval), the client
id as username (amqtt keeps sessions only for named clients), TCP_NODELAY on the socket,
automatic reconnect; re-subscribing after a reconnect is the core's job (it answers every
Connected with a Subscribe). On 5 a PUBACK's reason code reaches `on_published`.
"""

from __future__ import annotations

import asyncio
import contextlib
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
        # the same backoff the simulated clients use (one ClientConfig for both)
        c.reconnect_delay_set(min_delay=CLIENT.backoff_min_s, max_delay=CLIENT.backoff_max_s)
        c.on_socket_open = self._socket_open
        c.on_connect = lambda _c, _u, flags, rc, _p: self._hand(
            on_connected if not rc.is_failure else (lambda _present: on_disconnected(f"CONNACK {rc}")),
            bool(getattr(flags, "session_present", False)))
        c.on_disconnect = lambda _c, _u, _f, rc, _p: self._hand(on_disconnected, str(rc))
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
        self.closed = False

    def _hand(self, fn: Callable[..., None], *args: Any) -> None:
        """From paho's network thread into the asyncio loop (never run node code here)."""
        if not self.closed:
            self.loop.call_soon_threadsafe(self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if not self.closed:
            fn(*args)

    @staticmethod
    def _socket_open(_client: paho.Client, _userdata: Any, sock: Any) -> None:
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connect(self, will_topic: str | None = None, will_payload: bytes = b"",
                will_retain: bool = True, will_props: Props | None = None,
                will_delay_s: int = 0) -> None:
        """Connect in the background; on MQTT 5 the will carries its properties and delay."""
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
        self.client.loop_start()

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
        """A clean DISCONNECT (no will)."""
        self.closed = True
        self.client.disconnect()
        self._stop_network_thread()

    async def leave(self, within_s: float = LEAVE_S) -> None:
        """A graceful leave: what was published last is acknowledged (or `within_s` passed),
        then a clean DISCONNECT that has left the socket when this returns — a node that
        says goodbye (its card offline) must not have it cut by what closes next. The
        waits run off the event loop, which may carry the node's own proxy."""
        self.closed = True
        last = self._last_publish
        if last is not None and self.client.is_connected():
            def acked() -> None:
                with contextlib.suppress(RuntimeError, ValueError):
                    last.wait_for_publish(within_s)
            await self.loop.run_in_executor(None, acked)
        self.client.disconnect()
        # the network thread ends once the DISCONNECT is written
        await self.loop.run_in_executor(None, self.client.loop_stop)

    def kill(self) -> None:
        """Drop the TCP connection without DISCONNECT: the broker publishes the will."""
        self.closed = True
        sock = self.client.socket()
        self._stop_network_thread()    # first: the thread must not reconnect after the cut
        if isinstance(sock, socket.socket):
            # ENOTCONN here means the peer already closed it: the crash happened anyway.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _stop_network_thread(self) -> None:
        """Tell paho's network thread to end, without waiting for it here: it notices only
        at its next select timeout (up to 1 s), and waiting on the event loop froze every
        node of the process and the workload for that long at each crash. Nothing it does
        afterwards reaches the loop (`closed`)."""
        threading.Thread(target=self.client.loop_stop, daemon=True,
                         name=f"stop-{self.client_id}").start()
