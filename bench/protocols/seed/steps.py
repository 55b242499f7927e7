"""Process definitions (seed 000 §5, seed 004): the steps a request's `process` payload
names, parsed and validated. A bad definition is a ValueError naming the key; no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from bench.core.envelope import Json
from bench.core.vocabulary import StepKind, TimeoutPolicy
from bench.protocols.seed.context import Merge


@dataclass(frozen=True, slots=True)
class StepDef:
    id: str
    kind: StepKind
    retries: int = 0
    merge: Merge = Merge.DEEP
    inner: tuple[StepDef, ...] = ()   # parallel branches or sub-flow steps
    prompt: str = ""
    timeout_ms: int = 60_000
    on_timeout: TimeoutPolicy = TimeoutPolicy.REJECT


def parse_steps(raw: Json, where: str = "process", top: bool = True) -> tuple[StepDef, ...]:
    """A process definition from a request payload; raises ValueError naming the key."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where} must be a non-empty list of steps")
    steps: list[StepDef] = []
    for i, s in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(s, dict):
            raise ValueError(f"{at} must be an object")
        sid, kind = s.get("id"), s.get("kind")
        if not isinstance(sid, str) or not sid or "/" in sid or ":" in sid:
            raise ValueError(f"{at}.id must be a non-empty string without '/' or ':'")
        retries = s.get("retries", 0)
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
            raise ValueError(f"{at}.retries must be an integer in 0..10")
        try:
            op = Merge(str(s.get("merge", "deep")))
        except ValueError:
            raise ValueError(f"{at}.merge must be one of {[m.value for m in Merge]}") from None
        if kind == StepKind.WORK:
            steps.append(StepDef(sid, StepKind.WORK, retries, op))
        elif kind in (StepKind.PARALLEL, StepKind.SUBFLOW) and top:
            key = "branches" if kind == StepKind.PARALLEL else "steps"
            inner = parse_steps(s.get(key), f"{at}.{key}", top=False)
            if kind == StepKind.PARALLEL and op is not Merge.DEEP:
                raise ValueError(f"{at}.merge must be 'deep' for parallel branches")
            steps.append(StepDef(sid, StepKind(kind), 0, op, inner))
        elif kind == StepKind.HUMAN and top:
            timeout, policy = s.get("timeoutMs", 60_000), s.get("onTimeout", "reject")
            if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
                raise ValueError(f"{at}.timeoutMs must be a positive integer")
            if policy not in TimeoutPolicy.__members__.values():
                raise ValueError(f"{at}.onTimeout must be one of "
                                 f"{[p.value for p in TimeoutPolicy]}")
            steps.append(StepDef(sid, StepKind.HUMAN, 0, op, prompt=str(s.get("prompt", "")),
                                 timeout_ms=timeout, on_timeout=TimeoutPolicy(str(policy))))
        else:
            allowed = ", ".join(k.value for k in StepKind) if top else StepKind.WORK.value
            raise ValueError(f"{at}.kind must be one of {allowed}, got {kind!r}")
    if len({s.id for s in steps}) != len(steps):
        raise ValueError(f"{where}: step ids must be unique")
    return tuple(steps)
