"""`python -m bench.tools.hosts`: hosts for `--mode hosts`, network namespaces reached by SSH.

Each is reached as a real host is: what multi-host runs are proven on here (docs/hosts.md
says what real hosts need instead).

`up N` makes N hosts: a network namespace each (`a2a-<id>-h<i>`), joined by a bridge
(`a2ab-<id>`) on a /24 of 10.77.0.0/16 — the controller (this machine) at .1, host i at
.(10+i) —, each running sshd (Debian's openssh-server) on its own address only, with a
host key made here and a login key made here (root, that key only). It writes the
inventory a run takes (`--hosts FILE`) and prints its path; beside it, `ssh_config` names
the hosts for OpenSSH (`ssh -F ssh_config h1`, a matrix's `--tx ssh=h1//ssh_config=…`).
The hosts share this machine's files and clock; their network is their own: iptables and
tc act on one host alone.
Addresses are only ever inside the namespaces made here and on the bridge.

`up N --docker` also starts a Docker Engine in each host's namespace (its own data and
sockets), loads the bench's image into each and joins them into one swarm, host 1 its
manager: several engines on one machine, each reached as another host's would be.

`up N --clocks` gives each host a clock of its own for the bench's Python there (libfaketime
reading an offset file the inventory's `clock` command moves): the hosts share this
machine's kernel clock, which no namespace separates.

`down ID` removes a harness: its engines and their containers, every process left in its
namespaces, sshd, the namespaces, the bridge, the forwarding rule, its files; `down --all`
every harness this machine has.
`status` lists them.

Needs root, iproute2, iptables and sshd (Debian: apt-get install openssh-server).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.tools import Parser

#: where each harness keeps its keys, sshd configurations and inventory (root only: tmpfs)
STATE = Path("/run/a2a-bench-hosts")
#: where runs put their files on the harness's hosts (its own folder per harness)
FILES = Path("/tmp/a2a-bench-hosts")
#: the address range: harness K is 10.77.K.0/24
RANGE = "10.77.0.0/16"
SSHD = "/usr/sbin/sshd"
#: where each host's Docker Engine keeps its images and containers (a real file system:
#: the storage driver mounts there)
ENGINES = Path("/var/lib/a2a-bench-hosts")
#: how long an engine may take to answer once started
ENGINE_UP_S = 60.0
#: how long sshd may take to listen once started
SSHD_UP_S = 10.0


class HarnessError(RuntimeError):
    """The harness could not be made or removed: one line, naming what to do."""


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise HarnessError(f"{' '.join(argv)}: exit {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-300:]}")
    return done


@dataclass(frozen=True)
class Harness:
    """One harness's names, from its id and its /24."""

    id: str
    subnet: int          # K of 10.77.K.0/24
    count: int
    #: a Docker Engine on each host, joined into one swarm (`up N --docker`)
    docker: bool = False
    #: each host's clock its own, set by the bench (`up N --clocks`)
    clocks: bool = False

    @property
    def state(self) -> Path:
        return STATE / self.id

    @property
    def bridge(self) -> str:
        return f"a2ab-{self.id}"

    @property
    def controller(self) -> str:
        return f"10.77.{self.subnet}.1"

    @property
    def comment(self) -> str:
        return f"a2a-bench-hosts-{self.id}"

    def name(self, i: int) -> str:
        return f"h{i}"

    def netns(self, i: int) -> str:
        return f"a2a-{self.id}-h{i}"

    def address(self, i: int) -> str:
        return f"10.77.{self.subnet}.{10 + i}"

    def veth(self, i: int) -> str:
        return f"a2a{self.id}h{i}"

    @property
    def inventory(self) -> Path:
        return self.state / "hosts.toml"

    def engine(self, i: int) -> str:
        """Host i's Docker Engine socket (DOCKER_HOST=unix://…)."""
        return str(self.state / self.name(i) / "docker.sock")

    def engine_data(self, i: int) -> Path:
        return ENGINES / self.id / self.name(i)

    def to_json(self) -> dict[str, object]:
        return {"id": self.id, "subnet": self.subnet, "count": self.count, "docker": self.docker,
                "clocks": self.clocks}


def harnesses() -> list[Harness]:
    """Every harness this machine has (its state folder holds harness.json)."""
    out = []
    for f in sorted(STATE.glob("*/harness.json")):
        with contextlib.suppress(ValueError, KeyError, OSError):
            d = json.loads(f.read_text())
            out.append(Harness(str(d["id"]), int(d["subnet"]), int(d["count"]),
                               bool(d.get("docker", False)), bool(d.get("clocks", False))))
    return out


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One harness made or removed at a time on this machine (two test workers choosing
    a /24 side by side would choose the same)."""
    STATE.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(STATE / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _prerequisites() -> None:
    if os.geteuid() != 0:
        raise HarnessError("network namespaces need root (run it as root, or with sudo)")
    for tool in ("ip", "iptables", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            raise HarnessError(f"{tool} is not installed (Debian: apt-get install iproute2 "
                               "iptables openssh-client)")
    if not Path(SSHD).exists():
        raise HarnessError("sshd is not installed (Debian: apt-get install openssh-server)")


def _free_subnet() -> int:
    """The first 10.77.K.0/24 no harness and no interface of this machine uses."""
    taken = {h.subnet for h in harnesses()}
    addrs = _run("ip", "-o", "-4", "addr", "show").stdout
    taken |= {int(a.split(".")[2]) for a in addrs.split() if a.startswith("10.77.")}
    for k in range(1, 255):
        if k not in taken:
            return k
    raise HarnessError(f"no free /24 left in {RANGE}: remove harnesses "
                       "(python -m bench.tools.hosts down --all)")


def _sshd_config(h: Harness, i: int) -> Path:
    folder = h.state / h.name(i)
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "sshd_config"
    conf.write_text("\n".join([
        f"ListenAddress {h.address(i)}:22",
        f"HostKey {folder / 'ssh_host_ed25519_key'}",
        f"PidFile {folder / 'sshd.pid'}",
        f"AuthorizedKeysFile {h.state / 'authorized_keys'}",
        "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
        "MaxSessions 200", "MaxStartups 100:30:200", "LogLevel ERROR", ""]))
    return conf


def _listening(address: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((address, port), 0.5):
            return True
        time.sleep(0.05)
    return False


def up(count: int, image: str | None = None, clocks: bool = False) -> Harness:
    """Make `count` hosts; returns the harness (its inventory at `.inventory`). With an
    `image`: a Docker Engine on each, `image` loaded into each from this machine's engine,
    and the engines joined into one swarm, host 1 its manager. With `clocks`: each host's
    clock its own (`_own_clock`)."""
    _prerequisites()
    if image is not None and shutil.which("dockerd") is None:
        raise HarnessError("dockerd is not installed (Debian: apt-get install docker.io)")
    if clocks and image is not None:
        raise HarnessError("--clocks and --docker: a host's own clock is its Python's "
                           "(libfaketime), which its containers do not run")
    if clocks and _libfaketime() is None:
        raise HarnessError("libfaketime is not installed (Debian: apt-get install faketime)")
    with _locked():
        h = Harness(secrets.token_hex(2), _free_subnet(), count, docker=image is not None,
                    clocks=clocks)
        h.state.mkdir(parents=True, mode=0o700)
        (h.state / "harness.json").write_text(json.dumps(h.to_json()))
    try:
        _make(h)
        if image is not None:
            _engines(h, image)
    except BaseException:
        down(h)
        raise
    return h


def _docker(h: Harness, i: int, *argv: str, input: bytes | None = None,
            check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["docker", "-H", f"unix://{h.engine(i)}", *argv], input=input,
                          capture_output=True, check=False, timeout=300)
    if check and done.returncode != 0:
        raise HarnessError(f"docker on {h.name(i)}: {' '.join(argv)}: "
                           f"{done.stderr.decode(errors='replace').strip()[-300:]}")
    return done


def _engines(h: Harness, image: str) -> None:
    """An engine per host, in the host's network namespace only (its files, cgroups and
    clock this machine's: nsenter, not `ip netns exec`, which mounts a /sys without the
    cgroups), `image` loaded into each, one swarm."""
    from concurrent.futures import ThreadPoolExecutor
    driver = _run("docker", "info", "--format", "{{.Driver}}", check=False).stdout.strip() \
        or "overlay2"
    for i in range(1, h.count + 1):
        folder = h.state / h.name(i)
        (folder / "daemon.json").write_text("{}\n")    # not this machine's /etc/docker one
        h.engine_data(i).mkdir(parents=True, exist_ok=True)
        with open(folder / "dockerd.log", "ab") as log:
            subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{h.netns(i)}", "dockerd",
                 "--config-file", str(folder / "daemon.json"),
                 "--data-root", str(h.engine_data(i)), "--exec-root", str(folder / "x"),
                 "--pidfile", str(folder / "dockerd.pid"), "-H", f"unix://{h.engine(i)}",
                 "--storage-driver", driver, "--cgroup-parent", f"/a2a-{h.id}-{h.name(i)}"],
                stdout=log, stderr=log, start_new_session=True)
    for i in range(1, h.count + 1):
        deadline = time.monotonic() + ENGINE_UP_S
        while _docker(h, i, "info", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise HarnessError(f"the engine on {h.name(i)} did not answer within "
                                   f"{ENGINE_UP_S:g} s: {h.state / h.name(i) / 'dockerd.log'}")
            time.sleep(0.2)

    def load(i: int) -> None:
        saved = subprocess.run(["docker", "save", image], capture_output=True, check=False)
        if saved.returncode != 0:
            raise HarnessError(f"docker save {image}: {saved.stderr.decode().strip()[-300:]}")
        _docker(h, i, "load", input=saved.stdout)
    with ThreadPoolExecutor(max_workers=h.count) as pool:
        list(pool.map(load, range(1, h.count + 1)))
    _docker(h, 1, "swarm", "init", "--advertise-addr", h.address(1),
            "--listen-addr", f"{h.address(1)}:2377")
    token = _docker(h, 1, "swarm", "join-token", "-q", "worker").stdout.decode().strip()
    for i in range(2, h.count + 1):
        _docker(h, i, "swarm", "join", "--token", token, f"{h.address(1)}:2377")


def _engines_down(h: Harness, say: Callable[[str], None] = lambda line: None) -> None:
    """Each engine stopped (its containers with it), what it mounted unmounted, its files
    removed — the engines side by side (a swarm's member leaving takes seconds)."""
    from concurrent.futures import ThreadPoolExecutor

    def stop(i: int) -> None:
        started = time.monotonic()
        pidfile = h.state / h.name(i) / "dockerd.pid"
        if Path(h.engine(i)).exists():
            _docker(h, i, "swarm", "leave", "--force", check=False)
            ids = _docker(h, i, "ps", "-aq", check=False).stdout.decode().split()
            if ids:
                _docker(h, i, "rm", "-f", *ids, check=False)
        with contextlib.suppress(OSError, ValueError):
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for root in (h.engine_data(i), h.state / h.name(i) / "x"):
            mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
                      if line.split()[1].startswith(str(root))]
            for m in sorted(mounts, key=len, reverse=True):
                _run("umount", "-l", m, check=False)
        say(f"{h.name(i)}'s engine stopped ({time.monotonic() - started:.1f} s)")
    with ThreadPoolExecutor(max_workers=h.count) as pool:
        list(pool.map(stop, range(1, h.count + 1)))
    shutil.rmtree(ENGINES / h.id, ignore_errors=True)
    with contextlib.suppress(OSError):          # the last harness's engines gone: theirs too
        ENGINES.rmdir()


def _make(h: Harness) -> None:
    _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.comment,
         "-f", str(h.state / "id_ed25519"))
    shutil.copy(h.state / "id_ed25519.pub", h.state / "authorized_keys")
    _run("ip", "link", "add", h.bridge, "type", "bridge")
    _run("ip", "addr", "add", f"{h.controller}/24", "dev", h.bridge)
    _run("ip", "link", "set", h.bridge, "up")
    # where br_netfilter is loaded (Docker loads it), bridged frames go through this
    # machine's FORWARD chain, whose policy Docker sets to DROP: host to host let through
    _run("iptables", "-w", "-I", "FORWARD", "1", "-i", h.bridge, "-o", h.bridge,
         "-m", "comment", "--comment", h.comment, "-j", "ACCEPT")
    Path("/run/sshd").mkdir(exist_ok=True)     # sshd's privilege separation folder
    known = []
    for i in range(1, h.count + 1):
        ns = h.netns(i)
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", h.veth(i), "type", "veth", "peer", "name", "eth0",
             "netns", ns)
        _run("ip", "link", "set", h.veth(i), "master", h.bridge, "up")
        _run("ip", "-n", ns, "addr", "add", f"{h.address(i)}/24", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        conf = _sshd_config(h, i)
        key = h.state / h.name(i) / "ssh_host_ed25519_key"
        _run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h.name(i), "-f", str(key))
        known.append(f"{h.address(i)} {Path(f'{key}.pub').read_text().split(' ')[0]} "
                     f"{Path(f'{key}.pub').read_text().split(' ')[1]}")
        _run("ip", "netns", "exec", ns, SSHD, "-f", str(conf))
    (h.state / "known_hosts").write_text("\n".join(known) + "\n")
    for i in range(1, h.count + 1):
        if not _listening(h.address(i), 22, SSHD_UP_S):
            raise HarnessError(f"sshd on {h.name(i)} ({h.address(i)}) not listening after "
                               f"{SSHD_UP_S:g} s")
    if h.clocks:
        for i in range(1, h.count + 1):
            _own_clock(h, i)
    h.inventory.write_text(inventory_toml(h))
    (h.state / "ssh_config").write_text(ssh_config(h))


def _libfaketime() -> Path | None:
    return next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))), None)


def _own_clock(h: Harness, i: int) -> None:
    """Host i's clock its own, as far as the bench's processes there see: the hosts share
    this machine's kernel, whose clock no namespace separates, so its Python (`python`)
    runs under libfaketime reading an offset from a file (`clock`, re-read at every reading;
    the monotonic clock left alone, as `date -s` leaves it) that `set-clock NS` moves by NS
    nanoseconds — the inventory's `clock` command for the host, `date -s`'s stand-in."""
    folder = h.state / h.name(i)
    offset = folder / "clock"
    offset.write_text("+0\n")
    python = folder / "python"
    python.write_text(f"#!/bin/sh\n# {h.name(i)}'s Python, its clock {h.name(i)}'s own\n"
                      f"export LD_PRELOAD={_libfaketime()} FAKETIME_TIMESTAMP_FILE={offset} "
                      "FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1\n"
                      f'exec {sys.executable} "$@"\n')
    setter = folder / "set-clock"
    script = (f"import os, sys; p = {str(offset)!r}; o = float(open(p).read()) + "
              "int(sys.argv[1]) / 1e9; open(p + '.new', 'w').write(f'{o:+.9f}\\n'); "
              "os.replace(p + '.new', p)")
    setter.write_text(f"#!/bin/sh\n# sets {h.name(i)}'s clock $1 nanoseconds off\n"
                      f'exec {sys.executable} -c "{script}" "$1"\n')
    for f in (python, setter):
        f.chmod(0o755)


def ssh_config(h: Harness) -> str:
    """OpenSSH's client configuration for the hosts by name (`ssh -F FILE h1`): what a
    matrix's execnet gateways log in with (`--tx ssh=h1//ssh_config=FILE//...`)."""
    return "".join(f"Host {h.name(i)}\n  HostName {h.address(i)}\n  User root\n"
                   f"  IdentityFile {h.state / 'id_ed25519'}\n  IdentitiesOnly yes\n"
                   f"  UserKnownHostsFile {h.state / 'known_hosts'}\n"
                   "  StrictHostKeyChecking yes\n  BatchMode yes\n"
                   for i in range(1, h.count + 1))


def inventory_toml(h: Harness) -> str:
    hosts = "".join(f'\n[hosts.{h.name(i)}]\naddress = "{h.address(i)}"\n'
                    + (f'docker = "unix://{h.engine(i)}"\n' if h.docker else "")
                    + (f'python = "{h.state / h.name(i) / "python"}"\n'
                       f'clock = "{h.state / h.name(i) / "set-clock"} {{ns}}"\n'
                       if h.clocks else "")
                    for i in range(1, h.count + 1))
    made = f"up {h.count}" + (" --docker" if h.docker else "") + (" --clocks" if h.clocks else "")
    return (f"# hosts in network namespaces of this machine (harness {h.id}), made by\n"
            f"# `python -m bench.tools.hosts {made}`; removed by "
            f"`python -m bench.tools.hosts down {h.id}`\n"
            f'user = "root"\n'
            f'identity = "{h.state / "id_ed25519"}"\n'
            f'known_hosts = "{h.state / "known_hosts"}"\n'
            f"# the Python on each host that has the bench's dependencies (these hosts share\n"
            f"# this machine's files: the bench's own)\n"
            f'python = "{sys.executable}"\n'
            f'# where a run puts its files on each host\n'
            f'files = "{FILES / h.id}"\n'
            f'broker = "{h.name(1)}"\n' + hosts)


def _kill_namespace(ns: str) -> None:
    """Every process left in `ns` (its sshd, a node a killed run left), SIGKILLed."""
    pids = _run("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def down(h: Harness, say: Callable[[str], None] = lambda line: None) -> None:
    """Remove everything `h` made; what is already gone is no error (`say`: each engine
    as it stops)."""
    with _locked():
        if h.docker:
            _engines_down(h, say)
        for i in range(1, h.count + 1):
            _kill_namespace(h.netns(i))
            _run("ip", "netns", "del", h.netns(i), check=False)
        _run("ip", "link", "del", h.bridge, check=False)
        while _run("iptables", "-w", "-D", "FORWARD", "-i", h.bridge, "-o", h.bridge, "-m",
                   "comment", "--comment", h.comment, "-j", "ACCEPT",
                   check=False).returncode == 0:
            pass
        shutil.rmtree(FILES / h.id, ignore_errors=True)
        shutil.rmtree(h.state, ignore_errors=True)
        with contextlib.suppress(OSError):      # the last harness gone: their folders too
            FILES.rmdir()


def left(h: Harness) -> list[str]:
    """What of `h` is still on this machine (nothing, once it is down)."""
    out = []
    namespaces = _run("ip", "netns", "list", check=False).stdout
    out += [h.netns(i) for i in range(1, h.count + 1) if h.netns(i) in namespaces.split()]
    if _run("ip", "link", "show", h.bridge, check=False).returncode == 0:
        out.append(h.bridge)
    if h.comment in _run("iptables", "-w", "-S", "FORWARD", check=False).stdout:
        out.append(f"FORWARD rule {h.comment}")
    out += [str(p) for p in (h.state, FILES / h.id, ENGINES / h.id) if p.exists()]
    mounts = Path("/proc/mounts").read_text()
    out += [f"mount {m}" for m in (str(ENGINES / h.id), str(h.state)) if f" {m}" in mounts]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="python -m bench.tools.hosts", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter,
                    epilog="example: python -m bench.tools.hosts up 3   (prints the "
                           "inventory: a2a-bench run partition --mode hosts --hosts FILE)")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("up", help="make N hosts and print their inventory file")
    make.add_argument("count", type=int, help="how many hosts (1 to 200)")
    make.add_argument("--clocks", action="store_true",
                      help="each host's clock its own, which clock_skew sets (the bench's "
                           "Python there under libfaketime: the hosts share this machine's "
                           "kernel clock)")
    make.add_argument("--docker", action="store_true",
                      help="a Docker Engine on each host (DOCKER_HOST: the `status` line), "
                           "the bench's image loaded into each, all joined into one swarm")
    remove = sub.add_parser("down", help="remove a harness (or every one: --all)")
    remove.add_argument("id", nargs="?", help="the harness's id (`status` lists them)")
    remove.add_argument("--all", action="store_true", help="every harness on this machine")
    sub.add_parser("status", help="the harnesses this machine has")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if not 1 <= args.count <= 200:
                parser.error(f"count={args.count}: expected 1 to 200 hosts")
            image = None
            if args.docker:
                import docker

                from bench.substrates.docker.image import ensure
                image = ensure(docker.from_env(), lambda line: print(line, file=sys.stderr))
            h = up(args.count, image, clocks=args.clocks)
            print(h.inventory)
        elif args.command == "down":
            known = {h.id: h for h in harnesses()}
            if args.all == (args.id is not None):
                parser.error("down: give a harness id, or --all")
            if args.id is not None and args.id not in known:
                parser.error(f"down {args.id}: no such harness (there are: "
                             f"{', '.join(known) or 'none'})")
            for h in known.values() if args.all else [known[args.id]]:
                if h.docker:
                    print(f"stopping {h.count} engines (some seconds each, side by side) …",
                          file=sys.stderr)
                down(h, lambda line: print(f"  {line}", file=sys.stderr))
                print(f"removed harness {h.id} ({h.count} hosts)")
        else:
            for h in harnesses():
                print(f"{h.id}  {h.count} hosts on 10.77.{h.subnet}.0/24  {h.inventory}"
                      + (f"  engines: DOCKER_HOST=unix://{h.engine(1)} (the swarm's "
                         f"manager) …" if h.docker else ""))
    except HarnessError as exc:
        print(f"a2a-bench hosts: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
