"""The history: one JSON object per line — `seq`, `tMs`, `node`, `kind`, then the event's
fields — for every substrate, written and read here against one schema
(`bench.core.events`). Written line by line and flushed — each line on a wall-clock
substrate, a simulation's at most a quarter second later — so a run that dies keeps what it
recorded up to that point; read back into typed events, refusing a line that does not fit
with the file, the line and what was expected.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import heapq
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar, TypeVar, cast

import orjson

from bench.core.envelope import LONG_DIGITS, written_otherwise
from bench.core.events import Event, NodeStarted, SchemaError, from_fields, kind_of, to_fields

E = TypeVar("E", bound=Event)
T = TypeVar("T")
F = TypeVar("F", bound="Fold")

#: The names every line carries before the event's own fields.
RESERVED = frozenset({"seq", "tMs", "node", "kind"})

#: The history's one text form: keys sorted, no spaces, ASCII only (`json.dumps` with these
#: settings). orjson writes the same bytes ~9x faster, except where `_unlike_stdlib` says.
_STDLIB = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
def _unlike_stdlib(out: bytes, value: object) -> bool:
    """Whether orjson's bytes for `value` may differ from the stdlib's: non-ASCII (the stdlib
    escapes it, and DEL), or what orjson writes otherwise in any JSON (`written_otherwise`:
    a small float, a NaN or infinity)."""
    return not out.isascii() or out.find(b"\x7f") >= 0 or written_otherwise(out, value)


def dumps_line(value: dict[str, Any]) -> str:
    """One history line's text, byte for byte what `json.dumps(value, sort_keys=True,
    separators=(",", ":"))` gives."""
    return dumps_line_bytes(value).decode("ascii")


def dumps_line_bytes(value: dict[str, Any]) -> bytes:
    """`dumps_line`'s bytes (ASCII: the stdlib escapes the rest), as the recorder writes
    them — no text layer between orjson and the file."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:      # an int beyond 64 bits, a lone surrogate, a key not a string
        return _STDLIB.encode(value).encode("ascii")
    return _STDLIB.encode(value).encode("ascii") if _unlike_stdlib(out, value) else out


def loads_line(text: str) -> Any:
    """One history line's value, as `json.loads` reads it (orjson first: it refuses NaN and
    lone surrogates, which the stdlib reads; a long int it would make a float)."""
    if LONG_DIGITS.search(text):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def line_json(seq: int, t_ms: float, node: str, kind: str,
              fields: Mapping[str, Any]) -> dict[str, Any]:
    """A history line's value: the reserved names, then the event's fields."""
    return {"seq": seq, "tMs": t_ms, "node": node, "kind": kind, **fields}


@dataclass(frozen=True, slots=True)
class Line:
    """One written history line, as the recorder keeps it in memory."""

    seq: int
    t_ms: float
    node: str
    kind: str
    fields: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return line_json(self.seq, self.t_ms, self.node, self.kind, self.fields)


class Recorder:
    """Appends events in order; optionally streams them to a JSONL file as they come.

    With a file, the lines are not kept in memory unless `keep` says so (a 1,000-node run
    writes over a million): `count` is how many were written, and `observers` see each.
    Each line is flushed to the file as it is written, or — `flush_after_s` — once that
    long has passed since the last flush (a simulation writes a million lines in a
    minute, and a write call for each was a tenth of its run; killed, it loses at most that
    much, and its seed replays it)."""

    def __init__(self, path: str | Path | None = None, *, keep: bool | None = None,
                 flush_after_s: float | None = None) -> None:
        self.events: list[Line] = []
        self.keep = path is None if keep is None else keep
        self.count = 0
        self._fh: IO[bytes] | None = open(path, "wb") if path else None
        self.flush_after_s = flush_after_s
        self._flushed_at = time.monotonic()
        #: called with each line once it is written (a progress display)
        self.observers: list[Callable[[Line], None]] = []
        #: (count, call): `call()` once the `count`th line is written (`when`)
        self._when: tuple[int, Callable[[], None]] = (0, lambda: None)

    def append(self, t_ms: float, node: str, event: Event) -> Line | None:
        """Write one line; returns it as kept, or None when nobody keeps or observes it."""
        self.count += 1
        if self.count == self._when[0]:
            self._when[1]()
        fields = to_fields(event)
        kind = kind_of(event)
        fh = self._fh
        if fh is not None:
            fh.write(dumps_line_bytes(line_json(self.count, t_ms, node, kind, fields)) + b"\n")
            after = self.flush_after_s
            if after is None:
                fh.flush()
            elif (now := time.monotonic()) - self._flushed_at >= after:
                fh.flush()
                self._flushed_at = now
        if not self.keep and not self.observers:
            return None
        line = Line(self.count, t_ms, node, kind, fields)
        if self.keep:
            self.events.append(line)
        for observe in self.observers:
            observe(line)
        return line

    def when(self, count: int, call: Callable[[], None]) -> None:
        """Call `call()` as the `count`th line is written (before it is)."""
        self._when = (count, call)

    def of_kind(self, kind: str) -> list[Line]:
        """The kept lines of one kind (a recorder that keeps them)."""
        return [e for e in self.events if e.kind == kind]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_jsonl(path: str | Path, lines: Iterable[str] | None = None
               ) -> Iterator[dict[str, Any]]:
    """The raw lines of a history file (dicts), in order. A last line cut while it was
    written (a killed run: no newline, not JSON) is left out — everything before it is
    what the run recorded (`cut_tail` says how much was cut); any other line that is not
    JSON is an error naming it. `lines`: the file's text lines as another reader takes
    them (`tail_lines`, while the run still writes it), `path` only naming them."""
    with contextlib.ExitStack() as stack:
        if lines is None:
            lines = stack.enter_context(open(path, encoding="utf-8", errors="replace"))
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield loads_line(line)
            except ValueError as exc:
                if not line.endswith("\n"):
                    return      # the last line, cut mid-write
                raise ValueError(f"{path}:{lineno}: not a JSON history line ({exc})") from exc


def tail_lines(path: str | Path, written: Callable[[float], bool],
               wait_s: float = 0.05) -> Iterator[str]:
    """The text lines of a history file that is still being written, each once it is whole,
    until `written(wait_s)` — asked whenever the reader has caught up with the writer, and
    waiting up to `wait_s` for the answer — says the writer has closed it; then the rest.
    As `read_jsonl` reads the file (a line's bytes decoded as UTF-8, a bad byte replaced)."""
    done = False
    rest = b""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 20)
            if chunk:
                *whole, rest = (rest + chunk).split(b"\n")
                for line in whole:
                    yield line.decode("utf-8", errors="replace") + "\n"
            elif done:
                break
            else:
                done = written(wait_s)    # asked before the last read: nothing written after
    if rest:
        yield rest.decode("utf-8", errors="replace")


def cut_tail(path: str | Path) -> int:
    """How many bytes at the end of a history file are a line cut mid-write (0: none)."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - 65536))
        tail = fh.read()
    if not tail or tail.endswith(b"\n"):
        return 0
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
    except ValueError:
        return len(last)
    return 0


def event_of(line: Mapping[str, Any], where: str = "history") -> Event:
    """The typed event of one raw line; ValueError names where and what does not fit.
    Short strings are interned: a history names the same nodes, ids and states a million
    times, and one copy of each took a third off a 1.3 M-line history in memory."""
    try:
        fields = {k: sys.intern(v) if type(v) is str and len(v) < 80 else v
                  for k, v in line.items() if k not in RESERVED}
        return from_fields(str(line["kind"]), fields, seq=int(line["seq"]),
                           t_ms=float(line["tMs"]), node=sys.intern(str(line["node"])))
    except KeyError as exc:
        raise ValueError(f"{where}: a history line needs seq, tMs, node and kind "
                         f"(missing {exc})") from None
    except SchemaError as exc:
        raise ValueError(f"{where}: {exc}") from None


def read_events(path: str | Path, lines: Iterable[str] | None = None) -> Iterator[Event]:
    """The typed events of a history file (`lines`: as `read_jsonl` takes them)."""
    for n, line in enumerate(read_jsonl(path, lines), 1):
        yield event_of(line, f"{path}:{n}")


class Fold:
    """Facts gathered in one pass over a history's events of `kinds`, in line order.

    A checker or a metric reads a kind of line a history holds by the million (every node's
    `directory_updated`: N² of them as a global directory fills) through a fold, so that
    judging need not keep those lines. `History.read` steps the folds it is given while it
    reads the file and keeps no line of a `streamed` kind; on a history built in memory
    `History.fold` runs the same fold over the kept events on demand. One code path either
    way, the same facts."""

    kinds: ClassVar[tuple[type[Event], ...]] = ()

    def step(self, e: Event) -> None:
        raise NotImplementedError


class History:
    """The typed events of one run, indexed by type for checkers.

    `count` is how many lines the run recorded and `end_ms` when the last of them was; a
    history read with `streamed` kinds keeps no event of those kinds (`of` refuses them) and
    answers for them only through the folds it was read with."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events = list(events)
        self.count = len(self.events)
        self.streamed: frozenset[type[Event]] = frozenset()
        self._folds: dict[type[Fold], Fold] = {}
        self._by_type: dict[type[Event], list[Event]] = defaultdict(list)
        for e in self.events:
            self._by_type[type(e)].append(e)
        self.end_ms = max((e.t_ms for e in self.events), default=0.0)
        self.namespace: dict[str, str] = {}           # the node's latest namespace
        self.client_ids: dict[str, str] = {}          # the node's configured client id
        self._boots: dict[str, list[NodeStarted]] = defaultdict(list)   # in seq order
        self._memo: dict[Any, Any] = {}
        for b in self.of(NodeStarted):
            self.namespace[b.node] = b.namespace
            self._boots[b.node].append(b)
            self.client_ids[b.node] = b.client_id

    @staticmethod
    def from_lines(lines: Iterable[Mapping[str, Any]], where: str = "history") -> History:
        return History(event_of(line, f"{where}:{n}") for n, line in enumerate(lines, 1))

    @staticmethod
    def read(path: str | Path, *, folds: Iterable[type[Fold]] = (),
             streamed: Iterable[type[Event]] = (), lines: Iterable[str] | None = None
             ) -> History:
        """The history in a file. Each of `folds` sees the lines of its kinds as they are
        read; a line of a `streamed` kind is kept by no one else (the folds must be all that
        reads that kind: `of` and any other fold refuse it). `lines`: the file's lines as
        another reader takes them (`tail_lines`)."""
        made = [fold() for fold in folds]
        steps: dict[type[Event], list[Callable[[Event], None]]] = defaultdict(list)
        for f in made:
            for kind in f.kinds:
                steps[kind].append(f.step)
        dropped = frozenset(streamed)
        kept: list[Event] = []
        count, end = 0, 0.0
        for e in read_events(path, lines):
            count += 1
            end = max(end, e.t_ms)
            for step in steps.get(type(e), ()):
                step(e)
            if type(e) not in dropped:
                kept.append(e)
        h = History(kept)
        h.count, h.end_ms, h.streamed = count, end, dropped
        h._folds = {type(f): f for f in made}
        return h

    def plus(self, e: Event) -> History:
        """This history with one more event at its end (the record of an interruption);
        its folds and what it streamed carry over (an event they would take is refused)."""
        if any(type(e) in f.kinds for f in self._folds.values()) or type(e) in self.streamed:
            raise ValueError(f"a folded history cannot take a {e.KIND.value} after reading")
        h = History([*self.events, e])
        h.count, h.end_ms = self.count + 1, max(self.end_ms, e.t_ms)
        h.streamed, h._folds = self.streamed, dict(self._folds)
        return h

    def ending_at(self, t_ms: float) -> History:
        """This history with `end_ms` moved back to `t_ms` (an interruption: what was still
        due then is judged as still under way at the end); every event stays, so what came
        after still counts as evidence. The facts `memo` keeps start afresh."""
        h = copy.copy(self)    # the events and their indexes shared, read-only
        h._folds, h._memo, h.end_ms = dict(self._folds), {}, min(self.end_ms, t_ms)
        return h

    def of(self, kind: type[E]) -> list[E]:
        if kind in self.streamed:
            raise LookupError(f"{kind.KIND.value} lines were streamed through folds when this "
                              "history was read, not kept: read them with a Fold")
        return self._by_type.get(kind, [])  # type: ignore[return-value]

    def fold(self, kind: type[F]) -> F:
        """The fold `kind` over this history: the one it was read with, or run now over the
        kept events of its kinds."""
        got = self._folds.get(kind)
        if got is None:
            got = kind()
            for e in heapq.merge(*(self.of(k) for k in kind.kinds), key=lambda e: e.seq):
                got.step(e)
            self._folds[kind] = got
        return cast(F, got)

    def memo(self, fn: Callable[[History], T]) -> T:
        """`fn(self)`, computed once per history (facts several rules share)."""
        if fn not in self._memo:
            self._memo[fn] = fn(self)
        return cast(T, self._memo[fn])

    def boots(self, node: str) -> list[NodeStarted]:
        """The node's boots, in order."""
        return self._boots.get(node, [])

    def boot_at(self, node: str, seq: int) -> NodeStarted | None:
        """The node's boot that was current at history line `seq`."""
        boots = self.boots(node)
        i = bisect.bisect_right(boots, seq, key=lambda b: b.seq)
        return boots[i - 1] if i else None

    def namespace_at(self, node: str, seq: int) -> str | None:
        """The node's namespace in the boot that was current at history line `seq`."""
        boot = self.boot_at(node, seq)
        return boot.namespace if boot else None

    @property
    def nodes(self) -> set[str]:
        return set(self.namespace)
