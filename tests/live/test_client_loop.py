"""The bench's MQTT client on the event loop (bench/substrates/live/mqtt.py) against a real
Mosquitto: what a busy machine does to it."""

from __future__ import annotations

import asyncio
import select
import time
from pathlib import Path

import pytest

from bench.substrates.live.brokers import make_broker
from bench.substrates.live.mqtt import MqttLink
from tests.live.conftest import MOSQUITTO, loop_until

pytestmark = pytest.mark.skipif(MOSQUITTO is None and not __import__("os").environ.get("CI"),
                                reason="mosquitto not installed (apt-get install mosquitto; "
                                       ".ci/run does)")


def test_a_pingresp_that_came_while_the_loop_stalled_is_read_before_the_keepalive_check(
        tmp_path: Path) -> None:
    """A PINGREQ out, then the loop stalls past the keepalive (a loaded machine) while the
    PINGRESP arrives; the keepalive timer runs before the socket's reader. The answer is
    read first, as paho's own loop does: no keepalive timeout, the link stays up (before,
    the bench's broker watch lost its connection so and judged a run UNKNOWN)."""
    broker = make_broker("mosquitto", tmp_path)
    broker.start()
    loop = asyncio.new_event_loop()
    events: list[str] = []
    link = MqttLink(loop, broker.host, broker.port, "stall",
                    on_message=lambda _d: None, on_connected=lambda _p: events.append("up"),
                    on_disconnected=lambda r: events.append(f"down: {r}"),
                    on_published=lambda _m, _rc: None, keepalive_s=1, clean_session=True)
    try:
        link.connect()
        loop_until(loop, "the CONNACK", lambda: events == ["up"])
        client = link.client
        time.sleep(1.1)          # nothing sent for a keepalive: the next check pings
        client.loop_misc()       # the PINGREQ is due
        link._writable()         # and written, as the loop's writer would
        pinged = time.monotonic()
        # the loop stalls past the keepalive; the PINGRESP comes and waits in the socket
        assert select.select([link._sock], [], [], 20)[0], "no PINGRESP in 20 s"
        time.sleep(max(0.0, 1.3 - (time.monotonic() - pinged)))
        link._tick()             # the keepalive timer, run ahead of the reader
        assert events == ["up"], events
        loop.run_until_complete(asyncio.sleep(0.3))
        assert events == ["up"], events
    finally:
        link.close()
        loop.run_until_complete(asyncio.sleep(0.1))
        loop.close()
        broker.stop()
