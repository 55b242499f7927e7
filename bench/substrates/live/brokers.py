"""Brokers the live substrate runs against: the embedded amqtt broker and Mosquitto, each
a child process the bench starts, kills and restarts on a fixed 127.0.0.1 port; or an
external broker given by URL, which the bench can restart only with a user's command."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from bench.spec.brokers import BEHAVIOURS, RUN_AFTER_BROKER_MS, KeepaliveCheck
from bench.spec.topology import MqttVersion
from bench.substrates.live.kinds import (
    KINDS,
    BrokerSetupError,
    Setup,
    free_port,
    mosquitto_conf,
)
from bench.substrates.live.mqtt import Tls

__all__ = ["KINDS", "Broker", "BrokerError", "free_port", "make_broker", "mosquitto_conf"]

#: MQTT 3.1.1 §3.2.2.3: why a broker refused a connection.
CONNACK_CODES = {1: "unacceptable protocol version", 2: "client identifier rejected",
                 3: "server unavailable", 4: "bad user name or password", 5: "not authorized"}


class BrokerError(RuntimeError):
    """A broker could not be started or reached."""


MOSQUITTO_MISSING = "mosquitto is not installed (Debian: apt-get install mosquitto)"


def mosquitto_exe() -> str | None:
    """Where Mosquitto is (Debian puts it in /usr/sbin, often not on a user's PATH)."""
    return KINDS["mosquitto"].find()


#: How many ports a broker's first start tries when the one it was given was taken meanwhile.
PORT_ATTEMPTS = 5
#: How a broker's start says its port was taken: the C library's words (Mosquitto, amqtt,
#: the Rust brokers), and Erlang's (RabbitMQ: "listen_error … eaddrinuse", a clean clone's
#: suite, 2026-12-07; ejabberd)
PORT_TAKEN = ("address already in use", "eaddrinuse")


def _group(pid: int) -> list[int]:
    """`pid` and the live processes of its process group (a broker started by a script —
    RabbitMQ, ejabberd — listens from a child of it, which outlives the script's end)."""
    out = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != pid:
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == pid and fields[0] != "Z":     # its pgrp; not a zombie
                    out.append(int(entry))
    return out


def _end_group(pgid: int, timeout_s: float) -> None:
    """Wait until no process of the group is left, SIGKILLing what is after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while len(_group(pgid)) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    if len(_group(pgid)) > 1:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)


def _listens(pid: int, port: int) -> bool | None:
    """Whether process `pid`, or one of its process group, holds the socket listening on
    `port` (Linux's /proc; None where that cannot be read): a connection alone may reach
    another process that took the port while ours failed to bind it."""
    try:
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError):
                for line in Path(table).read_text().splitlines()[1:]:
                    f = line.split()
                    if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(f[9])
        fds = [(pid, fd) for fd in os.listdir(f"/proc/{pid}/fd")]
    except FileNotFoundError:
        return False     # the process is gone: whoever listens, it is not ours
    except OSError:
        return None
    for member in _group(pid)[1:]:
        with contextlib.suppress(OSError):      # (one may end meanwhile)
            fds += [(member, fd) for fd in os.listdir(f"/proc/{member}/fd")]
    held = set()
    for p, fd in fds:
        # a process starting up opens and closes files as it imports: an fd listed a moment
        # ago may be gone now. That was taken for "cannot tell" (None), and a broker that
        # had failed to bind was believed to listen on the port another process held (CI,
        # 2026-12-05: the amqtt case of the squatter test)
        with contextlib.suppress(FileNotFoundError):
            held.add(os.readlink(f"/proc/{p}/fd/{fd}"))
    return any(f"socket:[{i}]" in held for i in inodes)


def wait_listening(host: str, port: int, timeout_s: float, proc: subprocess.Popen[bytes] | None,
                   log: Path | None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-2000:] if log and log.exists() else ""
            raise BrokerError(f"broker exited with {proc.returncode} before listening on "
                              f"{host}:{port}\n{tail}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                if proc is None or _listens(proc.pid, port) is not False:
                    return
                time.sleep(0.05)     # someone else listens there: ours may yet fail to bind
        except socket.gaierror as exc:
            if exc.errno == socket.EAI_NONAME:    # no such name: nothing to wait for
                raise BrokerError(f"{host} does not resolve ({exc.strerror or exc})") from None
            time.sleep(0.05)                      # a resolver not answering yet: again
        except OSError:
            time.sleep(0.05)
    raise BrokerError(f"nothing listens on {host}:{port} after {timeout_s:g} s")


@dataclass
class Broker:
    """A broker the bench controls. `kind` names its semantics in the history."""

    kind: str
    host: str
    port: int
    workdir: Path
    persistence: bool = True
    proc: subprocess.Popen[bytes] | None = None
    restart_command: str | None = None   # external brokers only
    username: str | None = None          # external brokers only (mqtt://user:pass@host)
    password: str | None = None
    tls: Tls | None = None               # external brokers only (mqtts://)
    #: the whole second of the monotonic clock the broker started in, where its row says it
    #: counts whole seconds and a start `on_second` did not straddle one (else None)
    start_second: int | None = None
    #: how many times it was started: the first start may move to another port
    starts: int = 0
    #: the MQTT version its clients speak, where its kind has a listener per version
    version: MqttVersion | None = None

    @property
    def url(self) -> str:
        """Without the credentials: this is what gets printed and recorded."""
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    @property
    def keeps_sessions(self) -> bool | None:
        """Its sessions and queued messages outlive a restart as configured (None: a broker
        by URL, whose configuration the bench does not know)."""
        kind = KINDS.get(self.kind)
        return None if kind is None else self.persistence and kind.keeps_sessions

    @property
    def controllable(self) -> bool:
        return self.kind != "external" or bool(self.restart_command)

    def _setup(self) -> Setup:
        # started as root, Mosquitto drops to user `mosquitto`, which cannot write its
        # persistence file in our (root's) folder: it would keep nothing
        # absolute: a broker that changes its folder (ejabberd's Erlang node writes its
        # cookie under HOME) reads a relative path from somewhere else
        return Setup(self.workdir.resolve(), self.host, self.port, self.persistence,
                     self.version,
                     _user() if os.geteuid() == 0 else None)

    def _command(self) -> tuple[list[str], dict[str, str]]:
        """How to start it, and what its environment adds."""
        kind = KINDS.get(self.kind)
        if kind is None:
            raise BrokerError(f"cannot start a broker of kind {self.kind!r}")
        found = kind.find()
        if found is None:
            raise BrokerError(MOSQUITTO_MISSING if self.kind == "mosquitto" else kind.missing())
        setup = self._setup()
        try:
            env = kind.env(setup)
            return kind.argv(found, setup), env
        except BrokerSetupError as exc:
            raise BrokerError(str(exc)) from None

    def start(self, timeout_s: float | None = None, *, on_second: bool = False,
              version: MqttVersion | None = None) -> None:
        """Start the broker and wait until it listens. `on_second`: where the broker counts
        whole seconds (Mosquitto's keepalive sweep), start it just after one, and keep
        which in `start_second` so that a run can start its nodes in phase with it. An
        external broker is spoken to once, in `version` (None: either); a broker that
        serves each version on a listener of its own opens `version`'s (None: the one it
        was made for)."""
        if self.kind == "external":
            wait_listening(self.host, self.port, timeout_s or 15.0, None, None)
            self._hello(timeout_s or 15.0, version)
            return
        if version is not None:
            self.version = version
        kind = KINDS.get(self.kind)
        wait_s = timeout_s or (kind.start_timeout_s if kind is not None else 15.0)
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.workdir / f"{self.kind}.log"

        def launch() -> None:
            argv, env = self._command()
            run_as = kind.run_as if kind is not None and os.geteuid() == 0 else None
            with open(log, "ab") as fh:
                self.proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT,
                                             start_new_session=True, user=run_as,
                                             env={**os.environ, **env} if env else None)
            wait_listening(self.host, self.port, wait_s, self.proc, log)
        self.launch_on_a_free_port(launch, on_second, BrokerError)

    def launch_on_a_free_port(self, launch: Callable[[], None], on_second: bool,
                              refused: type[Exception],
                              moved: Callable[[], None] = lambda: None) -> None:
        """`launch_in_phase`, and where the port is taken (`refused`, saying so: PORT_TAKEN),
        again on another — on the first start only. Its port came free from the kernel a
        moment ago, and another run on the machine may have taken it since (two
        tests side by side; a container's "userland proxy ... bind"); a restart keeps its
        port, which its clients know. `moved` remakes, for the new port, what the refused
        launch had made for the old one."""
        first, self.starts = self.starts == 0, self.starts + 1
        for attempt in range(PORT_ATTEMPTS if first else 1):
            try:
                self.launch_in_phase(launch, on_second)
                return
            except refused as exc:
                if attempt + 1 == PORT_ATTEMPTS or not first \
                        or not any(w in str(exc).lower() for w in PORT_TAKEN):
                    raise
                self.port = free_port(self.host)
                moved()

    @property
    def _keepalive(self) -> KeepaliveCheck | None:
        """How the simulator's row for this broker says it gives silent clients up."""
        return BEHAVIOURS[self.kind].keepalive_close if self.kind in BEHAVIOURS else None

    @property
    def races_subscribes(self) -> bool:
        """Whether a client connecting while another subscribes may go unserved (its row's
        `subscribe_races_connect`; unknown brokers are taken at their word)."""
        return self.kind in BEHAVIOURS and BEHAVIOURS[self.kind].subscribe_races_connect

    @property
    def sweeps(self) -> bool:
        """Whether the broker gives silent clients up in a periodic sweep on whole seconds."""
        check = self._keepalive
        return check is not None and check.whole_seconds and check.sweep_s is not None

    def launch_in_phase(self, launch: Callable[[], None], on_second: bool) -> None:
        """Run `launch` (which starts the broker and waits until it listens), where the
        broker counts whole seconds just after one, and keep which (`start_second`)."""
        counts = on_second and self.sweeps
        if counts:
            time.sleep(1.0 - time.monotonic() % 1.0 + 0.005)
        began = time.monotonic()
        launch()
        # the broker's first sweep ran between the launch and now: which second, if one
        self.start_second = int(began) if counts and int(time.monotonic()) == int(began) \
            else None

    def in_phase(self, lead_s: float = 0.0) -> float | None:
        """When (monotonic), now or later, to start something that takes `lead_s` before a
        run's workload begins, for the workload to begin in phase with the broker's sweep
        as the simulated broker's is: `RUN_AFTER_BROKER_MS` after the second it started in,
        mod its sweep. None where that is unknown or does not matter."""
        check = self._keepalive
        if self.start_second is None or check is None or check.sweep_s is None:
            return None
        at = self.start_second + RUN_AFTER_BROKER_MS / 1000.0 - lead_s
        while at < time.monotonic():
            at += check.sweep_s
        return at

    def _hello(self, timeout_s: float, version: MqttVersion | None = None) -> None:
        """Speak MQTT to an external broker once, as every client of the run will (its TLS,
        its user, its MQTT version; None: 3.1.1, else 5): a certificate it cannot verify, a
        refused login or a version it does not speak is one clear error here, not a run
        whose nodes never come up."""
        import asyncio

        from bench.substrates.live.facts import Probe, RawClient
        from bench.substrates.live.facts5 import Client5

        async def hello(v: MqttVersion) -> int:
            if v is MqttVersion.V5:
                probe = Probe(self.host, self.port, None, self.username, self.password, self.tls)
                c5 = await Client5.connect(probe, f"hello-{os.getpid()}", timeout_s=timeout_s)
                await c5.disconnect()
                return 0
            c = await RawClient.connect(self.host, self.port, f"a2a-bench-hello-{os.getpid()}",
                                        username=self.username, password=self.password,
                                        tls=self.tls, timeout_s=timeout_s)
            code = c.return_code
            await c.disconnect()
            return code

        def speaks(v: MqttVersion) -> int | str:
            """The CONNACK's return code, or why none came."""
            try:
                return asyncio.run(hello(v))
            except (OSError, ConnectionError, TimeoutError, asyncio.IncompleteReadError) as exc:
                return f"{type(exc).__name__}: {exc}"
        tried = [version] if version is not None else [MqttVersion.V311, MqttVersion.V5]
        why = ""
        for v in tried:
            got = speaks(v)
            if isinstance(got, int):
                if got:
                    raise BrokerError(f"{self.url} refused the bench's connection: CONNACK "
                                      f"return code {got} ({CONNACK_CODES.get(got, 'unknown')})")
                return
            why = why or got
        if version is not None:
            other = MqttVersion.V5 if version is MqttVersion.V311 else MqttVersion.V311
            if isinstance(speaks(other), int):
                raise BrokerError(f"{self.url} does not speak MQTT {version.value} ({why}) but "
                                  f"answers MQTT {other.value}: run with --mqtt {other.value}")
        raise BrokerError(f"cannot speak MQTT to {self.url}: {why}")

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown (nothing is flushed on the way down)."""
        if self.kind == "external":
            if self.restart_command:
                subprocess.run(self.restart_command, shell=True, check=False)
            return
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:  # amqtt's shutdown has been seen to hang
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        if self.proc is not None:
            # a script's broker (ejabberd's Erlang VM) outlives the script: the next start
            # would find its node still running
            _end_group(self.proc.pid, 10.0)
        self.proc = None


def _user() -> str:
    import pwd
    return pwd.getpwuid(os.geteuid()).pw_name


def make_broker(spec: str, workdir: Path, persistence: bool = True,
                restart_command: str | None = None, ca_file: str | None = None,
                version: MqttVersion | None = None) -> Broker:
    """`amqtt` (default) and `mosquitto` start a local broker on a free 127.0.0.1 port;
    `mqtt://[user:password@]host[:port]` is an external broker (port 1883 by default),
    `mqtts://…` one reached over TLS (8883; verified by `ca_file`, else the system's CAs).
    Any other name of KINDS starts that broker here, configured by the bench."""
    if ca_file is not None and not spec.startswith("mqtts://"):
        raise BrokerError(f"--broker-ca={ca_file}: only an mqtts:// broker is verified by a CA "
                          f"file, and --broker={_shown(spec)}")
    kind = KINDS.get(spec)
    if kind is not None:
        login = kind.login
        return Broker(spec, "127.0.0.1", free_port(), workdir, persistence,
                      username=login[0] if login else None,
                      password=login[1] if login else None, version=version)
    url = urlparse(spec)
    try:
        port = url.port or (8883 if url.scheme == "mqtts" else 1883)
    except ValueError:
        port = 0
    if url.scheme not in ("mqtt", "tcp", "mqtts") or not url.hostname or not 0 < port < 65536:
        raise BrokerError(f"--broker={_shown(spec)} must be one of {', '.join(KINDS)}, "
                          "mqtt://[user:password@]host[:port] or mqtts://…")
    tls = None
    if url.scheme == "mqtts":
        tls = Tls(ca_file)
        try:
            tls.context()
        except (OSError, ssl.SSLError) as exc:
            raise BrokerError(f"--broker-ca={ca_file}: not a readable PEM CA file "
                              f"({exc})") from None
    return Broker("external", url.hostname, port, workdir, persistence,
                  restart_command=restart_command, username=url.username, password=url.password,
                  tls=tls)


def _shown(spec: str) -> str:
    from bench.substrates import shown_url
    return repr(shown_url(spec))
