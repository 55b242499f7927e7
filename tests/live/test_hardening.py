"""Hardening the bench itself: no configured secret reaches anything a run writes or prints,
and every server the bench starts listens on 127.0.0.1 only."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from pathlib import Path

import pytest

from bench.spec.scenario import SCENARIOS, load_scenario
from bench.substrates import keyring
from bench.substrates.live.brokers import make_broker
from bench.substrates.live.proxy import FaultProxy
from tests.live.conftest import brokers


def _listeners(port: int) -> list[str]:
    """Local addresses listening on `port`, from /proc/net/tcp{,6} (hex, as the kernel has it)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:   # 0A: LISTEN
                found.append(address)
    return found


LOOPBACK = {"0100007F", "00000000000000000000000001000000"}   # 127.0.0.1 and ::1


@pytest.mark.parametrize("kind", brokers())
def test_the_brokers_the_bench_starts_listen_on_loopback_only(tmp_path: Path, kind: str) -> None:
    broker = make_broker(kind, tmp_path)
    broker.start()
    try:
        addresses = _listeners(broker.port)
        assert addresses and set(addresses) <= LOOPBACK, addresses
    finally:
        broker.stop()


def test_the_fault_proxy_listens_on_loopback_only() -> None:
    async def go() -> list[str]:
        proxy = FaultProxy(("127.0.0.1", 1), random.Random(1))
        await proxy.start()
        try:
            return _listeners(proxy.port)
        finally:
            await proxy.close()
    addresses = asyncio.run(go())
    assert addresses and set(addresses) <= LOOPBACK, addresses


def test_no_secret_appears_in_anything_a_run_writes_or_prints(tmp_path: Path) -> None:
    """A live run with per-agent keys, nodes as OS processes (their keys go over stdin),
    plots and reports: grep every file under the run folder and everything printed for
    every configured key and token, as text and as hex."""
    out = tmp_path / "run"
    env_path = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-m", "bench", "run", "attacks", "--nodes", "process",
                           "--out", str(out)], cwd=tmp_path, capture_output=True, timeout=300,
                          env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert (out / "history.jsonl").exists(), done.stderr.decode()[-2000:]
    assert (out / "report.html").exists()
    keys = keyring(load_scenario(SCENARIOS / "attacks.toml"))
    secrets = [keys.flat_token, *keys.agent_keys.values()]
    assert len(secrets) > 3 and all(s is not None for s in secrets)
    needles = set()
    for s in secrets:
        raw = s.reveal()   # type: ignore[union-attr]
        needles |= {raw, raw.hex().encode()}
    printed = done.stdout + done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10
    for needle in needles:
        assert needle not in printed
        for p in files:
            assert needle not in p.read_bytes(), f"a secret is in {p.relative_to(out)}"
