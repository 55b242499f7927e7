"""summary.json as a type: what a run says about itself — where it ran, how long, what it
expected, how it replays, and (after judging) its exit code and the situations it reached.
`bench.run` writes it; the terminal, report.md, `runs` and `compare` read it."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Interruption(TypedDict):
    at_s: float
    planned_s: float
    how: str


class Summary(TypedDict):
    scenario: str
    variant: str
    seed: int | None
    topology: str
    mode: str
    broker: str
    nodes: str
    model: NotRequired[str | None]        # the simulated broker's model (sim only)
    expect: dict[str, str]
    replay: str
    simulated_s: float                     # run time: simulated, or the wall clock's
    wall_s: float
    sim_s_per_wall_s: float
    events: int
    stats: NotRequired[dict[str, Any]]     # the deployment's own counts (absent if cut short)
    interrupted: NotRequired[Interruption]
    exit_code: NotRequired[int]
    situations: NotRequired[dict[str, int]]
