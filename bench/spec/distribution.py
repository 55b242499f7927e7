"""Seeded random distributions for latencies, durations and delays, and the seed policy.

Every random draw of a run comes from `rng_for(seed, stream)`: one seed, split into named
streams so that adding a fault does not shift the workload's draws. A distribution is
written in TOML as a number (fixed) or an inline table, e.g.
`{ dist = "lognormal", median = 200, sigma = 0.5 }`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


class SpecError(ValueError):
    """Bad input in a scenario or topology file; the message names file and key."""


def rng_for(seed: int, stream: str) -> random.Random:
    return random.Random(f"{seed}/{stream}")


KINDS: dict[str, tuple[str, ...]] = {
    "fixed": ("value",),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
    "lognormal": ("median", "sigma"),
}


@dataclass(frozen=True, slots=True)
class Distribution:
    kind: str
    params: tuple[float, ...]

    def sample(self, rng: random.Random) -> float:
        p = self.params
        match self.kind:
            case "fixed":
                return p[0]
            case "uniform":
                return rng.uniform(p[0], p[1])
            case "exponential":
                return rng.expovariate(1.0 / p[0]) if p[0] > 0 else 0.0
            case "lognormal":
                return rng.lognormvariate(math.log(p[0]), p[1])
        raise AssertionError(f"unknown distribution {self.kind}")

    def sampler(self) -> Callable[[random.Random], float]:
        """`sample`, bound to this distribution with its constants worked out once: the
        same draws, for a caller that samples millions of times (a link's latency)."""
        p = self.params
        if self.kind == "fixed":
            value = p[0]
            return lambda rng: value
        if self.kind == "lognormal":
            return lognormal(math.log(p[0]), p[1])
        return self.sample

    def to_json(self) -> dict[str, Any]:
        return {"dist": self.kind, **dict(zip(KINDS[self.kind], self.params, strict=False))}


def fixed(value: float) -> Distribution:
    return Distribution("fixed", (float(value),))


def parse_distribution(raw: Any, where: str) -> Distribution:
    """`where` is "file: key" for the error message."""
    if isinstance(raw, bool):
        raise SpecError(f"{where}={raw!r} must be a number or a distribution table")
    if isinstance(raw, (int, float)):
        if raw < 0:
            raise SpecError(f"{where}={raw!r} must be >= 0")
        return fixed(raw)
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}={raw!r} must be a number or a table like "
                        '{ dist = "uniform", low = 1, high = 5 }')
    kind = raw.get("dist")
    if kind not in KINDS:
        raise SpecError(f"{where}.dist={kind!r} must be one of {sorted(KINDS)}")
    names = KINDS[kind]
    extra = sorted(set(raw) - set(names) - {"dist"})
    if extra:
        raise SpecError(f"{where}: unknown key(s) {extra} for dist={kind!r} (expected {list(names)})")
    values = []
    for n in names:
        v = raw.get(n)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise SpecError(f"{where}.{n}={v!r} must be a number >= 0")
        values.append(float(v))
    if kind == "uniform" and values[0] > values[1]:
        raise SpecError(f"{where}: low={values[0]:g} must be <= high={values[1]:g}")
    if kind == "lognormal" and values[0] <= 0:
        raise SpecError(f"{where}.median must be > 0")
    return Distribution(kind, tuple(values))


#: random.py's constant of the Kinderman and Monahan method
_NV_MAGICCONST = 4 * math.exp(-0.5) / math.sqrt(2.0)


def lognormal(mu: float, sigma: float) -> Callable[[random.Random], float]:
    """`rng.lognormvariate(mu, sigma)`, draw for draw — random.py's own steps (its
    `normalvariate`, Kinderman and Monahan) in one function instead of two calls and a
    method lookup each: a link draws two million times at 1,000 nodes. Checked against the
    stdlib's draws (tests/test_history_codec.py)."""
    log, exp = math.log, math.exp

    def draw(rng: random.Random) -> float:
        uniform = rng.random
        while True:
            u1 = uniform()
            u2 = 1.0 - uniform()
            z = _NV_MAGICCONST * (u1 - 0.5) / u2
            if z * z / 4.0 <= -log(u2):
                return exp(mu + z * sigma)
    return draw
