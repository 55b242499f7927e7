"""The `ParleyConnectionAdapter` Parley asks its users to write over their own MQTT client
(parley-mqtt's README: "You supply a live connection through a tiny adapter you write over
paho-mqtt"), written as its adapter.py documents the port and nothing more:

- `publish`: retain=false, at the topology's QoS (0 or 1: "MAY be QoS 0 or 1");
- `subscribe` has replace semantics: one handler per topic, the latest wins;
- `raise_connected()` on every (re)connection (paho's `on_connect`), after which the
  library re-subscribes its topics;
- paho's network loop runs in its own thread (`loop_start`, paho's default reconnect), and
  Parley's core is single-threaded asyncio: every callback hops onto the event loop.

Nothing of the bench is imported; the bench's contract lines are the callers'
(commander.py, handler.py); `client_for` and `topics_and_config` read the launch spec.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from parley import ParleyConfig, ParleyConnectionAdapter, ParleyMessageHandler, ParleyTopics


class PahoAdapter(ParleyConnectionAdapter):
    """Parley's transport port over one paho-mqtt client (MQTT 3.1.1)."""

    def __init__(self, client: mqtt.Client, loop: asyncio.AbstractEventLoop, qos: int) -> None:
        super().__init__()
        self._client, self._loop, self._qos = client, loop, qos
        self._handlers: dict[str, ParleyMessageHandler] = {}
        #: the bench's contract: called on the event loop after each SUBACK that granted its
        #: filter, and with each payload handed to paho (the caller reads the command id
        #: off the request it sends)
        self.on_suback: Callable[[], None] = lambda: None
        self.sent: Callable[[str, bytes], None] = lambda topic, payload: None
        client.on_connect = self._connected
        client.on_message = self._message
        client.on_subscribe = self._subscribed

    def publish(self, topic: str, payload: bytes) -> None:
        self._client.publish(topic, payload, qos=self._qos, retain=False)
        self.sent(topic, payload)

    def subscribe(self, topic: str, on_message: ParleyMessageHandler) -> None:
        self._handlers[topic] = on_message
        self._client.subscribe(topic, qos=self._qos)

    def unsubscribe(self, topic: str) -> None:
        self._handlers.pop(topic, None)
        self._client.unsubscribe(topic)

    def _connected(self, client: Any, userdata: Any, flags: Any, reason: Any,
                   properties: Any = None) -> None:
        if not reason.is_failure:
            self._loop.call_soon_threadsafe(self.raise_connected)

    def _message(self, client: Any, userdata: Any, message: mqtt.MQTTMessage) -> None:
        self._loop.call_soon_threadsafe(self._deliver, message.topic, bytes(message.payload))

    def _deliver(self, topic: str, payload: bytes) -> None:
        handler = self._handlers.get(topic)
        if handler is not None:
            handler(topic, payload)

    def _subscribed(self, client: Any, userdata: Any, mid: Any, reasons: Any,
                    properties: Any = None) -> None:
        if not any(r.is_failure for r in reasons):     # a refused filter serves nothing
            self._loop.call_soon_threadsafe(self.on_suback)


def client_for(spec: dict[str, Any]) -> mqtt.Client:
    """A paho client as its own documentation starts one: MQTT 3.1.1, the node's client id
    and the broker login the bench gives (its launch spec's `login`, else the client id as
    username: docs/PROTOCOL.md W-MQTT-2 — credentials are the user's to supply, Parley
    never holds them), paho's defaults for everything else (clean session, keepalive
    60 s, its reconnect)."""
    node = spec["node"]
    client_id = node.get("client_id") or node["node_id"]
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=mqtt.MQTTv311)
    client.username_pw_set(*(spec.get("login") or (client_id, None)))
    return client


#: the ParleyConfig fields the launch spec's node.settings carries (the topology's timing)
CONFIG_FIELDS = ("request_retry_interval", "no_ack_timeout", "stale_timeout",
                 "execution_timeout", "cancel_retry_interval", "heartbeat_interval",
                 "result_retry_interval", "result_retry_timeout", "tombstone_ttl",
                 "max_concurrent_executions", "max_active_commands")


def topics_and_config(settings: dict[str, Any]) -> tuple[ParleyTopics, ParleyConfig]:
    """The command type's topics and the timing the launch spec's `node.settings` gives,
    as the library's own types."""
    topics = ParleyTopics(*(settings["topics"][k] for k in ("req", "hb", "prg", "res")))
    return topics, ParleyConfig(**{k: settings[k] for k in CONFIG_FIELDS})
