"""`a2a-bench explore --tx …`: the trials run on other machines, through execnet gateways
(the specs pytest-xdist's `--tx` takes, `N*` included), each host in its own checkout of
this project. One trial at a time per gateway; a failing run's folder comes back (zipped)
into this machine's explore folder, a passing one is deleted where it ran. The drafts are
drawn here, so the same `--seed` explores the same scenarios whatever the hosts.
"""

from __future__ import annotations

import queue
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any

import execnet

from bench.explore.draw import Draft
from bench.folders import pack, unpack

#: what a gateway runs: this module's `serve`, in the host's own install
_REMOTE = "from bench.explore.hosts import serve\nserve(channel)\n"


def gateways(specs: list[str]) -> list[str]:
    """The gateway specs, `N*spec` repeated N times."""
    out = []
    for spec in specs:
        n, star, rest = spec.partition("*")
        out += [rest] * int(n) if star and n.isdigit() else [spec]
    return out


def serve(channel: Any) -> None:
    """On a host: run each trial sent, answer with its result (and a failing run's files)."""
    from bench.explore import trial
    while True:
        job = channel.receive()
        if job is None:
            return
        folder = Path("a2a-bench-explore") / job["folder"].lstrip("/")
        t = trial(job["index"], Draft(job["scenario"], job["topology"]), folder, job["variant"])
        packed = pack(folder) if t.failing and folder.exists() else None
        shutil.rmtree(folder, ignore_errors=True)
        channel.send({"index": t.index, "failing": list(t.failing), "verdicts": t.verdicts,
                      "wall_s": t.wall_s, "invalid": t.invalid,
                      "situations": list(t.situations), "packed": packed})


class GatewayPool:
    """What `explore` asks of a process pool — `submit(trial, index, draft, folder,
    variant)` — done on gateways."""

    def __init__(self, specs: list[str]) -> None:
        self.group = execnet.Group()
        self.jobs: queue.Queue[tuple[Future[Any], dict[str, Any]] | None] = queue.Queue()
        self.threads = []
        for spec in gateways(specs):
            # the trial sets an alarm: it must run on the gateway's main thread, as xdist's do
            gw = self.group.makegateway(f"execmodel=main_thread_only//{spec}")
            channel = gw.remote_exec(_REMOTE)
            thread = threading.Thread(target=self._work, args=(channel,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def submit(self, fn: Callable[..., Any], index: int, draft: Draft, folder: Path,
               variant: str) -> Future[Any]:
        fut: Future[Any] = Future()
        self.jobs.put((fut, {"index": index, "scenario": draft.scenario,
                             "topology": draft.topology, "folder": str(folder),
                             "variant": variant}))
        return fut

    def _work(self, channel: Any) -> None:
        from bench.explore import Trial
        while True:
            item = self.jobs.get()
            if item is None:
                channel.send(None)
                return
            fut, job = item
            try:
                channel.send(job)
                r = channel.receive()
                folder = Path(job["folder"])
                if r["packed"]:
                    unpack(r["packed"], folder)
                fut.set_result(Trial(r["index"], str(folder), tuple(r["failing"]), r["verdicts"],
                                     r["wall_s"], r["invalid"], tuple(r["situations"])))
            except Exception as exc:   # a host gone: each trial sent it says so, none hangs
                fut.set_exception(exc)

    def __enter__(self) -> GatewayPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join(timeout=30)
        self.group.terminate(timeout=10)
