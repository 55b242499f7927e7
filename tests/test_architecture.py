"""Imports go one way (DESIGN §2), and bench/core does no I/O (STYLE: sans-IO)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bench"

#: What bench/core may import from outside itself: pure computation only.
CORE_ALLOWED = {"__future__", "collections", "dataclasses", "enum", "typing", "json", "hashlib", "copy",
                "cryptography"}

#: bench.<top> -> the bench.<top> modules it may import. Layering: core <- storage/history
#: <- drivers/faults/workload <- matrix/report <- cli.
LAYERS = {
    "core": {"core"},
    "distribution": {"distribution"},
    "topology": {"distribution", "topology"},
    "storage": {"core", "storage"},
    "history": {"history"},
    "checks": {"core", "checks"},                  # judge from the history only
    "metrics": {"checks", "metrics"},
    "variants": {"core", "variants"},
    "workload": {"distribution", "topology", "workload"},
    "driver": {"core", "storage", "driver"},
    "wire": {"core", "storage", "history", "wire"},
    "sim": {"core", "storage", "history", "distribution", "topology", "workload", "driver", "sim"},
    "live": {"core", "storage", "history", "distribution", "topology", "workload", "variants",
             "driver", "live"},
    "faults": {"core", "distribution", "topology", "sim", "live", "faults"},
    "scenario": {"core", "distribution", "topology", "workload", "faults", "scenario"},
    "report": {"checks", "report"},
    "fuzz": {"core", "fuzz"},
    "attack_table": {"core", "run", "scenario", "variants", "attack_table"},
    "matrix": {"distribution", "scenario", "variants", "checks", "run", "report", "matrix"},
    "exchange": {"core", "storage", "history", "wire", "exchange"},
    "benchmark": {"core", "distribution", "workload", "live", "benchmark"},
    "run": {"core", "storage", "history", "driver", "distribution", "topology", "checks", "metrics",
            "variants", "workload", "sim", "live", "faults", "scenario", "report", "run"},
}


def imports_of(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def core_violations(source: str) -> list[str]:
    bad = []
    for name in imports_of(source):
        top = name.split(".")[0]
        if name.startswith("bench."):
            if not name.startswith("bench.core"):
                bad.append(name)
        elif top not in CORE_ALLOWED:
            bad.append(name)
    return sorted(bad)


def layer_violations(module_top: str, source: str) -> list[str]:
    allowed = LAYERS.get(module_top)
    if allowed is None:
        return [f"bench.{module_top} has no declared layer in tests/test_architecture.py"]
    return sorted(n for n in imports_of(source)
                  if n.startswith("bench.") and n.split(".")[1] not in allowed)


def python_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.py"))


def test_the_checker_itself_catches_io() -> None:
    assert core_violations("import socket\nfrom time import monotonic\nimport asyncio") == \
        ["asyncio", "socket", "time"]
    assert core_violations("import random, os\nimport simpy\nfrom bench.storage import x") == \
        ["bench.storage", "os", "random", "simpy"]
    assert core_violations("from collections.abc import Mapping\nimport json") == []
    assert layer_violations("storage", "from bench.wire import Wire") == ["bench.wire"]


@pytest.mark.parametrize("path", python_files(PKG / "core"), ids=lambda p: p.name)
def test_core_is_sans_io(path: Path) -> None:
    assert core_violations(path.read_text()) == [], f"{path.relative_to(ROOT)} imports I/O"


def test_layering() -> None:
    problems = []
    for path in python_files(PKG):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("__init__.py", "__main__.py", "cli.py"):
            continue  # the package root and the CLI sit on top of everything
        top = rel.parts[0].removesuffix(".py")
        for bad in layer_violations(top, path.read_text()):
            problems.append(f"{path.relative_to(ROOT)} imports {bad}")
    assert problems == []


def test_mypy_strict_on_core_and_storage() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "bench/core", "bench/storage"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_clean() -> None:
    """The lint rules of pyproject.toml (imports sorted, modern syntax, pyflakes, bugbear)."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "bench", "tests"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
