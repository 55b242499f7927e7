"""`a2a-bench runs`: the run folders under results/, newest first, one line each — what ran,
where, and how it was judged — and `--keep N` to remove all but the newest N.

Only folders that are runs (a scenario.json beside a history.jsonl) are listed or removed;
matrices and explore folders are left alone.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.substrates import PACKAGES, substrate


@dataclass(frozen=True, slots=True)
class RunInfo:
    path: Path
    started: float                  # the folder's mtime of scenario.json (s since the epoch)
    scenario: str
    variant: str
    seed: Any
    substrate: str                  # sim | live on <broker> (<nodes> nodes)
    verdicts: dict[str, int]        # TRUE/FALSE/UNKNOWN -> how many
    exit_code: int | None           # None: never judged
    interrupted: bool

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "started": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)), "scenario": self.scenario,
            "variant": self.variant, "seed": self.seed, "substrate": self.substrate,
            "verdicts": self.verdicts, "exit_code": self.exit_code,
            "interrupted": self.interrupted}


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def find_runs(results: Path) -> list[RunInfo]:
    """Every run folder directly under `results`, newest first."""
    runs = []
    for folder in results.iterdir() if results.is_dir() else ():
        scenario_file = folder / "scenario.json"
        if not (scenario_file.is_file() and (folder / "history.jsonl").is_file()):
            continue
        scenario, summary = _read(scenario_file), _read(folder / "summary.json")
        verdicts = _read(folder / "verdicts.json").get("verdicts", [])
        tally: dict[str, int] = {}
        for v in verdicts if isinstance(verdicts, list) else []:
            value = str(v.get("value", "?")).upper()
            tally[value] = tally.get(value, 0) + 1
        mode = scenario.get("mode", "?")
        where = substrate(mode).label(scenario) if mode in PACKAGES else str(mode)
        runs.append(RunInfo(folder, scenario_file.stat().st_mtime, scenario.get("name", "?"),
                            scenario.get("variant", "?"), scenario.get("seed"), where,
                            tally, summary.get("exit_code"), "interrupted" in summary))
    return sorted(runs, key=lambda r: (r.started, r.path.name), reverse=True)


def render(runs: list[RunInfo]) -> str:
    if not runs:
        return "no runs"
    lines = []
    for r in runs:
        judged = ("not judged" if r.exit_code is None else
                  " ".join(f"{n} {k}" for k, n in sorted(r.verdicts.items())) +
                  f" (exit {r.exit_code})") + ("  INTERRUPTED" if r.interrupted else "")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
        lines.append(f"{when}  {r.scenario:<24} {r.variant:<22} {r.substrate:<30} {judged}"
                     f"\n                  {r.path}")
    return "\n".join(lines)


def prune(runs: list[RunInfo], keep: int) -> list[Path]:
    """Remove every run but the newest `keep`; returns what was removed."""
    gone = [r.path for r in runs[keep:]]
    for path in gone:
        shutil.rmtree(path)
    return gone
