"""Each shipped adapter of software nobody here wrote changes nothing of it (issue 46): under
SIGTERM, SIGKILL and a broker restart, the EMQX SDK's agents behind examples/emqx-sdk do what
the SDK's README quick start (tests/data/sdk_readme) does run alone — the same connections,
DISCONNECTs, closed sockets and wills in Mosquitto's own log, the same cards on the
discovery topic to a raw subscriber, the same exit. No bench code is in the path: the broker
is started here with its own configuration, and what it logs is the observation."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bench.substrates.live.brokers import free_port, wait_listening
from tests.live.conftest import MOSQUITTO

pytest.importorskip("a2a_over_mqtt", reason="the SDK is a test extra: pip install -e '.[test]'")
mqtt = pytest.importorskip("paho.mqtt.client")

pytestmark = pytest.mark.skipif(MOSQUITTO is None and not __import__("os").environ.get("CI"),
                                reason="mosquitto not installed (apt-get install mosquitto; "
                                       ".ci/run does)")

ROOT = Path(__file__).resolve().parents[2]
ORG, UNIT, AGENT = "myorg", "default", "echo"
#: How long what an event sets off may take to show (a will, a reconnect, an exit), on a
#: loaded machine: the SDK's keepalive plays no part in any of the three events.
SETTLE_S = 6.0
#: How long a process may take to come up (imports, CONNECT, SUBSCRIBE, its card).
UP_WITHIN_S = 60.0
#: How long the broker's log must stay as it is once all has shown: Mosquitto logs a
#: client's closed connection, then sends its will — two lines; read between them, the
#: will looked absent (a suite on ten workers, 2026-12-05: the SDK's `lwt` card missing)
QUIET_S = 1.0


class Mosquitto:
    """Mosquitto on a port of its own, logging every connection and disconnection."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.log = folder / "mosquitto.log"
        self.conf = folder / "mosquitto.conf"
        self.conf.write_text("\n".join([
            f"listener {self.port} 127.0.0.1", "allow_anonymous true", "persistence false",
            # stderr: C leaves it unbuffered, where a log file is written when the broker likes;
            # debug: every packet received and sent, which the test waits on (not on time)
            "log_dest stderr", "log_type all", "log_timestamp false", ""]))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert MOSQUITTO is not None
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)],
                                         stdout=subprocess.DEVNULL, stderr=fh)
        wait_listening("127.0.0.1", self.port, 15.0, None, None)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


#: What Mosquitto logs of a client, in its own words (2.0.11), and what each is called here.
LOGGED = [(re.compile(r"New client connected from \S+ as (\S+) \((p\d, c\d, k\d+)"), "connected"),
          (re.compile(r"Client (\S+) disconnected\.$"), "DISCONNECT"),
          (re.compile(r"Client (\S+) closed its connection\."), "closed its socket"),
          (re.compile(r"Client (\S+) has exceeded timeout"), "timed out"),
          (re.compile(r"Client (\S+) already connected"), "taken over")]


def _theirs(client: str) -> bool:
    """A client of the program under test: not the raw observer, and not the harness's
    check that the broker listens (a socket that sends no CONNECT: `<unknown>`)."""
    return not client.startswith("observer-") and client != "<unknown>"


def _logged(lines: list[str]) -> list[str]:
    """The log's client events, client ids numbered by first appearance (the SDK's requester
    puts a random session in its own), the raw observer's and the harness's left out."""
    ids: dict[str, str] = {}
    out = []
    for line in lines:
        for pattern, what in LOGGED:
            m = pattern.search(line)
            if m is None or not _theirs(m.group(1)):
                continue
            who = ids.setdefault(m.group(1), f"client{len(ids) + 1}")
            out.append(f"{who} {what}" + (f" {m.group(2)}" if m.lastindex == 2 else ""))
        if "mosquitto version" in line and "terminating" in line:
            out.append("broker stopped")
    return out


@dataclass
class Seen:
    """What one run showed: the broker's log from the event on, the cards a raw subscriber
    got from the event on ((a2a-status, a2a-status-source)), and how the process ended."""

    logged: list[str] = field(default_factory=list)
    cards: list[tuple[str | None, str | None]] = field(default_factory=list)
    exit: int | None = None


class Observer:
    """A raw MQTT 5 client on the discovery topics, subscribing again after each connect."""

    def __init__(self, port: int) -> None:
        from paho.mqtt.enums import CallbackAPIVersion
        self.cards: list[tuple[str | None, str | None]] = []
        self.received = 0            # every PUBLISH, cleared cards included
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"observer-{port}",
                                  protocol=mqtt.MQTTv5)
        self.client.on_connect = lambda c, *_: c.subscribe(f"$a2a/v1/discovery/{ORG}/#", 1)
        self.client.on_message = self._got
        self.client.reconnect_delay_set(0.2, 0.5)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()

    def _got(self, _c: Any, _u: Any, m: Any) -> None:
        self.received += 1
        props = dict(getattr(m.properties, "UserProperty", []) or [])
        if m.payload:
            self.cards.append((props.get("a2a-status"), props.get("a2a-status-source")))

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def _until(what: str, ok: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + UP_WITHIN_S
    while not ok():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _out, err = proc.communicate()
            pytest.fail(f"{what} not seen within {UP_WITHIN_S} s: {err.decode()[-2000:]}")
        time.sleep(0.05)


#: Mosquitto's debug lines for packets, in its own words (2.0.11)
RECEIVED = re.compile(r"Received (SUBSCRIBE|PUBLISH) from (\S+)")
TO_OBSERVER = re.compile(r"Sending PUBLISH to observer-")
ENDED = re.compile(r"Client (\S+) (disconnected\.$|closed its connection\.|has exceeded timeout)")


def _subscribed_and_published(lines: list[str]) -> bool:
    """Whether a client other than the observer has had a SUBSCRIBE and a PUBLISH received:
    its subscription and its first message (a card, a request) are through."""
    got: dict[str, set[str]] = {}
    for line in lines:
        if (m := RECEIVED.search(line)) and _theirs(m.group(2)):
            got.setdefault(m.group(2), set()).add(m.group(1))
    return any(kinds == {"SUBSCRIBE", "PUBLISH"} for kinds in got.values())


def _settled(broker: Mosquitto, observer: Observer, ended: bool, since: int) -> bool:
    """What the event set off has all shown: where the process ended, its connection's end
    in the broker's log (or the broker it was connected to stopped since the event), and
    every PUBLISH the broker logged sending the observer (a will, a card) has reached it."""
    lines = broker.lines()
    gone = not ended or "broker stopped" in _logged(lines[since:]) \
        or any((m := ENDED.search(x)) and _theirs(m.group(1)) for x in lines)
    return gone and observer.received >= sum(1 for x in lines if TO_OBSERVER.search(x))


def _launch(port: int) -> bytes:
    return (json.dumps({"node": {"node_id": "n1", "agents": [AGENT], "namespace": UNIT,
                                 "a2a": {"org": ORG}},
                        "broker": ["127.0.0.1", port], "t0": time.time()}) + "\n").encode()


def _observe(folder: Path, command: list[str], lines: Callable[[int], bytes], ask: bytes,
             role: str, event: str) -> Seen:
    """Run `command` on a broker of its own, fed `lines` (its launch spec, given the port)
    and, once it printed its first line, `ask`; wait until it is up; set off `event`."""
    broker = Mosquitto(folder)
    broker.start()
    observer = Observer(broker.port)
    argv = [a.replace("{port}", str(broker.port)) for a in command]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(lines(broker.port))   # an adapter's launch spec (and what to ask):
        proc.stdin.flush()               # kept open, as the bench keeps it while a run lasts
        if ask:   # as the bench does: once it said it is up (its launch line read alone)
            assert proc.stdout is not None
            proc.stdout.readline()
            proc.stdin.write(ask)
            proc.stdin.flush()
        if role == "responder":
            _until("its card online", lambda: ("online", "agent") in observer.cards, proc)
        else:
            _until("its request", lambda: any("connected" in x for x in _logged(broker.lines())),
                   proc)
        _until("its SUBSCRIBE and first PUBLISH through",
               lambda: _subscribed_and_published(broker.lines()), proc)
        since, cards_since = len(broker.lines()), len(observer.cards)
        match event:
            case "SIGTERM":
                proc.send_signal(signal.SIGTERM)
            case "SIGKILL":
                proc.kill()
            case "broker_restart":
                broker.restart()
            case _:
                raise AssertionError(event)
        try:
            proc.wait(timeout=SETTLE_S)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + UP_WITHIN_S
        logged, still_since = len(broker.lines()), time.monotonic()
        while time.monotonic() < deadline:
            if len(broker.lines()) != logged:
                logged, still_since = len(broker.lines()), time.monotonic()
            elif _settled(broker, observer, proc.poll() is not None, since) \
                    and time.monotonic() - still_since >= QUIET_S:
                break
            time.sleep(0.05)
        seen = Seen(_logged(broker.lines()[since:]), observer.cards[cards_since:], proc.poll())
    finally:
        observer.close()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        broker.stop()
    return seen


#: role -> the README's program, the adapter, the adapter's launch spec and what it is asked
ADAPTERS: dict[str, tuple[list[str], list[str], Callable[[int], bytes], bytes]] = {
    "responder": ([sys.executable, str(ROOT / "tests/data/sdk_readme/responder.py"),
                   "127.0.0.1", "{port}", ORG, UNIT, AGENT],
                  [sys.executable, str(ROOT / "examples/emqx-sdk/responder.py")],
                  _launch, b""),
    "requester": ([sys.executable, str(ROOT / "tests/data/sdk_readme/requester.py"),
                   "127.0.0.1", "{port}", ORG, UNIT, AGENT],
                  [sys.executable, str(ROOT / "examples/emqx-sdk/requester.py")],
                  _launch, (json.dumps({
                      "op": "request", "request_id": "req-1", "message_id": "m1",
                      "to_agent_id": AGENT, "conversation_id": None,
                      "payload": {"ask": "Hello, agent!"}}) + "\n").encode()),
}


@pytest.fixture
def folders(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    def folder(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name
    yield folder


@pytest.mark.parametrize("event", ["SIGTERM", "SIGKILL", "broker_restart"])
@pytest.mark.parametrize("role", list(ADAPTERS))
def test_an_adapter_does_what_the_sdks_readme_does(folders: Callable[[str], Path], role: str,
                                                    event: str) -> None:
    bare, adapter, lines, ask = ADAPTERS[role]
    alone = _observe(folders("readme"), bare, lambda port: b"", b"", role, event)
    adapted = _observe(folders("adapter"), adapter, lines, ask, role, event)
    if role == "requester" and event == "broker_restart":
        # the README's client is one request long: when the SDK raises to it (its connection
        # lost) the program ends, exit 1; the adapter, a program of many requests, reports
        # that request's end (SEND_FAILED) and waits for the next. What the SDK does is the
        # same — the socket closed, nothing sent again — and that is what is compared.
        assert (alone.exit, adapted.exit) == (1, None), (alone, adapted)
        alone.exit = adapted.exit
    assert adapted == alone, f"the SDK's README run alone: {alone}\nbehind the adapter: {adapted}"
