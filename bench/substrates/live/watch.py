"""The bench's watch of a live broker, for the whole run: when it goes away and comes back,
planned (a fault stopped it) or not, journaled as `broker_down` / `broker_up` — so that
checkers name a broker outage instead of blaming the nodes."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

from bench.core import events as ev
from bench.spec.brokers import CLIENT
from bench.spec.topology import MqttVersion
from bench.substrates.live.brokers import Broker
from bench.substrates.live.mqtt import MqttLink

#: How often the watch polls a broker process the bench started.
POLL_S = 0.05


class BrokerWatch:
    def __init__(self, loop: asyncio.AbstractEventLoop, broker: Broker,
                 record: Callable[[str, ev.Event], None],
                 login: tuple[str, str | None] | None,
                 version: MqttVersion = MqttVersion.V311) -> None:
        self.loop, self.broker, self.record, self.login = loop, broker, record, login
        self.version = version
        self.up = asyncio.Event()
        self.gone = asyncio.Event()
        #: a fault is stopping the broker (or the run is ending): its outage is planned
        self.planned = False
        self.link: MqttLink | None = None       # an external broker's watch client
        self.task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        """The broker is up: watch it. The process the bench started is polled; an external
        broker is watched by a client of the bench's own (its connection lost and not
        regained). A broker that goes away closes that connection at once; the client's
        keepalive is the nodes' own (5 s), so that a loaded machine's late ping gives the
        broker up no sooner than a node would — at 2 s, a pass of the suite beside another
        (2026-12-07) saw Mosquitto close the watch client of a run whose loop was late, and
        called the broker down, every verdict UNKNOWN."""
        self.up.set()
        if self.broker.kind == "external":
            self.link = MqttLink(
                self.loop, self.broker.host, self.broker.port,
                f"a2a-bench-watch-{secrets.token_hex(3)}", on_message=lambda _d: None,
                on_connected=lambda _present: self.back(),
                on_disconnected=lambda reason: self.went(
                    f"the watch client lost its connection ({reason})"),
                on_published=lambda _m, _rc: None, keepalive_s=CLIENT.keepalive_s,
                clean_session=True,
                login=self.login, tls=self.broker.tls, version=self.version)
            self.link.connect()
            return
        self.task = self.loop.create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            proc = self.broker.proc
            if proc is not None and proc.poll() is not None:
                self.went(f"its process exited with {proc.returncode}")
            await asyncio.sleep(POLL_S)

    def went(self, how: str) -> None:
        if self.up.is_set():
            self.up.clear()
            self.gone.set()
            self.record("broker", ev.BrokerDown(how, self.planned))

    def back(self) -> None:
        if not self.up.is_set():
            self.gone.clear()
            self.up.set()
            self.record("broker", ev.BrokerUp(self.planned))

    def stop(self) -> None:
        self.planned = True    # the end of the run is not an outage
        if self.task is not None:
            self.task.cancel()
        if self.link is not None:
            self.link.close()
