"""The image every container of `--mode docker` runs (brokers and nodes), built on this
machine: the engine here has no image and can reach no registry (`FROM debian` fails).

A Debian bookworm root made by debootstrap from the mirror apt already uses, with Python,
Mosquitto and iptables, and a venv holding the project's dependencies and the third-party
agents it runs in containers (from PyPI); then
`docker import`. The project's own code is not in it: the checkout is bind-mounted, so a
code change never rebuilds. The tag is a hash of what decides the content (this file and
the dependency list of pyproject.toml); a present tag is not built again.

    python -m bench.substrates.docker.image        build it now (.ci/run does, once)
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

from bench.protocols import protocols
from bench.substrates import EnvironmentFailure

REPOSITORY = "a2a-bench"
LABEL = "a2a-bench"                 # every image, network and container the bench makes
PROJECT = Path(__file__).resolve().parents[3]
PACKAGES = ["python3", "python3-venv", "mosquitto", "iproute2", "iptables", "procps",
            "ca-certificates"]
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")


class ImageError(EnvironmentFailure):
    """The image could not be built (the message says which step and why)."""


#: Optional dependencies the image holds too: the third-party implementations each protocol
#: judges, run as containers (`ProtocolSpec.extras`; the Dockerfiles of examples/ build
#: their images FROM this one)
EXTRAS = tuple(extra for spec in protocols().values() for extra in spec.extras)


def dependencies() -> list[str]:
    """The project's runtime dependencies, as pyproject.toml lists them, and its EXTRAS."""
    project = tomllib.loads((PROJECT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    return [str(d) for d in project["dependencies"]] + \
        [str(d) for extra in EXTRAS for d in optional.get(extra, [])]


#: Bump when a build step changes what goes into the image (its tag changes with it).
RECIPE = 1


def tag() -> str:
    """`a2a-bench:<hash>` of what decides the content: the recipe, the Debian packages and
    the project's dependencies (not the project's code, which is bind-mounted)."""
    digest = hashlib.sha256(f"{RECIPE}\n{PACKAGES}\n{dependencies()}".encode())
    return f"{REPOSITORY}:{digest.hexdigest()[:12]}"


def mirror() -> str:
    """The Debian mirror apt on this machine already uses."""
    sources = [*Path("/etc/apt/sources.list.d").glob("*.sources"), Path("/etc/apt/sources.list"),
               *Path("/etc/apt/sources.list.d").glob("*.list")]
    for path in sources:
        with contextlib.suppress(OSError):
            text = path.read_text()
            found = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or \
                re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+/debian)\s", text, re.M)
            if found:
                return found.group(1)
    return "http://deb.debian.org/debian"


def present(client: object) -> bool:
    import docker
    try:
        client.images.get(tag())  # type: ignore[attr-defined]
        return True
    except docker.errors.ImageNotFound:
        return False


def ensure(client: object, say: Callable[[str], None] = lambda line: None) -> str:
    """The image's tag, built first if it is not there."""
    if not present(client):
        build(client, say)
    return tag()


#: How long an apt command waits for another apt (an unattended upgrade, a second
#: `.ci/run`) to let go of its lock before the build gives up.
APT_LOCK_WAIT_S = 300.0


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None,
         say: Callable[[str], None] = lambda line: None) -> None:
    """Run one step of the build. An apt step that finds another apt holding its lock waits
    for it, saying so once, up to APT_LOCK_WAIT_S (it ended the build with a traceback)."""
    deadline = time.monotonic() + APT_LOCK_WAIT_S
    told = False
    while True:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        out = (done.stderr or done.stdout).strip()
        locked = cmd[0] == "apt-get" and "Could not get lock" in out
        if done.returncode and locked and time.monotonic() < deadline:
            if not told:
                say(f"{what}: another apt holds its lock; waiting for it (at most "
                    f"{APT_LOCK_WAIT_S:.0f} s) ...")
                told = True
            time.sleep(2.0)
            continue
        if done.returncode:
            raise ImageError(f"{what}: exit {done.returncode}"
                             + (f" (another apt held its lock for {APT_LOCK_WAIT_S:.0f} s)"
                                if locked else "") + f": {out[-600:]}")
        return


def _unmount_below(root: Path) -> None:
    """debootstrap mounts proc, sys and dev in the target: a half-built tree keeps them."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m.startswith(str(root))), reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)


def build(client: object, say: Callable[[str], None] = lambda line: None) -> str:
    t0 = time.monotonic()
    if shutil.which("debootstrap") is None:
        say("installing debootstrap (apt-get) ...")
        _run(["apt-get", "update", "-qq"], "apt-get update", say=say)
        _run(["apt-get", "install", "-y", "-qq", "debootstrap"], "apt-get install debootstrap",
             env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), say=say)
    work = Path(tempfile.mkdtemp(prefix="a2a-bench-image-", dir="/var/tmp"))
    root = work / "root"
    try:
        say(f"debootstrap bookworm from {mirror()} ...")
        _run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
              "bookworm", str(root), mirror()], "debootstrap")
        _unmount_below(root)
        say("the project's dependencies into /opt/venv (pip) ...")
        _run(["chroot", str(root), "python3", "-m", "venv", "/opt/venv"], "python3 -m venv")
        shutil.copy(HOST_CA, root / "tmp" / "ca.crt")   # TLS to PyPI goes through this CA
        clean = {"PATH": "/opt/venv/bin:/usr/bin:/bin", "HOME": "/root",
                 "PIP_CERT": "/tmp/ca.crt", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        _run(["chroot", str(root), "/usr/bin/env", "-i",
              *(f"{k}={v}" for k, v in clean.items()),
              "/opt/venv/bin/pip", "install", "-q", "--no-cache-dir", *dependencies()],
             "pip install")   # env -i: none of this machine's pip settings leak in
        (root / "tmp" / "ca.crt").unlink()
        for junk in ("var/lib/apt/lists", "var/cache/apt"):
            shutil.rmtree(root / junk, ignore_errors=True)
        say("docker import ...")
        archive = work / "root.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        repository, _, version = tag().partition(":")
        # from the file (its length known): a stream goes chunked, which the engine refused
        client.api.import_image(  # type: ignore[attr-defined]
            src=str(archive), repository=repository, tag=version, changes=[
                "ENV PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "ENV PYTHONUNBUFFERED=1", f"LABEL {LABEL}=image", "WORKDIR /"])
    finally:
        _unmount_below(root)
        shutil.rmtree(work, ignore_errors=True)
    say(f"built {tag()} in {time.monotonic() - t0:.0f} s")
    return tag()


def main() -> int:
    import docker
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any way of not reaching the engine
        print(f"a2a-bench image: no Docker Engine answers ({exc})", file=sys.stderr)
        return 2
    try:
        print(ensure(client, lambda line: print(f"  {line}", file=sys.stderr)))
    except ImageError as exc:
        print(f"a2a-bench image: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
