"""The bench's hands on a host: OpenSSH's client, one master connection per host that every
command and every process of the run shares (a command then costs a round trip, not a
login), the code uploaded once per content, and the host's clock measured against ours.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import shlex
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.substrates.hosts.inventory import Host, Inventory

#: how long one command on a host may take (iptables, kill, tc, a file written)
COMMAND_S = 20.0
#: the package the hosts run, uploaded to each (its parent folder goes on PYTHONPATH)
PACKAGE = Path(__file__).resolve().parents[3]


class HostError(RuntimeError):
    """A host could not be reached, or refused what the bench asked of it."""


@dataclass(frozen=True)
class Clock:
    """A host's clock against the controller's: `offset_ms` added to ours reads theirs,
    within ± `bound_ms` (half the best round trip of `samples`)."""

    offset_ms: float
    bound_ms: float
    samples: int


class Ssh:
    def __init__(self, inventory: Inventory, host: Host, control_dir: Path) -> None:
        self.inventory, self.host = inventory, host
        self.control = control_dir / f"{host.name}.sock"

    def argv(self, command: str) -> list[str]:
        """ssh running `command` (one shell line) on the host, by the master connection
        (which ends a minute after its last session: a bench killed outright leaves none)."""
        inv = self.inventory
        opts = ["-o", "BatchMode=yes", "-o", "ControlMaster=auto",
                "-o", f"ControlPath={self.control}", "-o", "ControlPersist=60",
                "-o", "ServerAliveInterval=10", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR"]
        if inv.identity:
            opts += ["-i", inv.identity, "-o", "IdentitiesOnly=yes"]
        if inv.known_hosts:
            opts += ["-o", f"UserKnownHostsFile={inv.known_hosts}",
                     "-o", "StrictHostKeyChecking=yes"]
        return ["ssh", *opts, "-l", inv.user, self.host.address, command]

    def root(self, command: str) -> str:
        """`command` as root (by `sudo -n` where the inventory logs in as someone else)."""
        return f"sudo -n {command}" if self.inventory.sudo else command

    def run(self, command: str, *, input: bytes | None = None, check: bool = True,
            timeout_s: float = COMMAND_S) -> subprocess.CompletedProcess[bytes]:
        try:
            # a session of its own: a Ctrl-C at the terminal reaches the bench, which ends
            # the run in order, never a command half done on the host (a clock set off)
            done = subprocess.run(self.argv(command), input=input, capture_output=True,
                                  timeout=timeout_s, check=False, start_new_session=True)
        except subprocess.TimeoutExpired:
            raise HostError(f"{self.host.name} ({self.host.address}): `{command}` took more "
                            f"than {timeout_s:g} s") from None
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).decode(errors="replace").strip()[-300:]
            raise HostError(f"{self.host.name} ({self.host.address}): `{command}` exited "
                            f"{done.returncode}: {said}")
        return done

    async def arun(self, command: str, *, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """`run` off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.run(command, check=check))

    async def spawn(self, command: str) -> asyncio.subprocess.Process:
        """A process on the host, its stdin, stdout and stderr piped here; a session of its
        own here, so that a Ctrl-C at the terminal reaches the bench and not its ssh."""
        return await asyncio.create_subprocess_exec(
            *self.argv(command), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True)

    def put(self, path: str, data: bytes) -> None:
        """`data` written to `path` on the host (its folder made)."""
        folder = shlex.quote(str(Path(path).parent))
        self.run(f"mkdir -p {folder} && cat > {shlex.quote(path)}", input=data)

    def upload_code(self) -> str:
        """The bench's package on the host, under `files/code-<hash>` (uploaded once per
        content: a run after it finds it there); returns the folder to put on PYTHONPATH."""
        blob, digest = _package_tar()
        where = f"{self.inventory.files}/code-{digest}"
        q = shlex.quote(where)
        # unpacked beside it and moved into place whole: two runs uploading at once never
        # see half a package, and the second's copy goes if the first's is there
        self.run(f"test -f {q}/.complete || {{ p={q}.part.$$; mkdir -p $p && "
                 f"tar -xzf - -C $p && touch $p/.complete && "
                 f"{{ mv -T $p {q} 2>/dev/null || rm -rf $p; }}; }}", input=blob,
                 timeout_s=60.0)
        return where

    def clock(self, python: str, samples: int = 15) -> Clock:
        """The host's clock against ours, NTP's way: the reply with the shortest round trip
        of `samples`, the host's time taken as read at its midpoint."""
        script = ("import sys, time\n"
                  "for _ in sys.stdin: sys.stdout.write(repr(time.time()) + '\\n'); "
                  "sys.stdout.flush()\n")
        proc = subprocess.Popen(self.argv(f"{shlex.quote(python)} -c {shlex.quote(script)}"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        best: tuple[float, float] | None = None      # (round trip, offset), seconds
        try:
            for _ in range(samples):
                t0 = time.time()
                proc.stdin.write(b"\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
                t1 = time.time()
                if not line:
                    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                    raise HostError(f"{self.host.name} ({self.host.address}): could not read "
                                    f"its clock with {python}: {err.strip()[-300:]}")
                offset = float(line) - (t0 + t1) / 2
                if best is None or t1 - t0 < best[0]:
                    best = (t1 - t0, offset)
        finally:
            proc.stdin.close()
            proc.wait(timeout=COMMAND_S)
        assert best is not None
        return Clock(round(best[1] * 1000, 3), round(best[0] * 500, 3), samples)

    def close(self) -> None:
        """The master connection ends (the processes it carried are gone by then)."""
        subprocess.run(["ssh", "-o", f"ControlPath={self.control}", "-O", "exit",
                        self.host.address], capture_output=True, check=False, timeout=10)


_TAR: tuple[bytes, str] | None = None


def _package_tar() -> tuple[bytes, str]:
    """The `bench` package as a gzipped tar (its sources, no caches) and its content hash."""
    global _TAR
    if _TAR is None:
        files = sorted(p for p in (PACKAGE / "bench").rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts)
        h = hashlib.sha256()
        for p in files:
            h.update(str(p.relative_to(PACKAGE)).encode())
            h.update(p.read_bytes())
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for p in files:
                tar.add(p, arcname=str(p.relative_to(PACKAGE)))
        _TAR = (buf.getvalue(), h.hexdigest()[:12])
    return _TAR


def control_dir() -> Path:
    """A short folder for the master connections' sockets (a socket path has 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix="a2a-ssh-"))
