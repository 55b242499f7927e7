"""Imports go one way (DESIGN §2), and bench/core does no I/O (STYLE: sans-IO)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "bench"

#: What bench/core may import from outside itself: pure computation only.
#: (functools for lru_cache: the directory's announcement parse, a pure function of its bytes,
#: is shared by the nodes of one process)
CORE_ALLOWED = {"__future__", "collections", "dataclasses", "enum", "typing", "json", "hashlib", "copy",
                "math", "cryptography", "functools",
                # computation, no I/O: the envelope's canonical JSON written and read fast
                "orjson", "re"}

#: A module's layer (its dotted path under bench, longest prefix first) -> the layers it may
#: import. Layering: core <- storage/history <- substrates/faults/workload <- matrix/report
#: <- run <- cli. The substrates are siblings: none imports another (but docker across
#: hosts, which places containers on the hosts' placement).
LAYERS = {
    "core": {"core"},
    # each protocol a package that describes itself (bench/protocols/<name>/__init__.py);
    # the layers above ask it (`bench.protocols.protocol`); its rules judge a history as
    # the checks do (bench/protocols/<name>/rules.py, found by `checks.checkers`), and its
    # hostile inputs are fault scripts (bench/protocols/<name>/faults.py, found by the
    # catalogue); its drafts for explore name the workload's words (bench/protocols/<name>/
    # explore.py)
    "protocols": {"core", "spec", "protocols", "checks", "history", "faults",
                  "faults.primitives", "workload"},
    "spec.distribution": {"spec.distribution"},
    "spec.topology": {"spec.distribution", "spec.topology"},
    "spec.scenario": {"core", "spec", "workload", "faults", "protocols"},
    "storage": {"core", "storage"},
    "history": {"core", "history"},
    # judge from the history only; each protocol says which of them are its own
    "checks": {"core", "history", "checks", "protocols"},
    "metrics": {"core", "history", "checks", "metrics"},
    "variants": {"core", "protocols", "variants"},
    "workload": {"core", "spec.distribution", "spec.topology", "workload"},
    # the nemesis: primitives are what substrates implement; scripts never see a substrate
    "faults.primitives": {"core", "spec.distribution", "faults.primitives"},
    "faults": {"core", "spec.distribution", "spec.topology", "faults", "oracle", "protocols"},
    "oracle": {"oracle"},                           # the honest verifier shares no code
    "faults.runner": {"core", "spec.distribution", "spec.topology", "faults"},
    # the substrates: siblings over one host base and one log, none imports another
    "substrates.host": {"core", "storage", "spec.distribution", "workload", "faults.primitives",
                        "substrates.host"},
    "substrates.log": {"core", "history", "substrates.log"},
    "substrates.tcp": {"substrates.tcp"},
    "substrates.filters": {"substrates.filters"},   # a broker's filter matching
    # (a node by default the reference of its protocol: variants)
    "substrates.wire": {"core", "storage", "history", "variants", "substrates.filters",
                        "substrates.wire"},
    # what a substrate says of itself, for the layers above (it starts nothing)
    "substrates.descriptor": {"spec", "history", "variants", "substrates",
                              "substrates.descriptor"},
    "substrates.sim": {"core", "storage", "history", "spec", "workload", "variants",
                       "faults.primitives", "substrates.host", "substrates.log",
                       "substrates.descriptor",
                       "substrates.tcp", "substrates.filters", "substrates.sim"},
    "substrates.live": {"core", "storage", "history", "spec", "protocols", "workload",
                        "variants",
                        "faults.primitives", "substrates.host", "substrates.log",
                        "substrates.descriptor",
                        "substrates.tcp", "substrates.filters", "substrates.live"},
    # docker is the live deployment with its broker and nodes in containers: it builds on live;
    # across the engines of several hosts (--hosts) on the hosts' placement too (the one
    # sibling edge: how hosts are reached, their clocks read and their links cut is theirs)
    "substrates.docker": {"core", "history", "spec", "protocols", "variants", "faults.primitives",
                          "substrates", "substrates.log", "substrates.descriptor",
                          "substrates.live", "substrates.hosts", "substrates.docker"},
    # hosts by SSH: the live deployment, placed on them
    "substrates.hosts": {"core", "history", "spec", "protocols", "variants", "faults",
                         "substrates", "substrates.log", "substrates.descriptor",
                         "substrates.live", "substrates.hosts"},
    "substrates": {"core", "history", "spec", "protocols", "workload", "variants",
                   "faults.primitives",
                   "substrates.log", "substrates.descriptor", "substrates.sim", "substrates.live", "substrates.docker",
                   "substrates.hosts"},
    "loop": {"core", "faults", "substrates", "workload", "loop"},
    "spec": {"spec"},
    # `validate` and `describe`: read every kind of input and the catalogue, run nothing
    "spec.describe": {"spec", "checks", "faults", "matrix", "variants", "substrates", "protocols"},
    "folders": {"folders"},
    "report": {"core", "history", "checks", "metrics", "substrates", "report"},
    # the seed protocol's node, fuzzed and timed as it is (bench/protocols/seed/)
    "tools.fuzz": {"core", "protocols", "tools.fuzz"},
    "tools.attack_table": {"core", "run", "spec", "variants", "tools.attack_table"},
    "tools.exchange": {"core", "storage", "history", "substrates.wire", "tools.exchange"},
    # (its --agents table runs a scenario as `run` would)
    "tools.benchmark": {"core", "protocols", "spec", "workload", "substrates", "run", "variants",
                        "storage", "history", "tools.benchmark"},
    "tools.scale": {"run", "spec", "variants", "tools.scale"},   # runs a scenario as `run` would
    # the benchmark's round trip, its steps stamped
    "tools.critical_path": {"core", "storage", "substrates", "tools.benchmark",
                            "tools.critical_path"},
    # network namespaces, sshd and engines: nothing of the bench but the image's tag
    "tools.hosts": {"tools.hosts", "substrates.docker"},
    "tools.explore_table": {"variants", "tools.explore_table"},   # runs explore as a user would
    "tools.golden": {"run", "spec", "variants", "tools.golden"},   # runs every shipped scenario
    "tools.reach": {"matrix", "tools.reach"},     # runs a matrix's cells under coverage.py
    # the reference pages: read every registry, run nothing
    "tools.reference": {"core", "checks", "faults", "variants", "cli", "tools", "conform",
                        "protocols", "substrates.live.kinds", "spec.brokers"},
    "tools": {"tools"},
    "matrix": {"spec", "protocols", "variants", "checks", "metrics", "run", "report", "substrates", "folders",
               "matrix"},
    # explore writes scenario files and runs them as `run` would: it never reaches into a node
    "explore": {"spec", "protocols", "faults", "workload", "variants", "checks", "run", "folders",
                "explore"},
    "run": {"core", "checks", "faults", "history", "loop", "metrics", "report", "spec", "substrates",
            "variants", "workload", "run"},
    # load: a step's figures read from its history (the CLI runs the steps as `run` does)
    "load": {"core", "history", "metrics", "report", "load"},
    # conform runs scenarios as `run` would and reads only their verdicts
    "conform": {"checks", "protocols", "run", "spec", "substrates", "variants",
                "conform"},
    # what conform leaves for CI (compatibility.json, JUnit XML, a page): from its rows only
    "certify": {"conform", "protocols", "certify"},
    # the grid: conform's suites and tables, per cell of brokers x responders x requesters;
    # a run's history judged again as `check` judges it, keeping every counterexample
    "grid": {"protocols", "certify", "checks", "conform", "history", "run", "spec", "substrates", "grid"},
}


def layer_of(dotted: str) -> str | None:
    """The LAYERS key that owns `dotted` (a module path under bench), longest prefix first."""
    for key in sorted(LAYERS, key=len, reverse=True):
        if dotted == key or dotted.startswith(key + "."):
            return key
    return None


def imports_of(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def core_violations(source: str, own: tuple[str, ...] = ("bench.core",),
                    allowed: frozenset[str] | set[str] = CORE_ALLOWED) -> list[str]:
    bad = []
    for name in imports_of(source):
        top = name.split(".")[0]
        if name.startswith("bench."):
            if not name.startswith(own):
                bad.append(name)
        elif top not in allowed:
            bad.append(name)
    return sorted(bad)


def layer_violations(module: str, source: str) -> list[str]:
    """Imports of bench modules that `module` (dotted, under bench) may not make."""
    layer = layer_of(module)
    if layer is None:
        return [f"bench.{module} has no declared layer in tests/test_architecture.py"]
    allowed = LAYERS[layer]
    bad = []
    for name in imports_of(source):
        if not name.startswith("bench."):
            continue
        target = name.removeprefix("bench.")
        if not any(target == a or target.startswith(a + ".") or a.startswith(target + ".")
                   for a in allowed):
            bad.append(name)
    return sorted(bad)


def python_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.py"))


def test_the_checker_itself_catches_io() -> None:
    assert core_violations("import socket\nfrom time import monotonic\nimport asyncio") == \
        ["asyncio", "socket", "time"]
    assert core_violations("import random, os\nimport simpy\nfrom bench.storage import x") == \
        ["bench.storage", "os", "random", "simpy"]
    assert core_violations("from collections.abc import Mapping\nimport json") == []
    assert layer_violations("storage", "from bench.substrates.wire import Wire") == ["bench.substrates.wire"]


@pytest.mark.parametrize("path", python_files(PKG / "core"), ids=lambda p: p.name)
def test_core_is_sans_io(path: Path) -> None:
    assert core_violations(path.read_text()) == [], f"{path.relative_to(ROOT)} imports I/O"


#: a protocol package's node code and what it reads: sans-IO (its rules, settings and
#: deployment hooks are judged by the layers they belong to)
NODE_CODE = ("clauses", "io", "oauth", "requester", "responder", "wire", "startup",
             # the seed protocol's node and the machines it drives
             "node", "directory", "gate", "instance", "ledger", "outbox", "payloads",
             "process", "relay", "request", "steps", "task", "context", "fields")


def node_code() -> list[Path]:
    """The node code of every protocol package (its modules, not its rules' package)."""
    return [p for p in python_files(PKG / "protocols")
            if p.stem in NODE_CODE and p.parent.parent == PKG / "protocols"]


def test_the_seed_protocols_node_is_judged_sans_io() -> None:
    assert {p.stem for p in node_code() if p.parent.name == "seed"} >= {
        "node", "ledger", "directory", "outbox", "task", "process", "gate"}


@pytest.mark.parametrize("path", node_code(), ids=lambda p: str(p.parent.name + "/" + p.name))
def test_protocols_node_code_is_sans_io(path: Path) -> None:
    """A protocol's node code is sans-IO as the bench's core is: it runs on every
    substrate unchanged (`re` checks the profile's identifiers, PyJWT its bearer
    tokens)."""
    assert core_violations(path.read_text(), ("bench.core", "bench.protocols"),
                           CORE_ALLOWED | {"re", "sys", "jwt"}) == [], \
        f"{path.relative_to(ROOT)} imports I/O"


def test_layering() -> None:
    problems = []
    for path in python_files(PKG):
        rel = path.relative_to(PKG)
        if rel.parts[0] in ("__init__.py", "__main__.py", "cli"):
            continue  # the package root and the CLI sit on top of everything
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for bad in layer_violations(module, path.read_text()):
            problems.append(f"{path.relative_to(ROOT)} imports {bad}")
    assert problems == []


#: What mypy checks strictly (pyproject.toml's [[tool.mypy.overrides]] with strict = true).
STRICT = ["bench/core", "bench/protocols", "bench/storage", "bench/checks", "bench/history.py", "bench/oracle.py",
          "bench/substrates/descriptor.py", "bench/substrates/sim/__init__.py",
          "bench/substrates/live/__init__.py", "bench/substrates/docker/__init__.py",
          "bench/metrics.py", "bench/report/text.py", "bench/report/summary.py"]


def test_mypy_strict_on_core_storage_history_checks_and_substrate_descriptors() -> None:
    """The modules of STRICT, strictly; what they import is followed but judged by its own
    rules (silently: the non-strict rest of the package has a baseline of its own)."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", *STRICT],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def names_imported_from(source: str, module: str) -> set[str]:
    return {a.name for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module == module for a in node.names}


def test_no_judge_reuses_the_code_it_judges() -> None:
    """A checker reads the core's event schema and nothing else of the core; the attacks
    take only the keyring's data types from the core's auth, and sign and judge with
    bench.oracle, which imports nothing of the bench."""
    problems = []
    rules = [p for p in python_files(PKG / "protocols") if "rules" in p.parts or p.stem == "rules"]
    assert any(p.parent.name == "rules" and "seed" in p.parts for p in rules)
    node = {f"bench.protocols.{p.parent.name}.{p.stem}" for p in node_code()} - {
        # the tap's own parsers, which the rules may share: never a node's decoder
        "bench.protocols.a2a_mqtt.wire", "bench.protocols.parley.wire",
        "bench.protocols.a2a_mqtt.clauses", "bench.protocols.parley.clauses"}
    for path in [*python_files(PKG / "checks"), *rules]:
        for name in imports_of(path.read_text()):
            if name.startswith("bench.core") and name != "bench.core.events" or name in node:
                problems.append(f"{path.relative_to(ROOT)} imports {name}")
    attacks = (PKG / "faults" / "attacks.py").read_text()
    problems += [f"bench/faults/attacks.py imports {n} from bench.core.auth"
                 for n in names_imported_from(attacks, "bench.core.auth")
                 - {"KeyRing", "SignatureVersion"}]
    problems += [f"bench/oracle.py imports {n}" for n in imports_of((PKG / "oracle.py").read_text())
                 if n.startswith("bench")]
    assert problems == []


def test_ruff_clean() -> None:
    """The lint rules of pyproject.toml (imports sorted, modern syntax, pyflakes, bugbear)."""
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "bench", "tests"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module", ["run.py", "loop.py", "faults/runner.py", "faults/scripts.py"])
def test_the_run_loop_and_the_nemesis_know_no_substrate(module: str) -> None:
    """One loop and one nemesis for every substrate: neither imports simpy, asyncio or a
    substrate's own modules (they reach a deployment only through its interface)."""
    found = imports_of((PKG / module).read_text())
    assert not {n for n in found if n.split(".")[0] in ("simpy", "asyncio", "socket")}
    assert not {n for n in found if n.startswith(("bench.substrates.sim", "bench.substrates.live"))}


#: What a topic string looks like (DESIGN §3 Topics): a literal holding one of these is a
#: topic being formatted by hand.
TOPIC_SHAPES = ("/inbox", "node/", "/directory", "directory/", "event/A2A")


def topic_literals(source: str) -> list[str]:
    """String literals (f-string parts included; docstrings not) shaped like a topic."""
    tree = ast.parse(source)
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                    ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr)
                  and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings and any(s in n.value for s in TOPIC_SHAPES)]


def test_the_topic_grep_itself_finds_hand_made_topics() -> None:
    assert topic_literals('t = f"{p}/node/{n}/inbox"\nu = "x"') == ["/node/", "/inbox"]
    assert topic_literals('def f():\n    """a /inbox in a docstring"""\n') == []


def test_no_topic_is_formatted_outside_topics_py() -> None:
    """Seed 000 §3.1: a subscribe/publish prefix mismatch lost messages silently; one
    module owns every topic string, and nothing else makes one."""
    found = {str(p.relative_to(ROOT)): topic_literals(p.read_text())
             for p in python_files(PKG) if p.name != "topics.py"}
    assert {p: lits for p, lits in found.items() if lits} == {}


#: What the before-stop hook greps for: a mode compared outside bench/substrates/.
MODE_COMPARISON = re.compile(r"Mode\.(SIM|LIVE|DOCKER)|mode ==|mode is Mode|mode !=|mode in \(")
MODE_NAMES = frozenset({"sim", "live", "docker"})


def mode_comparisons(source: str) -> list[str]:
    """Where `source` compares a mode: the hook's grep, plus any comparison with a mode's
    name (`x == "sim"`, `"docker" in modes`) and any use of a Mode member."""
    found = [m.group(0) for m in MODE_COMPARISON.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "Mode":
            found.append(f"Mode.{node.attr}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            found += [f"compared with {o.value!r}" for o in operands
                      if isinstance(o, ast.Constant) and o.value in MODE_NAMES]
    return found


def test_the_mode_finder_itself_finds_comparisons() -> None:
    assert mode_comparisons('if m == "sim": pass') == ["compared with 'sim'"]
    assert mode_comparisons('x = Mode.LIVE') == ["Mode.LIVE", "Mode.LIVE"]
    assert mode_comparisons('if "docker" in modes: pass') == ["compared with 'docker'"]
    assert mode_comparisons('d = substrate(mode).wall_clock') == []


def test_no_mode_is_compared_outside_the_substrates() -> None:
    """A substrate describes itself (`bench.substrates.descriptor`); the CLI, the matrix,
    the run and the reports ask it and never branch on a mode."""
    found = {str(p.relative_to(ROOT)): mode_comparisons(p.read_text())
             for p in python_files(PKG) if p.relative_to(PKG).parts[0] != "substrates"}
    assert {p: hits for p, hits in found.items() if hits} == {}


def action_prose_reads(source: str) -> list[str]:
    """Where `source` reads a fault's action as text: compares `.action` with a string, or
    calls a string method on it."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr == "action" for o in operands) and \
                    any(isinstance(o, ast.Constant) and isinstance(o.value, str) for o in operands):
                found.append(f"line {node.lineno}: .action compared with a string")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "action":
            found.append(f"line {node.lineno}: .action.{node.func.attr}()")
    return found


def test_the_action_finder_itself_finds_prose() -> None:
    assert action_prose_reads('x = e.action == "broker started"') == [
        "line 1: .action compared with a string"]
    assert action_prose_reads('x = e.action.startswith(DOWN)') == ["line 1: .action.startswith()"]
    assert action_prose_reads('x = e.action == FaultAction.BROKER_STARTED') == []


def test_no_checker_parses_what_a_fault_did_from_prose() -> None:
    """A fault's effects that a rule reads are `FaultAction` members, written by every
    substrate from that one enum: a reworded message can never make a rule vacuous."""
    found = {str(p.relative_to(ROOT)): action_prose_reads(p.read_text())
             for p in [*python_files(PKG / "checks"), PKG / "metrics.py"]}
    assert {p: hits for p, hits in found.items() if hits} == {}


def _enum_typed_fields() -> set[str]:
    """The names of the schema's fields typed with an enum on some event."""
    import dataclasses

    from bench.core import events
    return {f.name for t in events.TYPES.values() for f in dataclasses.fields(t)
            if str(f.type).removesuffix(" | None") in events._ENUMS}


def bare_values(source: str, fields: set[str]) -> list[str]:
    """Where `source` compares one of `fields` with a bare string (or a tuple of them)
    rather than an enum member."""
    def strings(n: ast.expr) -> bool:
        if isinstance(n, ast.Constant):
            return isinstance(n.value, str)
        return isinstance(n, (ast.Tuple, ast.List, ast.Set)) and bool(n.elts) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in n.elts)
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr in fields for o in operands) \
                    and any(strings(o) for o in operands):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_bare_value_finder_itself_finds_them() -> None:
    assert bare_values('x = e.state == "PUBLISHED"', {"state"}) == [
        "line 1: e.state == 'PUBLISHED'"]
    assert bare_values('x = e.state in ("A", "B")', {"state"}) == ["line 1: e.state in ('A', 'B')"]
    assert bare_values('x = e.state is OutboundState.PUBLISHED', {"state"}) == []


def test_checkers_compare_history_values_as_enum_members() -> None:
    """The history's categorical values are enums of the schema; a checker that compares
    one with a bare string would judge nothing, silently, once the value is renamed. With
    members, a rename fails mypy (strict on the checkers)."""
    fields = _enum_typed_fields()
    found = {str(p.relative_to(ROOT)): bare_values(p.read_text(), fields)
             for p in [*python_files(PKG / "checks"), PKG / "metrics.py"]}
    assert {p: hits for p, hits in found.items() if hits} == {}


def _substrate_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["bench", "substrates"] else None


def test_no_substrate_overrides_a_private_method_of_another_substrates_class() -> None:
    """Live and docker share one deployment through a named contract (a `Placement`, a
    node `Launcher`), not by one substrate's class overriding another's private methods."""
    classes: dict[tuple[str, str], tuple[list[str], set[str]]] = {}   # (module, name) -> bases, methods
    imported: dict[str, dict[str, str]] = {}                          # module -> name -> its module
    for path in python_files(PKG / "substrates"):
        module = "bench." + ".".join(path.relative_to(PKG).with_suffix("").parts).removesuffix(
            ".__init__")
        tree = ast.parse(path.read_text())
        imported[module] = {a.asname or a.name: node.module for node in ast.walk(tree)
                            if isinstance(node, ast.ImportFrom) and node.module
                            for a in node.names}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                methods = {f.name for f in node.body
                           if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                classes[(module, node.name)] = (bases, methods)
    found = []
    for (module, name), (bases, methods) in classes.items():
        for base in bases:
            origin = imported[module].get(base)
            if origin is None or _substrate_of(origin) in (None, _substrate_of(module)):
                continue
            _, inherited = classes.get((origin, base), ([], set()))
            found += [f"{module}.{name}.{m} overrides {origin}.{base}.{m}" for m in methods
                      & inherited if m.startswith("_") and not m.startswith("__")]
    assert found == []


#: The generic layers: they ask a protocol's spec (bench.protocols) what it needs and never
#: name a protocol — its name, its settings, its constants, its package.
GENERIC = ("spec", "substrates", "faults", "matrix", "report", "explore", "run", "history",
           "storage", "workload", "metrics", "folders", "loop", "conform")
def _protocol_names() -> str:
    """Every protocol's name as a string literal, from the packages themselves (a fourth
    protocol's too) — but the seed's: "seed" is also every scenario's random seed key, and
    its constant SEED is caught instead."""
    from bench.protocols import protocols
    return "|".join(rf"[\"']{re.escape(name)}[\"']" for name in protocols() if name != "seed")


NAMES_A_PROTOCOL = re.compile(r"\bA2A_MQTT\b|\bSEED\b|\bPARLEY\b|\ba2a_org\b|\ba2a_oauth\b|"
                              r"\ba2a_request_expiry_s\b|\bA2A_ROLES\b|bench\.profiles\b|"
                              r"bench\.protocols\.\w+\b|" + _protocol_names())
#: What still names one, each with what is left to move (issue 49): the list only shrinks —
#: a module that no longer names a protocol must leave it, and a new one may not join it.
DEBTS = {
}


@pytest.mark.parametrize("source", [
    'if topology.protocol == "parley": ...', "from bench.protocols.a2a_mqtt import clauses",
    "import bench.protocols.seed.node", "x = SEED", 'kind = "a2a-mqtt"'])
def test_the_protocol_finder_itself_finds_a_protocol_named(source: str) -> None:
    assert NAMES_A_PROTOCOL.search(source), source
    assert not NAMES_A_PROTOCOL.search('seed = scenario["seed"]; spec = protocol(name)')


def test_generic_layers_name_no_protocol() -> None:
    named = set()
    for path in python_files(PKG):
        rel = path.relative_to(PKG)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        if module.split(".")[0] in GENERIC and NAMES_A_PROTOCOL.search(path.read_text()):
            named.add(module)
    assert named == set(DEBTS), (
        f"new: {sorted(named - set(DEBTS))} name a protocol (ask bench.protocols instead); "
        f"paid: {sorted(set(DEBTS) - named)} no longer do (take them off DEBTS)")
