"""The brokers the bench starts by name (`--broker NAME`): where each is installed from, how
the bench finds it, the configuration it writes for a run (its port, its persistence, the
listener of the MQTT version the run speaks, the login where the broker wants one), and
which MQTT versions it speaks. Anything else is reached by URL (`mqtt://host:port`).

The install commands here are the ones `docs/brokers/` gives, one per broker, and `pinned`
the version the findings of `docs/findings/` were measured on: a broker not installed is
refused in one line that says how to install it (exit 3).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.spec.topology import MqttVersion

V311, V5 = MqttVersion.V311, MqttVersion.V5


class BrokerSetupError(RuntimeError):
    """A broker cannot be started here as configured (said in one line)."""


@dataclass(frozen=True)
class Setup:
    """What one start of a broker is given: its folder (config, data and log go there), the
    address it listens on, whether it keeps its state across a restart, the MQTT version
    the run speaks (a broker that serves each version on a listener of its own gets that
    one's), and the user a broker started as root drops to (None: it stays as it is)."""

    workdir: Path
    host: str
    port: int
    persistence: bool
    version: MqttVersion | None
    user: str | None = None


@dataclass(frozen=True)
class Kind:
    """A broker the bench can install instructions for, find, configure and start."""

    name: str
    title: str                    # what it is, in a few words
    pinned: str                   # the version its findings were measured on
    install: str                  # the one command that installs it here
    speaks: tuple[MqttVersion, ...]
    find: Callable[[], str | None]            # its executable (or module), None: not installed
    #: how to start it, given what `find` found (its executable, or its module); writes
    #: its configuration
    argv: Callable[[str, Setup], list[str]]
    env: Callable[[Setup], dict[str, str]] = field(default=lambda s: {})
    #: the user and password every client of a run logs in with, where the broker has
    #: no anonymous access the bench can configure (None: each client's own id)
    login: tuple[str, str] | None = None
    start_timeout_s: float = 15.0
    #: MQTT 3.1.1 and 5 on listeners of their own: a start serves the run's version only
    per_version_listener: bool = False
    #: the system user it runs as when the bench runs as root (its package made that user
    #: and expects it: ejabberdctl otherwise switches to it through su, in a session of its
    #: own that the bench could not stop as one group)
    run_as: str | None = None
    #: how much later than 1.5 x keepalive it may give a silent client up, by the timer
    #: its documentation or source states, and where (None: none stated; judged at 1.5 x)
    keepalive_timer: tuple[float, str] | None = None
    #: its sessions and queued messages outlive a restart, as the bench configures it
    #: (`a2a-bench brokers`' persistence fact): a run judges a session lost over a broker
    #: restart against it
    keeps_sessions: bool = False
    #: what the bench writes to start it, in a sentence (docs/brokers/<name>.md)
    configures: str = ""
    #: what to know of the install command
    install_note: str = ""

    @property
    def installed(self) -> bool:
        return self.find() is not None

    def missing(self) -> str:
        """One line: it is not installed, and how to install it."""
        return (f"{self.name} ({self.title}) is not installed; install it with: {self.install}"
                f" (docs/brokers/{self.name}.md)")


# -- finding them -----------------------------------------------------------------------------
def _exe(*candidates: str) -> Callable[[], str | None]:
    """The first of `candidates` that is on the PATH or, given as a path, exists (Debian
    puts daemons in /usr/sbin, cargo in ~/.cargo/bin: often not on a user's PATH)."""
    def find() -> str | None:
        for c in candidates:
            path = shutil.which(c) if "/" not in c else (c if Path(c).exists() else None)
            if path is not None:
                return path
        return None
    return find


def _module(name: str) -> Callable[[], str | None]:
    """A Python module importable by the interpreter that runs the bench."""
    def find() -> str | None:
        try:
            return name if importlib.util.find_spec(name) is not None else None
        except ModuleNotFoundError:
            return None
    return find


CARGO_BIN = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "bin"


# -- their configurations ---------------------------------------------------------------------
def mosquitto_conf(workdir: Path, host: str, port: int, persistence: bool = True,
                   user: str | None = None) -> Path:
    """Write the Mosquitto configuration every broker the bench starts uses (here, in a
    container, in a Compose deployment) into `workdir`, its persistence beside it."""
    data = workdir / "mosquitto-data"
    data.mkdir(parents=True, exist_ok=True)
    conf = workdir / "mosquitto.conf"
    conf.write_text("\n".join([
        f"listener {port} {host}", "allow_anonymous true",
        *([f"user {user}"] if user else []),
        f"persistence {'true' if persistence else 'false'}",
        f"persistence_location {data}/", "autosave_interval 1",
        "max_queued_messages 100000", "max_inflight_messages 0",
        "set_tcp_nodelay true",  # else Nagle + delayed ACK: ~44 ms round trips
        "log_dest stderr", "log_type error", "log_type warning", ""]))
    return conf


def _mosquitto(exe: str, s: Setup) -> list[str]:
    return [exe, "-c", str(mosquitto_conf(s.workdir, s.host, s.port, s.persistence, s.user))]


def _amqtt(_found: str, s: Setup) -> list[str]:
    return [sys.executable, "-m", "bench.substrates.live.amqtt_server", str(s.port), s.host]


MOAT_SERVE = ("import anyio, sys; from moat.lib.mqtt.async_broker import AsyncMQTTBroker; "
              "anyio.run(AsyncMQTTBroker(bind_address=(sys.argv[2], int(sys.argv[1]))).serve)")


def _moat(_found: str, s: Setup) -> list[str]:
    return [sys.executable, "-c", MOAT_SERVE, str(s.port), s.host]


def rumqttd_toml(s: Setup) -> Path:
    """rumqttd's configuration (iotcore embeds rumqttd and reads the same): one listener,
    the run's version's (`v4` is MQTT 3.1.1), limits well above what a run sends, and no
    Prometheus endpoint (it would take a fixed port)."""
    section = "v5" if s.version is V5 else "v4"
    conf = s.workdir / "rumqttd.toml"
    conf.write_text("\n".join([
        "id = 0", "", "[router]", "id = 0", "max_connections = 10010",
        "max_outgoing_packet_count = 1000", "max_segment_size = 104857600",
        "max_segment_count = 10", "",
        f"[{section}.1]", f'name = "{section}-1"', f'listen = "{s.host}:{s.port}"',
        "next_connection_delay_ms = 1",
        f"    [{section}.1.connections]", "    connection_timeout_ms = 60000",
        "    max_payload_size = 4194304", "    max_inflight_count = 1000",
        "    dynamic_filters = true", ""]))
    return conf


def _rumqttd(exe: str, s: Setup) -> list[str]:
    return [exe, "-c", str(rumqttd_toml(s))]


def _iotcore(_found: str, s: Setup) -> list[str]:
    return [sys.executable, "-m", "iotcore", "--config", str(rumqttd_toml(s))]


def rmqtt_toml(s: Setup) -> Path:
    """rmqttd's configuration: one TCP listener (MQTT 3.1.1 and 5 on the same port),
    anonymous clients, its gRPC port (for a cluster the run has none of) on a free one, logs
    to the console (the bench's log file); its default plugins and the two that implement
    what MQTT has (retained messages, shared subscriptions), but for its HTTP API."""
    conf = s.workdir / "rmqtt.toml"
    conf.write_text("\n".join([
        "node.id = 1", f'rpc.server_addr = "{s.host}:{free_port(s.host)}"',
        'log.to = "Console"', 'log.level = "warn"',
        # MQTT's retained messages and MQTT 5's shared subscriptions are plugins of its own,
        # off by default; its HTTP API would take a fixed port (6060)
        f'plugins.dir = "{s.workdir / "plugins"}/"',
        'plugins.default_startups = ["rmqtt-retainer", "rmqtt-shared-subscription"]',
        'plugins.disabled_default_startups = ["rmqtt-http-api"]', "",
        "[listener.tcp.external]", "enable = true", f'addr = "{s.host}:{s.port}"',
        "allow_anonymous = true", "max_inflight = 1000", "max_mqueue_len = 100000",
        'max_packet_size = "4M"', ""]))
    return conf


def _rmqttd(exe: str, s: Setup) -> list[str]:
    return [exe, "-f", str(rmqtt_toml(s))]


RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


def _rabbitmq_env(s: Setup) -> dict[str, str]:
    """RabbitMQ's own node in `workdir`: its name, folders, the MQTT plugin on and its
    listener on the port; the AMQP listener it cannot do without and its Erlang
    distribution on ports of their own, which no client of a run uses."""
    if not s.persistence:
        shutil.rmtree(s.workdir / "mnesia", ignore_errors=True)
    amqp, dist = free_port(s.host), free_port(s.host)
    (s.workdir / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
    (s.workdir / "rabbitmq.conf").write_text("\n".join([
        f"listeners.tcp.default = {s.host}:{amqp}",
        f"mqtt.listeners.tcp.default = {s.host}:{s.port}",
        "mqtt.allow_anonymous = false", "loopback_users = none", ""]))
    return {"RABBITMQ_NODENAME": f"a2a-bench-{s.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": s.host, "RABBITMQ_NODE_PORT": str(amqp),
            "RABBITMQ_DIST_PORT": str(dist),
            "RABBITMQ_MNESIA_BASE": str(s.workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(s.workdir / "log"),
            "RABBITMQ_CONFIG_FILE": str(s.workdir / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(s.workdir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(s.workdir / "rabbitmq.pid"),
            "HOME": str(s.workdir)}


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on `host` now (the kernel's choice)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _rabbitmq(exe: str, s: Setup) -> list[str]:
    return [exe]


def ejabberd_yml(s: Setup) -> Path:
    """ejabberd's configuration: one host, mod_mqtt on the port, anonymous login (it wants
    a user name all the same: every client gives the kind's `login`), and anyone may
    publish and subscribe anything."""
    conf = s.workdir / "ejabberd.yml"
    conf.write_text("\n".join([
        "hosts:", "  - localhost", "loglevel: warning",
        "auth_method: [anonymous]", "anonymous_protocol: login_anon",
        "allow_multiple_connections: true",
        "listen:", f"  - port: {s.port}", f'    ip: "{s.host}"', "    module: mod_mqtt",
        "    backlog: 1000",
        "modules:", "  mod_mqtt:", "    max_queue: 100000",
        "    access_publish:", '      "#":', "        - allow: all",
        "    access_subscribe:", '      "#":', "        - allow: all", ""]))
    return conf


def _ejabberd(exe: str, s: Setup) -> list[str]:
    """`ejabberdctl foreground`, on the bench's configuration, folders and node name."""
    conf = ejabberd_yml(s)
    node = f"a2a-bench-{s.port}@localhost"
    for sub in ("logs", "spool"):
        (s.workdir / sub).mkdir(parents=True, exist_ok=True)
    # its spool (Mnesia) belongs to the node name, and the name to the port: a first start
    # moved to another port (the first was taken) finds the refused one's spool, which
    # ejabberd will not open ("node_name_mismatch")
    made_for = s.workdir / "spool.node"
    if not s.persistence or (made_for.exists() and made_for.read_text() != node):
        for f in (s.workdir / "spool").iterdir():
            shutil.rmtree(f) if f.is_dir() else f.unlink()
    made_for.write_text(node)
    if os.geteuid() == 0:       # it runs as `ejabberd` (run_as), which must own its folder
        closed = next((p for p in s.workdir.resolve().parents
                       if not os.stat(p).st_mode & 0o001), None)
        if closed is not None:
            raise BrokerSetupError(
                f"ejabberd runs as user ejabberd, which cannot reach {s.workdir}: {closed} "
                f"lets no other user through (chmod o+x {closed}, or put the run's folder "
                "where it can, under /tmp)")
        shutil.chown(s.workdir, "ejabberd")
        for p in s.workdir.rglob("*"):
            shutil.chown(p, "ejabberd")
    return [exe, "--config-dir", str(s.workdir), "--config", str(conf),
            "--logs", str(s.workdir / "logs"), "--spool", str(s.workdir / "spool"),
            "--node", node, "foreground"]


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("amqtt", "amqtt, the embedded default (Python)", "0.12.1",
         "pip install -e .", (V311,), _module("amqtt"), _amqtt,
         install_note="a dependency of the bench: installed with it",
         configures="`python -m bench.substrates.live.amqtt_server PORT HOST`: one TCP "
                    "listener, only the authentication plugin, anonymous access off (each "
                    "client logs in under its client id, so amqtt keeps its session)"),
    Kind("mosquitto", "Eclipse Mosquitto", "2.0.11 (Debian 12)", "apt-get install mosquitto",
         (V311, V5), _exe("mosquitto", "/usr/sbin/mosquitto"), _mosquitto, keeps_sessions=True,
         keepalive_timer=(7.0, "Mosquitto 2.0's src/keepalive.c checks clients in a sweep run "
                               "once more than 5 whole seconds passed since the last one, each "
                               "against keepalive x 3/2 in whole seconds: up to 6 s + 1 s "
                               "late"),
         configures="`mosquitto -c mosquitto.conf`: one listener, anonymous access, "
                    "persistence in the run's folder saved every second (off for a "
                    "broker_restart without it), no limit on queued or in-flight messages, "
                    "TCP_NODELAY; started as root it stays root (dropping to `mosquitto` it "
                    "could not write its persistence file)"),
    Kind("moat-lib-mqtt", "moat-lib-mqtt's broker (Python, MQTT 5 only)", "0.8.7",
         "pip install moat-lib-mqtt==0.8.7", (V5,), _module("moat.lib.mqtt"), _moat,
         configures="`AsyncMQTTBroker(bind_address=(HOST, PORT)).serve` under anyio, as its "
                    "README starts it; it has no configuration to write"),
    Kind("iotcore", "iotcore: rumqttd inside a Python wheel", "0.4.0",
         "pip install iotcore==0.4.0", (V311, V5), _module("iotcore"), _iotcore,
         per_version_listener=True,
         configures="`python -m iotcore --config rumqttd.toml` (its documented entry point): "
                    "rumqttd's configuration, one listener for the run's MQTT version (`v4` "
                    "for 3.1.1, `v5`), 4 MiB payloads, 1,000 in flight"),
    Kind("rumqttd", "rumqttd (Rust)", "0.20.0",
         "cargo install rumqttd --version 0.20.0", (V311, V5),
         _exe("rumqttd", str(CARGO_BIN / "rumqttd")), _rumqttd, per_version_listener=True,
         install_note="not `--locked`: its lock file pins a `metrics` crate that today's "
                      "rustc refuses to compile; cargo puts it in ~/.cargo/bin, where the "
                      "bench looks",
         configures="`rumqttd -c rumqttd.toml`: one listener for the run's MQTT version (`v4` "
                    "for 3.1.1, `v5`: rumqttd serves each on a port of its own), 4 MiB "
                    "payloads, 1,000 in flight, no Prometheus endpoint"),
    Kind("rmqttd", "RMQTT (Rust)", "0.24.0", "cargo install rmqttd --version 0.24.0",
         (V311, V5), _exe("rmqttd", str(CARGO_BIN / "rmqttd")), _rmqttd,
         install_note="it needs Debian's protobuf-compiler and cmake to build (its Kafka "
                      "bridge compiles librdkafka): apt-get install protobuf-compiler cmake; "
                      "about 40 minutes on one core",
         configures="`rmqttd -f rmqtt.toml`: one TCP listener for MQTT 3.1.1 and 5, "
                    "anonymous clients, 1,000 in flight, its gRPC port on a free one, logs to "
                    "the console, its default plugins and its retainer and shared-"
                    "subscription plugins, but not its HTTP API (a fixed port)"),
    Kind("rabbitmq", "RabbitMQ's MQTT plugin", "3.10.8 (Debian 12)",
         "apt-get install rabbitmq-server", (V311,), _exe(RABBITMQ_SERVER), _rabbitmq,
         keeps_sessions=True,
         install_note="Debian starts its own service on install; the bench's node runs "
                      "beside it on ports of its own",
         env=_rabbitmq_env, login=("guest", "guest"), start_timeout_s=60.0,
         configures="`rabbitmq-server` as a node of its own (name, folders and Erlang "
                    "distribution port in the run's folder), the `rabbitmq_mqtt` plugin "
                    "enabled, its MQTT listener on the port, its AMQP listener on another; "
                    "clients log in as guest (`loopback_users = none`)"),
    Kind("ejabberd", "ejabberd's mod_mqtt", "23.01 (Debian 12)", "apt-get install ejabberd",
         (V311, V5), _exe("ejabberdctl", "/usr/sbin/ejabberdctl"), _ejabberd,
         install_note="Debian starts its own service on install; the bench's node runs "
                      "beside it under another node name and port",
         env=lambda s: {"HOME": str(s.workdir)},   # its Erlang cookie goes there
         login=("a2a-bench", "a2a-bench"),   # anonymous, but it wants a user name
         start_timeout_s=60.0, run_as="ejabberd",
         configures="`ejabberdctl foreground` on a configuration, logs and spool of the "
                    "run's folder, run as the `ejabberd` user Debian made: one host, "
                    "`mod_mqtt` on the port, anonymous login (every client gives the user "
                    "name a2a-bench), "
                    "publish and subscribe allowed on every topic"),
)}
