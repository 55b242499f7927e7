"""Scenario matrices (DESIGN §8–§9): scenarios × topologies × variants × seeds × modes ×
brokers × MQTT versions, each combination a *cell* run once into `results/<matrix-id>/cells/<cell-id>/`.

A matrix file is TOML: a name, and one or more `[[group]]` tables, each a cross product.
Three tokens expand: `scenarios = ["@all"]` (every scenario in scenarios/),
`variants = ["@defects"]` (every seeded defect, each paired with the scenario that
exposes it, instead of crossed with the group's scenarios) and `brokers = ["@installed"]`
(every broker the group's substrates start that this machine has; a cell its broker cannot
speak is left out and listed with the reason, `Matrix.skipped`). A cell is finished when its
`cell.json` exists — written last, atomically — so an interrupted matrix resumes where it
stopped, without redoing a cell.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.scenario import MODES, SCENARIOS, Scenario, find, load_scenario, read_toml
from bench.substrates import BrokerRefused, Choice, Options, substrate, variant_refusal
from bench.variants import VARIANTS

#: a group's `brokers = ["@installed"]`: every broker its substrates start that is installed
INSTALLED = "@installed"
HOSTINGS = ("inproc", "process")
_GROUP_KEYS = {"name", "scenarios", "topologies", "variants", "seeds", "modes", "brokers", "nodes",
               "mqtt"}
#: a group's `mqtt`: the version its cells speak ("": each scenario's own)
MQTT_VERSIONS = ("3.1.1", "5")


@dataclass(frozen=True, slots=True)
class Cell:
    group: str
    scenario: str
    variant: str
    topology: str | None      # None: the scenario's own
    seed: int
    mode: str
    #: live: the broker; sim: the broker model it copies, or "sim" for the topology's own
    broker: str
    nodes: str = "inproc"     # live: on the bench's loop or one OS process each
    #: the scenario file (a name in scenarios/ is scenarios/<name>.toml)
    path: str = ""
    #: the MQTT version its clients speak ("": the scenario's own)
    mqtt: str = ""

    @property
    def id(self) -> str:
        parts = [self.scenario, self.variant, self.topology or "own", f"s{self.seed}", self.mode]
        return ".".join(parts + substrate(self.mode).cell_name(self.broker, self.nodes)
                        + ([f"mqtt{self.mqtt}"] if self.mqtt else []))

    @property
    def source(self) -> Path:
        return Path(self.path) if self.path else SCENARIOS / f"{self.scenario}.toml"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "group": self.group, "scenario": self.scenario,
                "variant": self.variant, "topology": self.topology, "seed": self.seed,
                "mode": self.mode, "broker": self.broker, "nodes": self.nodes,
                "path": str(self.source), **({"mqtt": self.mqtt} if self.mqtt else {})}


@dataclass(frozen=True, slots=True)
class Matrix:
    name: str
    description: str
    source: Path
    cells: tuple[Cell, ...]
    #: cells a broker cannot run, left out with the one line saying why (a broker that
    #: speaks MQTT 3.1.1 only, and a scenario that speaks 5, in `brokers = ["@installed"]`)
    skipped: tuple[tuple[Cell, str], ...] = ()


def _texts(raw: dict[str, Any], key: str, where: str, default: list[Any]) -> list[Any]:
    value = raw.get(key, default)
    if not isinstance(value, list) or not value:
        raise SpecError(f"{where}.{key}={value!r} must be a non-empty array")
    return value


def _unspoken(source: Path, mode: str, broker: str, hosting: str, version: str,
              read: dict[tuple[Path, str, str | None], Scenario], variant: str = "reference",
              topology: str | None = None) -> str | None:
    """Why a cell cannot run, or None: its scenario does not load on the cell's topology or
    MQTT version (a workload or fault of another protocol's nodes, a version its protocol
    does not speak), its broker (or the simulator's model of one) cannot carry its MQTT
    version — amqtt and the A2A scenarios, which speak 5 — (the substrate says which
    broker the cell runs on), or its variant is a defect no node of the scenario would run
    (`bench.substrates.variant_refusal`). `read` keeps each scenario read once per version
    and topology."""
    if (source, "", None) not in read:
        read[source, "", None] = load_scenario(source)    # a bad file is said, not skipped
    key = (source, version, topology)
    if key not in read:
        try:
            read[key] = load_scenario(source, topology=topology, mqtt=version or None)
        except SpecError as exc:   # as `run --topology --mqtt` would refuse it
            return str(exc)
    described = substrate(mode)
    choice = described.cell_choice(broker, hosting)
    refused = described.refusal(read[key], choice) \
        or variant_refusal(VARIANTS[variant], read[key])
    if refused is not None:       # e.g. nodes the simulator cannot run (a library's own)
        return refused
    scenario, options = described.prepare(read[key], choice)
    ran_on = described.identity(scenario, options)
    return described.unspoken(scenario, ran_on.model or ran_on.broker)


def load_matrix(path: Path) -> Matrix:
    """Read and expand a matrix file; a bad key names the file, the key and what it wants."""
    where = str(path)
    raw = read_toml(path, "matrix file")
    unknown = set(raw) - {"name", "description", "group"}
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {sorted(unknown)} (known: name, description, "
                        "[[group]])")
    groups = raw.get("group")
    if not isinstance(groups, list) or not groups:
        raise SpecError(f"{where}: group must be a non-empty array of tables ([[group]])")
    known_scenarios = sorted(p.stem for p in SCENARIOS.glob("*.toml")
                             if not p.name.endswith(".matrix.toml"))
    cells: list[Cell] = []
    skipped: list[tuple[Cell, str]] = []
    spoken: dict[tuple[Path, str, str | None], Scenario] = {}   # read once per version, topology
    for i, g in enumerate(groups):
        at = f"{where}: group[{i}]"
        if not isinstance(g, dict):
            raise SpecError(f"{at} must be a table")
        bad = set(g) - _GROUP_KEYS
        if bad:
            raise SpecError(f"{at}: unknown key(s) {sorted(bad)} (known: {sorted(_GROUP_KEYS)})")
        name = str(g.get("name", f"group{i}"))
        scenarios = _texts(g, "scenarios", at, ["@all"])
        scenarios = known_scenarios if scenarios == ["@all"] else scenarios
        files: dict[str, str] = {}      # a scenario named by its file -> that file
        names = []
        for s in map(str, scenarios):
            if s.endswith(".toml") or "/" in s:
                file = Path(s).resolve()   # from the folder the matrix runs in
                if not file.is_file():
                    raise SpecError(f"{at}.scenarios: {s!r}: no such file (a path is read "
                                    f"from the current folder, {Path.cwd()})")
                files[file.stem] = str(file)
                names.append(file.stem)
            elif s in known_scenarios:
                names.append(s)
            else:
                raise SpecError(f"{at}.scenarios: {s!r} is neither a scenario in scenarios/ "
                                f"(known: {known_scenarios}) nor a .toml file")
        scenarios = names
        variants = _texts(g, "variants", at, ["reference"])
        pairs: list[tuple[str, str]] = []
        for v in variants:
            if v == "@defects":
                pairs += [(d.scenario, d.name) for d in VARIANTS.values() if d.name != "reference"]
            elif v not in VARIANTS:
                raise SpecError(f"{at}.variants: {v!r} is not a variant (known: "
                                f"{['@defects', *VARIANTS]})")
            else:
                pairs += [(s, v) for s in scenarios]
        topologies = _texts(g, "topologies", at, ["own"])
        for t in topologies:
            if t != "own":
                find(t, SCENARIOS.parent / "topologies", "topology")
        seeds = _texts(g, "seeds", at, [1])
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise SpecError(f"{at}.seeds={seeds!r} must be integers")
        modes = _texts(g, "modes", at, ["sim"])
        for m in modes:
            if m not in MODES:
                raise SpecError(f"{at}.modes: {m!r} must be one of {list(MODES)}")
        named = [str(b) for b in _texts(g, "brokers", at, ["amqtt"])]
        brokers_of: dict[str, list[str]] = {}    # a mode -> the brokers of its cells
        for m in modes:
            known = substrate(m).brokers()
            if named == [INSTALLED]:
                brokers_of[m] = list(substrate(m).brokers(installed=True))
                continue
            for b in named:
                if b not in known:
                    raise SpecError(f"{at}.brokers: {b!r}: {m} cells take one of "
                                    f"{list(known)}, or {INSTALLED!r} (every one installed)")
            brokers_of[m] = named
        # brokers named: the simulation copies each of them too (a fidelity matrix); not
        # named: it runs the topology's own model
        sim_brokers = ["sim"] if "brokers" not in g else (
            brokers_of.get("sim", named))
        sim_only: set[str] = set()    # "@all" leaves these out of live cells
        nodes_of: dict[str, str | None] = {}
        if any(substrate(m).wall_clock for m in modes):
            for s in scenarios:
                loaded = load_scenario(Path(files[s]) if s in files else SCENARIOS / f"{s}.toml")
                only = loaded.sim_only
                nodes_of[s] = loaded.live_nodes
                if only and g.get("scenarios", ["@all"]) != ["@all"]:
                    raise SpecError(f"{at}: scenario {s!r} is simulation only ({only}); "
                                    "take it out of the live cells")
                if only:
                    sim_only.add(s)
        # "@all" across a simulated and a wall-clock substrate is a comparison of the two: a
        # scenario one of them cannot run (nodes of a library's own, which the simulator has
        # no model of) is left out of both
        if g.get("scenarios", ["@all"]) == ["@all"] \
                and len({substrate(m).wall_clock for m in modes}) > 1:
            for s in scenarios:
                loaded = load_scenario(Path(files[s]) if s in files
                                       else SCENARIOS / f"{s}.toml")
                if any(substrate(m).refusal(loaded, Choice()) is not None
                       for m in modes if not substrate(m).wall_clock):
                    sim_only.add(s)
        hostings = _texts(g, "nodes", at, ["inproc"])
        for h in hostings:
            if h not in HOSTINGS:
                raise SpecError(f"{at}.nodes: {h!r} must be one of {list(HOSTINGS)}")
        if "nodes" in g and all(
                substrate(m).cells(brokers_of[m], sim_brokers, ["inproc"], None)
                == substrate(m).cells(brokers_of[m], sim_brokers, ["process"], None)
                for m in modes):
            # each of its substrates hosts nodes one way whatever the group says
            raise SpecError(f"{at}.nodes={hostings!r}: no cell of modes {modes!r} hosts its "
                            "nodes by it (a live cell runs them inproc or as processes)")
        versions = [str(v) for v in _texts(g, "mqtt", at, [""])]
        for v in versions:
            if v not in ("", *MQTT_VERSIONS):
                raise SpecError(f"{at}.mqtt: {v!r} must be one of {list(MQTT_VERSIONS)}")
        for scenario, variant in pairs:
            for topo in topologies:
                for seed in seeds:
                    for mode in modes:
                        described = substrate(mode)
                        if described.wall_clock and scenario in sim_only:
                            continue
                        for (broker, hosting), version in itertools.product(described.cells(
                                brokers_of[mode], sim_brokers, list(map(str, hostings)),
                                nodes_of.get(scenario)), versions):
                            source = Path(files[scenario]) if scenario in files \
                                else SCENARIOS / f"{scenario}.toml"
                            refused = _unspoken(source, str(mode), broker, hosting, version,
                                                spoken, variant,
                                                None if topo == "own" else str(topo))
                            cell = Cell(name, scenario, variant,
                                        None if topo == "own" else str(topo),
                                        int(seed), str(mode), broker, hosting,
                                        files.get(scenario, ""), version)
                            if refused is not None:
                                if named == [INSTALLED]:   # the grid says why, in a line
                                    skipped.append((cell, refused))
                                    continue
                                if g.get("scenarios", ["@all"]) == ["@all"]:
                                    continue       # "@all" leaves them out, as sim_only
                                raise SpecError(f"{at}: {refused}")
                            cells.append(cell)
    seen: dict[str, Cell] = {}
    for c in cells:
        seen.setdefault(c.id, c)   # the same cell in two groups runs once
    return Matrix(str(raw.get("name", path.name.removesuffix(".matrix.toml"))),
                  str(raw.get("description", "")), path, tuple(seen.values()),
                  tuple(skipped))


def cell_dir(out: Path, cell: Cell) -> Path:
    return out / "cells" / cell.id


def finished(out: Path, cell: Cell) -> dict[str, Any] | None:
    """The stored record of a finished cell, if it finished (its cell.json is written last)."""
    path = cell_dir(out, cell) / "cell.json"
    try:
        record: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return record if record.get("cell", {}).get("id") == cell.id else None


def expectation(cell: Cell) -> dict[str, str]:
    """What the cell must show: a defect's own checker FALSE; otherwise the scenario's
    expectations (true unless it says)."""
    if cell.variant != "reference":
        return {VARIANTS[cell.variant].caught_by: "false"}
    scenario, options = _deployed(cell)
    from bench.checks import checkers_for
    expect = substrate(cell.mode).expect(scenario, options)
    return {name: expect.get(name, "true") for name in checkers_for(scenario.protocol)}


def _deployed(cell: Cell) -> tuple[Scenario, Options]:
    """The cell's scenario as its substrate runs it, and the options it deploys with."""
    described = substrate(cell.mode)
    scenario = load_scenario(cell.source, topology=cell.topology, seed=cell.seed,
                             mqtt=cell.mqtt or None)
    return described.prepare(scenario, described.cell_choice(cell.broker, cell.nodes))


def run_cell(out: Path, cell: Cell) -> dict[str, Any]:
    from bench.checks import as_expected
    """Run one cell into a scratch folder, then move it into place and write cell.json:
    a cell killed half-way leaves nothing that looks finished."""
    from bench.run import run_scenario
    final = cell_dir(out, cell)
    scratch = final.with_name(final.name + f".partial-{os.getpid()}")
    for stale in final.parent.glob(final.name + ".partial-*"):   # left by a killed run
        shutil.rmtree(stale, ignore_errors=True)
    scenario, options = _deployed(cell)
    t0 = time.perf_counter()
    try:
        result = run_scenario(scenario, VARIANTS[cell.variant], scratch, mode=cell.mode,
                              options=options, topology_overridden=cell.topology is not None)
    except BrokerRefused as exc:    # the broker said no at the start: the cell's finding
        return _place(scratch, final, _refused(cell, scenario.protocol, str(exc),
                                               time.perf_counter() - t0))
    wall = time.perf_counter() - t0
    verdicts = {v.name: v.value.value for v in result.verdicts}
    expect = expectation(cell)
    if cell.variant == "reference":   # what the run found it could not judge (bench.checks
        expect |= {k: w for k, w in result.summary["expect"].items()   # .not_applicable)
                   if w == "unknown" and k in expect}
    wrong = {k: verdicts.get(k) for k, want in expect.items()
             if not as_expected(str(verdicts.get(k)), want)}
    m = result.metrics
    record = {"cell": cell.to_json(), "protocol": scenario.protocol, "verdicts": verdicts,
              "expect": expect, "wrong": wrong,
              "passed": not wrong, "wall_s": round(wall, 3),
              "metrics": {"requests": m["requests"], "outcomes": m["outcomes"],
                          "latency_ms": m["latency_ms"],
                          # mergeable: the matrix report's quantiles over many cells
                          "latency_histogram": m["latency_histogram"],
                          "duplicates_delivered": m["duplicates_delivered"],
                          "duplicates_executed": m["duplicates_executed"],
                          "messages_per_task": m["messages_per_task"],
                          "faults_fired": m["faults_fired"]},
              "situations": result.summary.get("situations", {}),
              # what the simulation of this broker's model is declared not to show
              "unmodelled": substrate(cell.mode).unmodelled(scenario, cell.broker),
              "topology": result.summary["topology"], "replay": result.summary["replay"]}
    return _place(scratch, final, record)


def _place(scratch: Path, final: Path, record: dict[str, Any]) -> dict[str, Any]:
    """Move a cell's run into place and write its cell.json, last."""
    shutil.rmtree(final, ignore_errors=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    if scratch.exists():
        scratch.rename(final)
    else:
        final.mkdir()
    tmp = final / "cell.json.tmp"
    tmp.write_text(json.dumps(record, indent=2))   # verdicts stay in checker order
    tmp.replace(final / "cell.json")
    return record


def _refused(cell: Cell, protocol: str, line: str, wall: float) -> dict[str, Any]:
    """The record of a cell whose broker refused the run at its start (a topic, a will, a
    login): no verdicts, the broker's refusal in one line, not as expected."""
    return {"cell": cell.to_json(), "protocol": protocol, "verdicts": {}, "expect": {},
            "wrong": {},
            "passed": False, "refused": line, "wall_s": round(wall, 3),
            "metrics": {"requests": 0, "outcomes": {},
                        "latency_ms": {"p50": None, "p99": None},
                        "latency_histogram": None, "duplicates_delivered": 0,
                        "duplicates_executed": 0, "messages_per_task": None,
                        "faults_fired": 0},
            "situations": {}, "unmodelled": {}, "topology": cell.topology or "own",
            "replay": ""}


def collect(out: Path, matrix: Matrix) -> list[dict[str, Any]]:
    """Every finished cell's record, in matrix order."""
    return [r for c in matrix.cells if (r := finished(out, c)) is not None]


def cell_protocols(matrix: Matrix) -> dict[str, str]:
    """Each cell's protocol (by id), from its scenario (each file and topology read once);
    empty where a scenario cannot be read (its cell will say why)."""
    seen: dict[tuple[str, str | None], str] = {}
    out: dict[str, str] = {}
    try:
        for c in matrix.cells:
            key = (str(c.source), c.topology)
            if key not in seen:
                seen[key] = load_scenario(c.source, topology=c.topology).protocol
            out[c.id] = seen[key]
    except Exception:          # noqa: BLE001 - a bad scenario: the cells and the report say so
        return {}
    return out

