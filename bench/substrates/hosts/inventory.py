"""The inventory a `--mode hosts` run takes (`--hosts FILE`): the hosts, how the bench logs
in to them by SSH, which Python each runs the bench's node processes with, where a run puts
its files there, which host runs the broker and which each node.

```toml
user = "root"                        # who the bench logs in as (iptables and tc need root
                                     # or sudo: `sudo = true`)
identity = "~/.ssh/a2a-bench"        # the key it logs in with (default: ssh's own choice)
known_hosts = "~/.ssh/known_hosts"   # where the hosts' keys are (default: ssh's own)
python = "python3"                   # on each host: has the bench's dependencies
files = "/tmp/a2a-bench"             # on each host: the run's files (code, data, broker)
broker = "h1"                        # the host the broker runs on

[hosts.h1]
address = "10.0.0.11"                # how the bench and the other hosts reach it
[hosts.h2]
address = "10.0.0.12"
python = "/opt/py311/bin/python3"    # optional: this host's own
docker = "ssh://root@10.0.0.12"      # optional: its Docker Engine (a DOCKER_HOST URL), where
                                     # `--mode docker --hosts FILE` puts containers
clock = "sudo /usr/local/bin/shift-clock {ns}"   # optional: the command that sets this host's
                                     # clock {ns} nanoseconds off (signed): clock_skew then
                                     # sets the host's clock, not the node's own

[place]                              # optional: node id -> host; the others go round
"exec-1" = "h2"                      # the hosts in order, the broker's left out
```

`python -m bench.tools.hosts up 3` writes one for hosts it makes on this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.scenario import read_toml

KEYS = {"user", "identity", "known_hosts", "python", "files", "broker", "hosts", "place",
        "sudo", "port"}


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    #: the Python this host runs the bench with, where it is not the inventory's
    python: str | None = None
    #: its Docker Engine (a DOCKER_HOST URL: unix://, tcp://, ssh://), for --mode docker
    docker: str | None = None
    #: the command that sets its clock `{ns}` nanoseconds off (None: not set by the bench)
    clock: str | None = None


@dataclass(frozen=True)
class Inventory:
    source: Path
    hosts: dict[str, Host]
    broker: str
    user: str = "root"
    identity: str | None = None
    known_hosts: str | None = None
    python: str = "python3"
    files: str = "/tmp/a2a-bench"
    sudo: bool = False
    #: the broker's port on its host
    port: int = 1883
    place: tuple[tuple[str, str], ...] = ()

    def python_of(self, host: Host) -> str:
        return host.python or self.python

    def host_of(self, node_ids: list[str],
                cut: dict[int, tuple[str, ...]] | None = None) -> dict[str, Host]:
        """Where each node runs: as `place` says; the others on the hosts in order, not on
        the broker's host unless it is the only one (a node beside its broker crosses no
        link a fault could cut). A link fault cuts a host's link, so the nodes link faults
        name (`cut`: each one's nodes by its index) go first, those the same faults name
        together on a host of their own while hosts last; the rest go round the hosts left
        (all of them, if none is)."""
        placed = dict(self.place)
        order = [h for h in self.hosts if h != self.broker] or [self.broker]
        out = {n: self.hosts[placed[n]] for n in node_ids if n in placed}
        signature = {n: frozenset(i for i, nodes in (cut or {}).items() if n in nodes)
                     for n in node_ids if n not in placed}
        groups = sorted({s for s in signature.values() if s}, key=sorted)
        faulted = {g: self.hosts[order[k % len(order)]] for k, g in enumerate(groups)}
        left = order[len(groups):] or order
        i = 0
        for node in node_ids:
            if node in placed:
                continue
            if signature[node]:
                out[node] = faulted[signature[node]]
            else:
                out[node] = self.hosts[left[i % len(left)]]
                i += 1
        return out


def sharing(placed: dict[str, Host], cut: dict[int, tuple[str, ...]]) -> list[str]:
    """What a fault on a host also reaches, one line each: a node on the host of a node a
    fault names, not named by it (the fault cuts the host's link, or sets its clock)."""
    lines = []
    for k, nodes in sorted(cut.items()):
        hosts = {placed[n].name for n in nodes if n in placed}
        also = sorted(n for n, h in placed.items() if h.name in hosts and n not in nodes)
        if also:
            lines.append(f"faults[{k}] acts on {', '.join(sorted(hosts))}, which "
                         f"{', '.join(also)} share(s) with {', '.join(nodes)}: on them too "
                         "(more hosts, or [place], keep them apart)")
    return lines


def _text(raw: dict[str, Any], key: str, where: str, default: str | None) -> str | None:
    v = raw.get(key, default)
    if v is not None and (not isinstance(v, str) or not v):
        raise SpecError(f"{where}{key}={v!r}: expected a non-empty string")
    return v


def load_inventory(path: Path) -> Inventory:
    """The inventory at `path`; SpecError naming the file, the key and what was expected."""
    raw = read_toml(path, "hosts file")
    where = f"{path}: "
    extra = sorted(set(raw) - KEYS)
    if extra:
        raise SpecError(f"{path}: unknown key(s) {extra} (expected some of {sorted(KEYS)})")
    table = raw.get("hosts")
    if not isinstance(table, dict) or not table:
        raise SpecError(f"{where}hosts: expected a table of hosts ([hosts.NAME] with "
                        "address = \"...\"), at least one")
    hosts = {}
    for name, h in table.items():
        if not isinstance(h, dict) or "address" not in h \
                or set(h) - {"address", "python", "docker", "clock"}:
            raise SpecError(f"{where}hosts.{name}: expected address = \"...\" (and "
                            "optionally python, docker, clock = \"...\")")
        address = h["address"]
        if not isinstance(address, str) or not address or address.startswith("-"):
            raise SpecError(f"{where}hosts.{name}.address={address!r}: expected a host name "
                            "or an IP address")
        docker = _text(h, "docker", f"{where}hosts.{name}.", None)
        if docker is not None and not docker.startswith(("unix://", "tcp://", "ssh://")):
            raise SpecError(f"{where}hosts.{name}.docker={docker!r}: expected the host's "
                            "Docker Engine as DOCKER_HOST names one (unix://…, tcp://…, "
                            "ssh://…)")
        clock = _text(h, "clock", f"{where}hosts.{name}.", None)
        if clock is not None and "{ns}" not in clock:
            raise SpecError(f"{where}hosts.{name}.clock={clock!r}: expected a command with "
                            "{ns} where the nanoseconds to set the clock off go")
        hosts[name] = Host(name, address, _text(h, "python", f"{where}hosts.{name}.", None),
                           docker, clock)
    broker = _text(raw, "broker", where, None)
    if broker is None or broker not in hosts:
        raise SpecError(f"{where}broker={broker!r}: expected one of the hosts "
                        f"{sorted(hosts)}")
    place = raw.get("place", {})
    if not isinstance(place, dict) or not all(isinstance(v, str) for v in place.values()):
        raise SpecError(f"{where}place: expected a table of node id = \"host\"")
    for node, host in place.items():
        if host not in hosts:
            raise SpecError(f"{where}place.{node}={host!r}: expected one of the hosts "
                            f"{sorted(hosts)}")
    sudo = raw.get("sudo", False)
    if not isinstance(sudo, bool):
        raise SpecError(f"{where}sudo={sudo!r}: expected true or false")
    port = raw.get("port", 1883)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise SpecError(f"{where}port={port!r}: expected a TCP port (1 to 65535)")
    files = _text(raw, "files", where, "/tmp/a2a-bench")
    assert files is not None
    if not files.startswith("/"):
        raise SpecError(f"{where}files={files!r}: expected an absolute path on the hosts")
    return Inventory(
        path, hosts, broker, user=_text(raw, "user", where, "root") or "root",
        identity=_expand(_text(raw, "identity", where, None)),
        known_hosts=_expand(_text(raw, "known_hosts", where, None)),
        python=_text(raw, "python", where, "python3") or "python3", files=files,
        sudo=sudo, port=port, place=tuple(sorted(place.items())))


def _expand(path: str | None) -> str | None:
    return None if path is None else str(Path(path).expanduser())

