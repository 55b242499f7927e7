"""The live host's group commit (bench/substrates/live/host.py): a batch that only changes
state and says so — a PUBACK's new outbound state — waits for the next batch that sends
something and is committed with it, or after QUIET_COMMIT_S; write-ahead holds either way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import bench.substrates.live.host as live_host
from bench.core.commands import CancelTimer, PersistRecord, Record, Table
from bench.core.config import NodeConfig
from bench.core.events import NodeWarning, WarningKind
from bench.core.inputs import TimerId, TimerKind
from bench.protocols.seed.node import Node
from bench.spec.distribution import fixed
from bench.storage.files import FileStore
from bench.substrates.live.host import Clock, LiveHost
from bench.workload import Behaviour, WorkloadSpec


def _host(tmp_path: Path, recorded: list[str]) -> LiveHost:
    cfg = NodeConfig("exec-1", "llm", ("llm.tax",))
    return LiveHost(cfg, Node, tmp_path / "exec-1", ("127.0.0.1", 1),
                    lambda _node, e, _t=None: recorded.append(e.reason or ""),
                    Clock(0.0), Behaviour(WorkloadSpec(task_duration_ms=fixed(0.0)), 0))


def _quiet(key: str) -> list[object]:
    return [PersistRecord(Table.MESSAGES, key, {"state": "ACCEPTED"}),
            Record(NodeWarning(WarningKind.UNDELIVERABLE, reason=key))]


def test_a_quiet_batch_joins_the_next_commit_and_alone_waits_quiet_commit_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # long enough that no turn of the loop on a loaded machine reaches it, until shortened
    monkeypatch.setattr(live_host, "QUIET_COMMIT_S", 30.0)

    async def go() -> None:
        recorded: list[str] = []
        host = _host(tmp_path, recorded)
        store = FileStore(tmp_path / "store")
        host.durably(store, _quiet("q1"))          # type: ignore[arg-type]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert host.commits == 0 and recorded == [], "a quiet batch alone committed at once"
        # a batch that does something (a timer cancelled): committed this turn, with q1
        host.durably(store, [*_quiet("b2"), CancelTimer(TimerId(TimerKind.REQUEST_TIMEOUT, "r"))])  # type: ignore[list-item]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert host.commits == 1 and recorded == ["q1", "b2"]
        assert set(store.records(Table.MESSAGES)) == {"q1", "b2"}
        monkeypatch.setattr(live_host, "QUIET_COMMIT_S", 0.05)
        host.durably(store, _quiet("q3"))          # type: ignore[arg-type]
        await asyncio.sleep(0)
        assert host.commits == 1
        # alone, it is committed after QUIET_COMMIT_S: waited for, however busy the machine
        for _ in range(200):
            if host.commits == 2:
                break
            await asyncio.sleep(0.05)
        assert host.commits == 2 and recorded[-1] == "q3", "a quiet batch was never committed"
        monkeypatch.setattr(live_host, "QUIET_COMMIT_S", 30.0)
        acked: list[str] = []
        host.durably(store, _quiet("q4"))          # type: ignore[arg-type]
        host.after_durable(lambda: acked.append("ack"))   # a message acknowledged after it
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert host.commits == 3 and acked == ["ack"], "an acknowledgement waited on quiet"
        store.close()
    asyncio.run(go())
