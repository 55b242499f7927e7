"""`python -m bench.substrates.live.node_process`: one live node in its own OS process.

Its launch spec (with its keys) is the first line on stdin; further stdin lines are
operations (`bench.substrates.live.control`); every history event goes to stdout as one JSON line
`{"node", "kind", "tMs", "fields"}`. Killed with SIGKILL by the restart fault, started
again from the same data dir.

`--spec FILE` reads the launch spec from a file instead, and the node then runs until
SIGTERM whether or not anything is on stdin (a deployment `a2a-bench deploy` wrote).

SIGTERM stops it gracefully either way, as a "stop" line does (the restart fault's
`graceful`, `docker stop`): the node is told, commits what it handled, says goodbye and
disconnects.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

from bench.core.events import Event, HarnessError, to_fields
from bench.substrates.live.control import LaunchSpec, apply_op
from bench.substrates.live.host import Clock


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    standalone = len(sys.argv) == 3 and sys.argv[1] == "--spec"
    if standalone:
        with open(sys.argv[2]) as fh:
            first = fh.read()
    else:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        first = (await reader.readline()).decode()
    if not first.strip():
        return   # the runner went away before it sent a launch spec: nothing to run
    spec = LaunchSpec.from_json(json.loads(first))
    clock = Clock(spec.t0)
    stop = asyncio.Event()      # SIGTERM: an operator, `docker stop`, the graceful restart
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    out = sys.stdout

    def sink(node: str, event: Event, t_ms: float | None = None) -> None:
        out.write(json.dumps({"node": node, "kind": event.KIND.value,
                              "tMs": clock.now_ms() if t_ms is None else t_ms,
                              "fields": to_fields(event)},
                             separators=(",", ":")) + "\n")
        out.flush()

    host = spec.host(sink, clock)
    host.boot()
    if standalone:
        await stop.wait()
        await host.stop()
        return
    stopped = asyncio.ensure_future(stop.wait())
    while True:
        reading = asyncio.ensure_future(reader.readline())
        await asyncio.wait((reading, stopped), return_when=asyncio.FIRST_COMPLETED)
        if not reading.done():
            reading.cancel()
            break  # SIGTERM
        line = reading.result()
        if not line:
            break  # the runner went away: stop like a killed process would not, cleanly
        op = json.loads(line)
        if op["op"] == "stop":
            break
        try:
            apply_op(host, op)
        except Exception as exc:  # a bad operation is recorded; the node keeps running
            sink(spec.config.node_id, HarnessError(repr(exc), {"op": op.get("op")}))
    await host.stop()


if __name__ == "__main__":
    # Ctrl-C in the bench's terminal reaches every process of its group: the bench stops
    # its nodes itself (a "stop" line, or its stdin closing), so they do not die of it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(main())
