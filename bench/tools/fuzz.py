"""`python -m bench.tools.fuzz`: fuzz the envelope decoder and a node's whole inbound pipeline.

Every input is a (topic, payload) pair fed to a started reference node — strict mode with
per-agent keys for every other input, loose for the rest, so both the signature paths and
the handlers behind admission (tasks, processes, gates, relay) run. The property: nothing raises, and
every input becomes exactly one recorded outcome (admitted, dropped with a reason, a
directory update or a rejected announcement). Seeds are real messages of every type; the
built-in mutator flips, inserts, deletes and splices bytes and rewrites JSON values. With
`--atheris` (pip install atheris) libFuzzer drives it with coverage feedback instead.
The suite runs a bounded pass (tests/core/test_fuzz.py); this script runs longer ones.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bench.core.auth import AuthConfig, AuthMode, KeyRing, Secret, SignatureVersion, sign
from bench.core.commands import Record
from bench.core.config import NodeConfig
from bench.core.envelope import Envelope, MessageType, decode, encode
from bench.core.inputs import MessageReceived, Started
from bench.core.outcome import EventKind
from bench.core.topics import Topics
from bench.protocols.seed.node import Node
from bench.tools import Parser

OUTCOMES = {EventKind.INBOUND_ADMITTED, EventKind.INBOUND_DROPPED, EventKind.DIRECTORY_UPDATED,
            EventKind.DIRECTORY_REJECTED}
_T = Topics()
TOPICS = [_T.inbox("exec-1"), _T.inbox("other"), _T.directory("exec-9"), _T.directory("exec-1"),
          _T.group("g1"), _T.group("g2"), "elsewhere/x", ""]   # and two that are not ours
KEYS = KeyRing(Secret("fuzz-flat"), {"fin.orchestrator": Secret("fuzz-orch"),
                                     "llm.tax": Secret("fuzz-tax")})


def seeds() -> list[bytes]:
    """Real messages of every type, unsigned and signed (v1 and v2), and a directory
    announcement."""
    base = dict(from_agent_id="fin.orchestrator", timestamp_ms=1_000, to_agent_id="llm.tax",
                target_node_id="exec-1", conversation_id="c1")
    payloads: dict[MessageType, Any] = {
        MessageType.TASK_REQUEST: {"ask": "x", "process": [{"id": "a", "kind": "work"},
                                                           {"id": "h", "kind": "human"}]},
        MessageType.TASK_RESPONSE: {"status": "COMPLETED", "result": 1},
        MessageType.FLOW_EVENT: {"stream": "c1|llm.tax", "seq": 1, "kind": "token", "text": "hi",
                                 "lane": "l"},
        MessageType.GATE_OPEN: {"gateId": "g", "processInstId": "pi", "activityId": "h",
                                "agentId": "llm.tax", "timeoutMs": 1000, "onTimeout": "reject"},
        MessageType.GATE_DECISION: {"gateId": "g", "processInstId": "pi", "decision": "approve"},
        MessageType.GATE_ACK: {"gateId": "g", "status": "RESUMED"},
        MessageType.EVENT: {"event": 1},
    }
    out = []
    for i, (kind, payload) in enumerate(payloads.items()):
        env = Envelope(f"m{i}", kind, payload=payload, headers={"requestId": f"r{i}",
                                                                "replyNodeId": "orch-1"}, **base)
        out += [encode(env), encode(sign(env, KEYS, "orch-1")),
                encode(sign(env, KEYS, "orch-1", SignatureVersion.V2))]
    out.append(json.dumps({"nodeId": "exec-9", "online": True, "namespace": "llm",
                           "agents": [{"agentId": "llm.x"}]}).encode())
    return out


def mutate(data: bytes, rng: random.Random, corpus: list[bytes]) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.choice((0, 1, 2, 3, 4, 4, 4, 5, 6))
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1:
            b.insert(rng.randrange(len(b) + 1), rng.randrange(256))
        elif op == 2 and b:
            del b[rng.randrange(len(b)):rng.randrange(len(b)) + rng.randint(1, 16)]
        elif op == 3:
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            b = b[:rng.randrange(len(b) + 1)] + bytearray(other[cut:])
        elif op == 4:
            b = bytearray(_json_mutate(bytes(b), rng))
        elif op == 5 and b:
            i = rng.randrange(len(b))
            b[i:i] = rng.choice([b"\\u0000", b"\xff\xfe", b"{" * 50, b"1e999", b"-0", b'"', b"[]"])
        else:
            b = bytearray(rng.choice(corpus))
    return bytes(b[:65_536])


def _json_mutate(data: bytes, rng: random.Random) -> bytes:
    try:
        value = json.loads(data)
    except ValueError:
        return data
    # "\ud800": a lone surrogate (json.dumps escapes it; it parses, and is no character)
    weird: list[Any] = [None, True, 0, -1, 2**63, 1.5, "", "x" * 300, [], {}, [None], {"a": None},
                        "\ud800"]

    def walk(v: Any) -> Any:
        if isinstance(v, dict) and v:
            k = rng.choice(list(v))
            v = dict(v)
            if rng.random() < 0.3:
                v.pop(k)
            else:
                v[k] = rng.choice(weird) if rng.random() < 0.5 else walk(v[k])
            return v
        if isinstance(v, list) and v:
            i = rng.randrange(len(v))
            return [*v[:i], walk(v[i]), *v[i + 1:]]
        return rng.choice(weird)
    mutated = walk(value)
    if isinstance(mutated, dict) and rng.random() < 0.7:
        mutated["messageId"] = f"fz{rng.getrandbits(40)}"   # past the dedup, into the handlers
    out = json.dumps(mutated).encode()
    # a number no double holds: valid JSON that json.dumps cannot write (it parses as inf)
    return out.replace(b"1.5", b"1e400", 1) if rng.random() < 0.3 else out


@dataclass
class Stats:
    inputs: int = 0
    crashes: list[tuple[str, bytes, str]] = field(default_factory=list)
    not_one_outcome: list[tuple[str, bytes, int]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)


class Target:
    """A started node that takes fuzz inputs; rebuilt now and then so state stays small."""

    def __init__(self) -> None:
        self.n = 0
        self.node = self._fresh()

    def _fresh(self) -> Node:
        mode = AuthMode.STRICT if (self.n // 5_000) % 2 == 0 else AuthMode.LOOSE
        node = Node(NodeConfig("exec-1", "llm", ("llm.tax",), ("g1",),
                               auth=AuthConfig(mode, KEYS)))
        node.handle(Started(0, "fuzz"))
        return node

    def feed(self, topic: str, payload: bytes, stats: Stats) -> None:
        stats.inputs += 1
        self.n += 1
        if self.n % 5_000 == 0:
            self.node = self._fresh()
        try:
            decode(payload)
            commands = self.node.handle(MessageReceived(self.n, topic, payload))
        except Exception as exc:   # the finding this script exists for
            stats.crashes.append((topic, payload, repr(exc)))
            self.node = self._fresh()
            return
        found = [c for c in commands if isinstance(c, Record) and c.kind in OUTCOMES]
        if len(found) != 1:
            stats.not_one_outcome.append((topic, payload, len(found)))
        for c in found:
            key = c.kind.value + (f":{c.fields.get('reason')}" if c.kind is EventKind.INBOUND_DROPPED
                                  else "")
            stats.outcomes[key] = stats.outcomes.get(key, 0) + 1


def run(inputs: int | None = None, seconds: float | None = None, seed: int = 1) -> Stats:
    rng = random.Random(seed)
    corpus = seeds()
    target = Target()
    stats = Stats()
    deadline = time.monotonic() + seconds if seconds else None
    while (inputs is None or stats.inputs < inputs) and \
            (deadline is None or time.monotonic() < deadline):
        topic = TOPICS[0] if rng.random() < 0.6 else rng.choice(TOPICS)   # mostly the inbox
        target.feed(topic, mutate(rng.choice(corpus), rng, corpus), stats)
    return stats


def _atheris(runs: int) -> None:   # pragma: no cover - optional, needs atheris
    import tempfile
    from pathlib import Path

    import atheris
    atheris.instrument_all()   # coverage feedback from every module already imported
    corpus = Path(tempfile.mkdtemp(prefix="a2a-fuzz-corpus-"))
    for i, s in enumerate(seeds()):
        (corpus / f"seed{i}").write_bytes(bytes([0]) + s)   # first byte: the topic
    target, stats = Target(), Stats()

    def one(data: bytes) -> None:
        topic = TOPICS[data[0] % len(TOPICS)] if data else TOPICS[0]
        target.feed(topic, data[1:], stats)
        if stats.crashes or stats.not_one_outcome:
            raise RuntimeError(f"crash or silent input: {(stats.crashes or stats.not_one_outcome)[0]}")
    argv = [sys.argv[0], f"-runs={runs}", str(corpus)]
    atheris.Setup(argv, one)
    atheris.Fuzz()


def main() -> None:
    parser = Parser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (default 60)")
    parser.add_argument("--inputs", type=int, help="stop after this many inputs instead")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--atheris", type=int, metavar="RUNS",
                        help="let atheris/libFuzzer drive RUNS inputs with coverage feedback")
    args = parser.parse_args()
    if args.atheris:
        _atheris(args.atheris)
        return
    t0 = time.monotonic()
    stats = run(args.inputs, None if args.inputs else args.seconds, args.seed)
    wall = time.monotonic() - t0
    print(f"inputs tried: {stats.inputs} in {wall:.1f} s ({stats.inputs / wall:,.0f}/s), "
          f"seed {args.seed}")
    print(f"crashes: {len(stats.crashes)}; inputs without exactly one outcome: "
          f"{len(stats.not_one_outcome)}")
    for key, n in sorted(stats.outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {n:>8}  {key}")
    for topic, payload, err in stats.crashes[:5]:
        print(f"CRASH {err} on {topic!r}: {payload[:200]!r}")
    sys.exit(1 if stats.crashes or stats.not_one_outcome else 0)


if __name__ == "__main__":
    main()
