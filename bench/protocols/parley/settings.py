"""A Parley topology's own settings (`ProtocolSpec.settings`): its `[parley]` table.

`topics` is the prefix of the command type's four topics (`{topics}/req`, `/hb`, `/prg`,
`/res`: protocol.md §3 lets the consumer choose them; they must be distinct and hold no
wildcard), `qos` the QoS its adapters publish and subscribe with (0 or 1: "All publishes
MUST use retain=false and MAY be QoS 0 or 1", adapter.py), and every timing field of
`ParleyConfig` (§8), in seconds, under its own name; a field not given keeps the
library's default (below, as config.py documents it)."""

from __future__ import annotations

import math
from typing import Any

from bench.spec.distribution import SpecError

#: ParleyConfig's fields and their §8 defaults (parley/config.py, 1.0.1)
TIMING: dict[str, float] = {
    "request_retry_interval": 2.0, "no_ack_timeout": 10.0, "stale_timeout": 15.0,
    "execution_timeout": 60.0, "cancel_retry_interval": 2.0, "heartbeat_interval": 3.0,
    "result_retry_interval": 2.0, "result_retry_timeout": 30.0, "tombstone_ttl": 60.0}
COUNTS: dict[str, int] = {"max_concurrent_executions": 1, "max_active_commands": 32}


def topics(prefix: str) -> dict[str, str]:
    """The command type's four topics under `prefix`."""
    return {kind: f"{prefix}/{kind}" for kind in ("req", "hb", "prg", "res")}


def read(raw: Any, where: str, table: Any) -> dict[str, Any]:
    """The `[parley]` table as the topology's `settings` (under "parley")."""
    t = table(raw, where, {"topics", "qos", *TIMING, *COUNTS})
    prefix = t.text("topics")
    if not prefix or "+" in prefix or "#" in prefix:
        raise SpecError(f"{t.key('topics')}={prefix!r}: expected a topic prefix with no "
                        "MQTT wildcard (protocol.md §3, as config.py checks it)")
    qos = t.integer("qos", 1, low=0)
    if qos > 1:
        raise SpecError(f"{t.key('qos')}={qos}: Parley publishes at QoS 0 or 1 (adapter.py)")
    timing = {k: t.number(k, v, low=0.001) for k, v in TIMING.items()}
    for k, v in timing.items():
        if not math.isfinite(v):     # ParleyConfig would refuse it inside the node
            raise SpecError(f"{t.key(k)}={v!r}: expected a finite number of seconds")
    counts = {k: t.integer(k, v, low=1) for k, v in COUNTS.items()}
    return {"settings": {"parley": {"topics": topics(prefix), "qos": qos, **timing, **counts}}}


def check_node(t: Any, unit: str, agents: tuple[str, ...], pool: str | None) -> None:
    """A Parley node: a handler serves the one command type (one agent id names it)."""
    if t.raw.get("role") == "handler" and len(agents) != 1:
        raise SpecError(f"{t.key('agents')}: a Parley handler serves one command type (one "
                        f"agent id), got {len(agents)}")
