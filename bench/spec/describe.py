"""`a2a-bench validate` and `a2a-bench describe`: the input files and the catalogue, read
without running anything.

`validate FILE...` loads each scenario, topology or matrix file as a run would (a scenario
with its topology) and says what it found, or the one-line error naming file and key.
`describe NAME` prints everything about one scenario, topology, matrix, fault kind,
checker or variant — `list` shows one line of each.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path

from bench.spec.scenario import (
    SCENARIOS,
    TOPOLOGIES,
    Scenario,
    load_scenario,
    load_topology,
    read_toml,
)
from bench.spec.topology import LinkSpec


def validate(path: Path, known_checks: Mapping[str, frozenset[str]]) -> str:
    """One line on what the file holds; SpecError (naming file and key) if it is wrong."""
    if path.name.endswith(".matrix.toml"):
        from bench.matrix import load_matrix
        matrix = load_matrix(path)
        return f"{path}: matrix {matrix.name!r}, {len(matrix.cells)} cells"
    raw = read_toml(path)
    if "nodes" in raw:
        t = load_topology(path)
        return (f"{path}: topology {t.name!r}, {len(t.nodes)} nodes, broker model "
                f"{t.broker.value}")
    s = load_scenario(path, known_checks=known_checks)
    return (f"{path}: scenario {s.name!r} on topology {s.topology.name!r} "
            f"({len(s.topology.nodes)} nodes), {s.duration_ms / 1000:g} s, "
            f"{len(s.faults)} fault(s), mode {s.mode.value}")


def describe(name: str) -> str | None:
    """Everything about the things called `name` (a scenario and a fault kind may share
    one), or None if nothing is."""
    finders: tuple[Callable[[str], str | None], ...] = (
        _scenario, _matrix, _topology, _fault, _checker, _variant)
    if name.endswith(".toml") and Path(name).is_file():   # a file is one thing: which, it says
        finders = (_matrix,) if name.endswith(".matrix.toml") else \
            (_topology,) if "nodes" in _raw(Path(name)) else (_scenario,)
    found = [text for finder in finders if (text := finder(name)) is not None]
    return "\n\n".join(found) if found else None


def names() -> list[str]:
    """Everything `describe` knows by name: what `a2a-bench list` shows a line of."""
    from bench.checks import checkers
    from bench.faults import CATALOGUE
    from bench.spec.scenario import SCENARIOS, TOPOLOGIES
    from bench.variants import VARIANTS
    found = [p.name.removesuffix(".matrix.toml") if p.name.endswith(".matrix.toml") else p.stem
             for folder in (SCENARIOS, TOPOLOGIES) for p in folder.glob("*.toml")]
    return sorted({*found, *CATALOGUE, *checkers(), *VARIANTS})


def _raw(path: Path) -> dict[str, object]:
    return read_toml(path)


def _wrap(text: str, indent: str = "  ", width: int = 92) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(" ".join(text.split()), width, initial_indent=indent,
                                   subsequent_indent=indent)) or indent.rstrip()


def _file(name: str, folder: Path, suffix: str = ".toml") -> Path | None:
    path = Path(name) if name.endswith(".toml") else folder / f"{name}{suffix}"
    if not path.is_file():
        return None
    with contextlib.suppress(ValueError):
        return path.resolve().relative_to(Path.cwd())
    return path


def _scenario(name: str) -> str | None:
    path = _file(name, SCENARIOS)
    if path is None or path.name.endswith(".matrix.toml"):
        return None
    from bench.checks import checkers_for, judging
    from bench.protocols import protocol
    s = load_scenario(path, known_checks=judging())
    auth = f", auth {s.auth.mode.value} (signature v{s.auth.signature.value})" \
        if protocol(s.topology.protocol).envelope_auth else ""
    out = [f"scenario {s.name} ({path})", _wrap(s.description),
           f"  topology {s.topology.name} ({len(s.topology.nodes)} nodes: "
           f"{', '.join(n.id for n in s.topology.nodes)}), broker model "
           f"{s.topology.broker.value}",
           f"  {s.duration_ms / 1000:g} s + drain {s.drain_ms / 1000:g} s, seed {s.seed}, "
           f"mode {s.mode.value}{auth}",
           f"  workload: {s.workload.rate_per_s:g} requests/s"]
    for f in s.faults:
        until = "the end" if f.duration_ms is None else f"{(f.at_ms + f.duration_ms) / 1000:g} s"
        params = ", ".join(f"{k}={v!r}" for k, v in f.plain_params().items())
        out.append(f"  faults[{f.index}] {f.kind} from {f.at_ms / 1000:g} s to {until}: {params}")
    expect = ", ".join(f"{k} {v.upper()}" for k, v in sorted(s.expect.items())) or \
        "every verdict TRUE"
    # (what a run expects besides: a checker that judges only tapped wires is UNKNOWN, and
    # expected so, where no node was behind a tap — checks.not_applicable)
    wire = sorted(k for k, c in checkers_for(s.topology.protocol).items()
                  if c.needs == "wire" and k not in s.expect)
    if wire:
        expect += f"; {', '.join(wire)} UNKNOWN where no node is behind a wire tap"
    out.append(f"  expects: {expect}")
    for broker, differs in sorted(s.expect_by_broker.items()):
        gaps = s.unmodelled.get(broker, {})
        out.append(f"  on {broker} (live, and simulated with its model): " + ", ".join(
            f"{k} {v.upper()}" + (" (live only)" if k in gaps else "")
            for k, v in sorted(differs.items())))
        out += [f"    simulated, {k} is expected as without [expect.{broker}]: the model does "
                f"not show it: {why}" for k, why in sorted(gaps.items())]
    if s.sim_only:
        out.append(f"  simulation only: {s.sim_only}")
    out.append(f"  run: {_run_line(s, path)}")
    return "\n".join(out)


def _run_line(s: Scenario, path: Path) -> str:
    """How to run `s`: on its own mode (the default) if that substrate takes it, else on the
    first that does; then the other substrates that take it, each as it offers itself."""
    from bench.substrates import Choice, Mode, substrate
    takes = [m for m in Mode if substrate(m).refusal(s, Choice()) is None]
    if not takes:
        return f"a2a-bench run {path}   (no substrate runs it without flags: see --help)"
    first = s.mode if s.mode in takes else takes[0]
    line = f"a2a-bench run {path}" + ("" if first is s.mode else f" --mode {first.value}")
    others = [substrate(m).offer for m in takes if m is not first]
    if not others:     # the one place it runs: the refusals say why the others do not
        return line + "   (the one substrate that runs it: another --mode says why not)"
    return line + f"   ({'; '.join(others)})"


def _matrix(name: str) -> str | None:
    path = _file(name, SCENARIOS, ".matrix.toml")
    if path is None or not path.name.endswith(".matrix.toml"):
        return None
    from bench.matrix import load_matrix
    m = load_matrix(path)
    raw = read_toml(path)
    return "\n".join([f"matrix {m.name} ({path}), {len(m.cells)} cells",
                      _wrap(str(raw.get("description", ""))),
                      f"  run: a2a-bench matrix {path} -j 2"])


def _topology(name: str) -> str | None:
    path = _file(name, TOPOLOGIES)
    if path is None:
        return None
    t = load_topology(path)
    raw = read_toml(path)
    out = [f"topology {t.name} ({path}), broker model {t.broker.value}",
           _wrap(str(raw.get("description", ""))),
           _wrap(f"links, simulated: {_link(t.link)} (live, docker and hosts runs use the "
                 "network they run on; a scenario's link faults shape it)")]
    for n in t.nodes:
        own = f"; link {_link(n.link)}" if n.link is not None else ""
        out.append(f"  {n.id:<14} {n.role:<13} namespace {n.namespace:<8} agents "
                   f"{', '.join(n.agents) or '(none)'}{own}")
    return "\n".join(line for line in out if line)


def _link(link: LinkSpec) -> str:
    """A link as `describe` says it: "latency uniform 0.5–3 ms, loss 0.01"."""
    d = link.latency_ms
    latency = {"fixed": lambda p: f"{p[0]:g} ms",
               "uniform": lambda p: f"uniform {p[0]:g}–{p[1]:g} ms",
               "exponential": lambda p: f"exponential, mean {p[0]:g} ms",
               "lognormal": lambda p: f"lognormal, median {p[0]:g} ms, sigma {p[1]:g}"}[d.kind]
    return f"latency {latency(d.params)}" + (f", loss {link.loss:g}" if link.loss else "")


def _fault(name: str) -> str | None:
    from bench.faults import CATALOGUE
    kind = CATALOGUE.get(name)
    if kind is None:
        return None
    out = [f"fault {kind.name}", _wrap(kind.summary)]
    for pname, prm in kind.params.items():
        req = "required" if prm.required else f"default {prm.default!r}"
        out.append(f"  {pname} ({prm.kind}, {req}): {prm.help}")
    return "\n".join(out)


def _checker(name: str) -> str | None:
    from bench.checks import checkers
    checker = checkers().get(name)
    if checker is None:
        return None
    out = [f"checker {checker.name}", _wrap(checker.summary)]
    for r in checker.rules:
        out += [f"  rule {r.id} ({r.cites})", _wrap(r.definition, "      ")]
    return "\n".join(out)


def _variant(name: str) -> str | None:
    from bench.variants import VARIANTS
    v = VARIANTS.get(name)
    if v is None:
        return None
    caught = "" if v.name == "reference" else (
        f"\n  caught by {v.caught_by} in scenario {v.scenario}: "
        f"a2a-bench run {v.scenario} --variant {v.name}")
    return f"variant {v.name} ({v.seed_ref})\n{_wrap(v.summary)}{caught}"
