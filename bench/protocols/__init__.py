"""The protocols a run's nodes may speak, each a package of its own under bench/protocols/
that describes itself with one `ProtocolSpec` (its `SPEC`): its name (what a topology's
`protocol = ...` and a history's run_started say), the MQTT versions it runs on, its names
for the bench's two roles, the topology table and node keys of its own settings, and the
modules that hold the rest of it (checkers, the tap's parser, start-up lines, deployment
hooks, fault kinds, conform kit). docs/protocols/new-protocol.md walks through adding one.

The layers above ask the spec (`protocol(name)`) instead of comparing a protocol's name:
a protocol added as a package beside these is found by its package, and nothing outside it
changes. The packages are discovered, not listed; describing one imports nothing but its
`__init__` (no node code, no checkers).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bench.spec.distribution import SpecError
from bench.spec.topology import MqttVersion, Role

#: The protocol a topology that names none speaks.
DEFAULT = "seed"


@dataclass(frozen=True, slots=True)
class ProtocolSpec:
    """One protocol, described: what the layers above ask of it (the spec layer to read a
    topology of it, the substrates to deploy its nodes, the faults which are its own)."""

    name: str                     # a topology's `protocol = ...`, run_started.protocol
    title: str                    # how a report names it
    #: the MQTT versions it runs on, its default first
    mqtt_versions: tuple[MqttVersion, ...]
    #: why it runs on those only (a clause), said where a topology asks for another
    mqtt_why: str = ""
    #: its names for the bench's roles, beside "orchestrator" and "executor"
    roles: Mapping[str, Role] = field(default_factory=dict)
    #: its nodes sign and check envelopes as a scenario's [auth] table sets them (mode,
    #: signature version, keys); a scenario of a topology of a protocol that does not is
    #: refused an [auth] table (it would change nothing)
    envelope_auth: bool = False
    #: the topology table that holds its settings (None: it has none)
    section: str | None = None
    #: the node keys that are its own (a topology of another protocol may not use them)
    node_keys: frozenset[str] = frozenset()
    #: the topology's top-level keys that are its own (likewise)
    topology_keys: frozenset[str] = frozenset()
    #: the workload keys that ask for what its nodes do and another protocol's do not (a
    #: key two protocols' nodes do is listed by both): set to other than its default on a
    #: topology of a protocol that does not list it, refused
    workload_keys: frozenset[str] = frozenset()
    #: the module of what a deployment gives its nodes (None: nothing beyond the bench's
    #: own): `client_id(node, topology)`, `node_fields(node, scenario, run_id)` (NodeConfig
    #: fields), `run_fields(topology, run_id)` (RunStarted fields) and optionally
    #: `inbox(topology, node_id, run_id)`; `run_id` is an isolated run's on a shared broker
    #: (its names must carry it: two runs never meet). Imported when a run deploys
    deploy: str | None = None
    #: its checkers whose subject a workload or topology may not ask for at all, each with
    #: the test of whether it does (workload, topology): without it they have nothing to
    #: judge, and a scenario expects UNKNOWN of them unless its [expect] says otherwise
    optional_subjects: Mapping[str, Callable[[Any, Any], bool]] = field(default_factory=dict)
    #: the fault kinds that speak to its nodes only (their hostile inputs): a scenario of
    #: another protocol's topology that names one is refused in one line
    fault_kinds: frozenset[str] = frozenset()
    #: the parameters of the catalogue's faults, as `kind.param`, that time or shape a
    #: fault by what only its nodes do (the seed's ledger flush): set to other than its
    #: default on a topology of another protocol, refused in one line
    fault_params: frozenset[str] = frozenset()
    #: the module that defines them for the catalogue (`FAULTS`, each a
    #: `bench.faults.spec.FaultKind` with its script); None: it has none of its own
    faults: str | None = None
    #: the module that reads its topology table (`read(raw, where, table)`: Topology
    #: fields) and checks each node (`check_node(table, unit, agents, pool)`); None: no
    #: settings of its own
    settings: str | None = None
    #: the module of its checkers (`CHECKERS`, a tuple of `bench.checks.Checker`, each of
    #: whose `protocols` names it; and, optionally, `SITUATIONS` for the coverage table);
    #: None: only the generic checkers judge its runs
    checkers: str | None = None
    #: the module of its wire parser: `read(topic, payload) -> dict | None`, what the wire
    #: tap records of a PUBLISH's payload in `wire.body` (its own parser, never a node's
    #: decoder); None: the tap reads the payload as the shipped protocols' envelopes
    wire: str | None = None
    #: the module of what its nodes print as they come up: `startup_lines(events, node)`
    #: (from the events recorded of the node, as JSON) and `LINES`, how many a node that
    #: came up prints at least; a live deployment waits for them (every protocol that runs
    #: live has one: bench/core/startup.py's `last` reads the events)
    startup: str | None = None
    #: the module of its conform kit (docs/protocols/new-protocol.md, "conform"): `ROLES`
    #: (what CMD may play, the default first); `SUITE`, its (scenario, seconds, what) runs
    #: (`SUITES`: a role's own, by role); `binding(role)`, the rules that judge the role (each
    #: a `ConformRule`, or a record of `id`, `text`, `judged_by`, `where`, `exercised` and
    #: `level`); `BROKER`; `SETUP`, where CMD runs, `{role}` filled in (`SETUPS`: by role);
    #: `DOCUMENT` (and `COMMIT`) its clauses come from; `HELP` and `EXAMPLES`, conform
    #: --help's paragraph and lines. Optionally, for a clause table beside its rules:
    #: `TABLE` (`TableClause`s: a clause of a role that no rule judges is a row too, saying
    #: why as `unjudged(role)` has it), `LEVELS` (what --level filters and a report groups
    #: by, in order) and `DECLARATIONS` (`Declaration`s: what an implementation may declare
    #: it leaves out, conform's flags). None: conform has none for it
    conform: str | None = None
    #: the module that drafts random scenarios of it for `a2a-bench explore` (None: explore
    #: draws none, as for a protocol the simulator cannot run): `draw(rng, name, fault)`,
    #: the draft's scenario and topology tables, where `fault(kind, nodes, agents,
    #: duration_s, narrow=None)` draws one fault of the catalogue (`narrow(kind, choices)`
    #: narrows a list parameter's choices); `SHARE`, how often a draft is of it (the
    #: default protocol's drafts are what the others leave); optionally `shrinks(scenario,
    #: topology)`, the shrink steps only its drafts have: (what, edit(scenario, topology,
    #: drop_fault)), tried after explore's own
    explore: str | None = None
    #: the checkers of another protocol that judge its runs too (the seed's
    #: `duplicate_execution`: one execution per task, whatever carries it)
    shared_checkers: frozenset[str] = frozenset()
    #: the project's optional dependencies (pyproject.toml extras) that hold the
    #: implementations of it the bench judges: the docker image installs them
    extras: tuple[str, ...] = ()

    def module(self, part: str) -> Any:
        """The module one of its fields names (`deploy`, `settings`, `checkers`, `wire`,
        `startup`, `conform`, `faults`, `explore`), imported; None where it names none."""
        name = getattr(self, part)
        return None if name is None else importlib.import_module(name)

    @property
    def mqtt(self) -> MqttVersion:
        return self.mqtt_versions[0]

    @property
    def mqtt_fixed(self) -> bool:
        """Whether it runs on one MQTT version only (no `--mqtt` may change it)."""
        return len(self.mqtt_versions) == 1


@cache
def protocols() -> dict[str, ProtocolSpec]:
    """Every protocol under bench/protocols/, by name."""
    found: dict[str, ProtocolSpec] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{info.name}"), "SPEC", None)
        if isinstance(spec, ProtocolSpec):
            found[spec.name] = spec
    return found


def protocol(name: str, where: str = "protocol") -> ProtocolSpec:
    """The protocol called `name`; SpecError naming `where` and the known ones if none is."""
    known = protocols()
    if name not in known:
        raise SpecError(f"{where}={name!r}: expected one of {sorted(known)}")
    return known[name]


def owner_of_role(role: str) -> ProtocolSpec | None:
    """The protocol whose own name for a role `role` is (requester, responder, ...)."""
    return next((p for p in protocols().values() if role in p.roles), None)


def owner_of_key(key: str, *, section: bool = False, top: bool = False) -> ProtocolSpec | None:
    """The protocol whose node key (`section`: topology table; `top`: top-level topology
    key) `key` is."""
    if section:
        return next((p for p in protocols().values() if p.section == key), None)
    return next((p for p in protocols().values()
                 if key in (p.topology_keys if top else p.node_keys)), None)


def owner_of_fault(kind: str) -> ProtocolSpec | None:
    """The protocol whose nodes fault kind `kind` speaks to only (None: any protocol's)."""
    return next((p for p in protocols().values() if kind in p.fault_kinds), None)


def conform_kits() -> list[tuple[ProtocolSpec, Any]]:
    """Every protocol that carries a conform kit, with the kit (imported): the default
    protocol first, then the others in their order."""
    specs = sorted(protocols().values(), key=lambda p: p.name != DEFAULT)
    return [(spec, kit) for spec in specs if (kit := spec.module("conform")) is not None]


def owners_of_workload_key(key: str) -> list[ProtocolSpec]:
    """The protocols whose workload key `key` is (a key two share is listed by both)."""
    return [p for p in protocols().values() if key in p.workload_keys]


def owners_of_fault_param(kind: str, param: str) -> list[ProtocolSpec]:
    """The protocols whose nodes alone parameter `param` of fault kind `kind` times or shapes
    the fault by (`ProtocolSpec.fault_params`); none: any protocol's."""
    return [p for p in protocols().values() if f"{kind}.{param}" in p.fault_params]


# -- what a conform kit is made of (`ProtocolSpec.conform`) -----------------------------------
@dataclass(frozen=True, slots=True)
class ConformRule:
    """One row of a conform report that rules of the bench judge: the clauses it is about,
    the checker rules that judge them, and the runs of the suite that put a node there."""

    ids: str            # the clause ids, comma-separated; the first the row's own
    what: str
    judged_by: tuple[str, ...]   # checker.rule
    #: the runs of the suite that put the node in the rule's situation: it PASSes only if
    #: each of them judged it (a restart rule is not passed by a run with no restart), and
    #: FAILs on a violation in any run
    where: tuple[str, ...]
    #: a count its checker keeps that must be above 0 in some run for the row to PASS: a
    #: clause that binds only when the node does something ("if set") was not exercised
    #: by a node that never did (UNKNOWN, saying so; None: every judged run exercises it)
    exercised: str | None = None
    #: runs that each put the node in the rule's situation in their own way, of which one
    #: judging it is enough (a pool that cannot form on the suite's broker is judged in
    #: another pool run): a violation in any FAILs; one that could not decide is named in
    #: the evidence of a row that PASSes on another, and leaves it UNKNOWN when none could
    one_of: tuple[str, ...] = ()
    #: its first clause's RFC 2119 level (None: a protocol without levels; it counts as a
    #: MUST)
    level: str | None = None

    @property
    def runs(self) -> tuple[str, ...]:
        """Every run that judges the rule: `where`, then `one_of`."""
        return (*self.where, *self.one_of)


@dataclass(frozen=True, slots=True)
class TableClause:
    """One clause of a protocol's table, as a conform report shows it: a row of its own for
    a role it binds when no rule judges it, and what compatibility.json says of it."""

    id: str
    text: str
    level: str                     # one of the kit's LEVELS
    binds: frozenset[str]          # the roles of the kit's ROLES that keep it
    conformance: str | None = None   # the conformance level it belongs to (Core, Extended)
    section: str | None = None       # where in the document it is


@dataclass(frozen=True, slots=True)
class Declaration:
    """What an implementation may declare it leaves out (`conform --NAME`, `grid --declare
    X=NAME`): the runs of the suite it skips, and the clauses then not applicable to it
    (UNKNOWN, and no failure of it), each row saying why."""

    name: str                      # the flag, less its dashes
    help: str                      # what the flag's help says after the protocol's name
    why: str                       # what a row not applicable says after "not applicable: "
    clauses: frozenset[str]        # the clause ids it makes not applicable
    runs: frozenset[str] = frozenset()   # the runs of the suite it skips
    #: what a row its rules judge adds after `why` (`{id}`: the row's first clause)
    of_rule: str = ""
