"""`conform`: anyone's node judged against docs/PROTOCOL.md, rule by rule; with
`--profile a2a-mqtt`, anyone's A2A-over-MQTT responder against the profile's clauses."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
    command_line,
    out_folder,
    unknown_run,
)
from bench.protocols import protocols

if TYPE_CHECKING:
    from bench.grid import Impl


def _kits(with_spec: bool = False) -> list[Any]:
    """The conform kits protocols carry of their own (`ProtocolSpec.conform`), for the help;
    with their specs, `with_spec`."""
    found = [(spec, kit) for spec in protocols().values()
             if (kit := spec.module("conform")) is not None]
    return found if with_spec else [kit for _spec, kit in found]


def add_conform(sub: Sub) -> None:
    cf = sub.add_parser(
        "conform", help="judge anyone's node against its protocol, rule by rule",
        description="Start CMD as every executor of a star beside the reference orchestrator,\n"
                    "on the embedded broker and behind the wire tap, through a short run of each\n"
                    "situation the protocol's rules are about (streamed tasks, malformed and\n"
                    "forged input, QoS1 redelivery, a restart, a missing replyNodeId, an emptied\n"
                    "roster), then print each rule of docs/PROTOCOL.md as PASS, FAIL or UNKNOWN\n"
                    "with its evidence. About 2 minutes.\n"
                    "\n"
                    "--profile a2a-mqtt: CMD as every responder of an A2A-over-MQTT topology,\n"
                    "the reference requester in front, on Mosquitto, through a short run of each\n"
                    "situation of the profile (requests, SIGKILL and SIGTERM restarts, properties\n"
                    "tampered with, malformed input, a pool, multi-turn, bearer tokens over TLS,\n"
                    "a handover; each named as it runs); one row per clause of\n"
                    "docs/profiles/a2a-mqtt.md that binds a responder, grouped MUST / SHOULD /\n"
                    "MAY. The agent contract: docs/profiles/own-agent.md. About 5 minutes.\n"
                    "--role requester: CMD as the requester instead, in front of the reference\n"
                    "responders (the clauses that bind a requester; about 2 minutes).\n\n"
                    + "".join(f"{kit.HELP}\n\n" for kit in _kits()) +
                    "exit codes: 0 every row PASS (or not applicable: a part the node declares\n"
                    "it leaves out), 1 a MUST FAILs (or a SHOULD, with --strict), 2 no such\n"
                    "FAIL but some row UNKNOWN, 3 invalid arguments",
        epilog="besides the table, the run's folder holds compatibility.json (per row: level,\n"
               "status, evidence, the run and seed, the command that runs it again; schema:\n"
               "docs/schemas/compatibility.schema.json), junit.xml for CI (schema:\n"
               "docs/schemas/junit.xsd) and conform.html.\n\n"
               "example: a2a-bench conform ./my-node\n"
               "         a2a-bench conform './my-node --verbose'   (one argument: quote it)\n"
               "         a2a-bench conform --profile a2a-mqtt 'python examples/a2a-responder/responder.py'\n"
               "         a2a-bench conform --profile a2a-mqtt --level must --core ./my-agent\n"
               "         a2a-bench conform --profile a2a-mqtt --role requester "
               "'python examples/a2a-requester/requester.py'\n"
               "         a2a-bench conform --profile a2a-mqtt --image my-agent:1.2   "
               "(its containers)"
               + "".join(f"\n         {kit.EXAMPLE}" for kit in _kits()))
    cf.add_argument("cmd", metavar="CMD", nargs="?", default=None,
                    help="the node's command line (one argument; quote it)")
    cf.add_argument("--image", default=None, metavar="IMAGE",
                    help="instead of CMD: the node as a container of IMAGE, built beforehand "
                         "(docker build), its entrypoint speaking the node-process protocol "
                         "on stdin and stdout (docs/PROTOCOL.md); the runs use --mode docker")
    cf.add_argument("--protocol", "--profile", dest="profile",
                    choices=sorted(protocols()), default="seed",
                    help="the protocol: the seed documents' (CMD as executors, default), "
                         "A2A over MQTT (CMD as responders)"
                         + "".join(f", {spec.title} (CMD as its {kit.ROLES[0]}s)"
                                   for spec, kit in _kits(with_spec=True)))
    cf.add_argument("--role", choices=sorted({r for p in protocols().values() for r in p.roles}),
                    default=None,
                    help="what CMD plays — a2a-mqtt: every responder, behind the reference "
                         "requester (default), or the requester, in front of the reference "
                         "responders"
                         + "".join(f"; {spec.name}: every {' or every '.join(kit.ROLES)} (the "
                                   "first the default)" for spec, kit in _kits(with_spec=True)))
    cf.add_argument("--broker", choices=["amqtt", "mosquitto"], default=None,
                    help="the embedded broker to run on (default: amqtt; mosquitto for "
                         "a2a-mqtt, which needs MQTT 5)")
    cf.add_argument("--level", choices=["must", "should", "may"], default="may",
                    help="a2a-mqtt: the clauses down to this level (must: MUST and MUST NOT "
                         "only; default: every level)")
    cf.add_argument("--core", action="store_true",
                    help="a2a-mqtt: the agent declares core conformance only: Extended "
                         "clauses (pools, handover, ...) are not applicable")
    cf.add_argument("--no-tokens", action="store_true",
                    help="a2a-mqtt: the agent declares it handles no OAuth bearer tokens (it "
                         "neither requires nor sends them): the a2a_oauth run is skipped and "
                         "its clauses (A2M-REQ-5, -RSP-6, -RSP-7, -SESS-6) are not applicable")
    cf.add_argument("--strict", action="store_true",
                    help="a SHOULD that FAILs fails the run too (exit 1); without it a SHOULD "
                         "that fails is reported and only a MUST fails the run")
    cf.add_argument("--only", action="append", default=[], metavar="RUN",
                    help="only this run of the suite (repeatable): a row's replay, as "
                         "compatibility.json gives it")
    cf.add_argument("--impl-version", default=None, metavar="TEXT",
                    help="the implementation's version, for the report (e.g. "
                         "'a2a-over-mqtt 0.1.0')")
    cf.add_argument("--out", type=Path, default=None,
                    help="where the runs go (default: results/conform-<utc time>)")
    cf.add_argument("--json", action="store_true", help="print the rows as JSON")
    cf.set_defaults(handler=_conform)


def _conform(args: argparse.Namespace) -> int:
    from bench.certify import Meta, exit_code, fails, write
    from bench.conform import PROFILES, TOKEN_RUNS, conform, render
    if (args.cmd is None) == (args.image is None):
        print("a2a-bench: conform: expected the node's command line (CMD) or --image IMAGE, "
              "one of the two", file=sys.stderr)
        return EXIT_INVALID
    argv = () if args.cmd is None else command_line(args.cmd, f"conform {args.cmd!r}")
    if argv is None:
        return EXIT_INVALID
    key = args.profile if args.role in (None, PROFILES[args.profile].role) \
        else f"{args.profile}/{args.role}"
    if key not in PROFILES:
        roles = sorted(p.role for p in PROFILES.values() if p.name == args.profile)
        print(f"a2a-bench: conform --protocol {args.profile} --role {args.role}: its CMD "
              f"plays {' or '.join(roles)}", file=sys.stderr)
        return EXIT_INVALID
    profile = PROFILES[key]
    broker = args.broker or profile.broker
    if args.profile == "a2a-mqtt" and broker == "amqtt":
        print("a2a-bench: conform --profile a2a-mqtt --broker amqtt: the profile speaks MQTT 5 "
              "and amqtt 3.1.1 only; use --broker mosquitto", file=sys.stderr)
        return EXIT_INVALID
    if args.profile != "a2a-mqtt" and (args.level != "may" or args.core or args.no_tokens):
        print("a2a-bench: conform: --level, --core and --no-tokens are the a2a-mqtt profile's "
              "(--protocol a2a-mqtt)", file=sys.stderr)
        return EXIT_INVALID
    if unknown_run(args.only, [name for name, _s, _w in profile.suite], "conform"):
        return EXIT_INVALID
    if args.image:   # as `run --mode docker` refuses a topology's image it cannot start
        from bench.spec.scenario import SCENARIOS, load_scenario
        from bench.substrates import Choice, substrate
        first = load_scenario(SCENARIOS / f"{profile.suite[0][0]}.toml") \
            .with_node_image(profile.role, args.image)
        refusal = substrate("docker").refusal(first, Choice(broker=broker))
        if refusal is not None:
            print(f"a2a-bench: conform --image: {refusal}", file=sys.stderr)
            return EXIT_INVALID
    out = out_folder(args.out, "conform")
    if out is None:
        return EXIT_INVALID
    if not args.json:
        where = profile.setup or (
            "every executor of a star, beside the reference orchestrator"
            if args.profile == "seed" else
            "the requester of an A2A-over-MQTT pair, in front of the reference responders"
            if args.role == "requester" else
            "every responder of an A2A-over-MQTT pair, behind the reference requester")
        runs = sum(1 for name, _s, _w in profile.suite
                   if not (args.no_tokens and name in TOKEN_RUNS)
                   and (not args.only or name in args.only))
        shown = f"--image {args.image}" if args.image else shlex.join(argv)
        print(f"conform {shown}: {where}, on {broker}"
              f"{' (its containers: --mode docker)' if args.image else ''}; {runs} short "
              f"run{'s' if runs != 1 else ''} into {out}/")
    rows = conform(argv, out, broker, say=(lambda line: None) if args.json else print,
                   profile=key, core_only=args.core, no_tokens=args.no_tokens,
                   only=tuple(args.only), image=args.image)
    levels = {"must": ("MUST", "MUST NOT"), "should": ("MUST", "MUST NOT", "SHOULD"),
              "may": ("MUST", "MUST NOT", "SHOULD", "MAY")}[args.level]
    rows = [r for r in rows if r.level is None or r.level in levels]
    meta = Meta(tuple(argv), args.profile, profile.role, broker, out,
                json.loads((out / "conform.json").read_text())["seeds"],
                args.impl_version, args.strict, args.level, args.image)
    written = write(rows, meta)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        print(render(rows))
        failing = [r for r in rows if fails(r, args.strict)]
        kept_back = [r for r in rows if r.status == "FAIL" and not fails(r, args.strict)]
        if kept_back:
            print(f"{len(kept_back)} SHOULD not kept: reported, not failing the run "
                  "(--strict fails it)")
        if failing:
            print(f"fails the run: {', '.join(r.rule.ids for r in failing)}")
        print(f"report: {', '.join(str(p) for p in written)}")
    # a part the node declares it leaves out is UNKNOWN in the table, as a run says it,
    # and no more a failure of the node than in a run
    return {1: EXIT_FALSE, 2: EXIT_UNKNOWN, 0: EXIT_OK}[exit_code(rows, args.strict)]


def add_grid(sub: Sub) -> None:
    gr = sub.add_parser(
        "grid", help="A2A over MQTT: conform per broker x responder x requester",
        description="Brokers x responders x requesters, each cell the conform suites of both\n"
                    "roles run once with that responder as every responder and that requester in\n"
                    "front (the reference for a side not given), judged per role as conform\n"
                    "judges (a violation counts against the side its counterexample is about).\n"
                    "A cell makes each run of both suites once; --only keeps some.\n\n"
                    "exit codes: 0 every cell's every clause PASS, 1 a MUST FAILs in some cell,\n"
                    "2 no such FAIL but some clause UNKNOWN, 3 invalid arguments",
        epilog="the folder holds grid.json (per cell: each role's counts, exit code, failed\n"
               "clauses, and its compatibility.json), grid.md and grid.html; each cell's folder\n"
               "its runs and, per role, compatibility.json, junit.xml and conform.html.\n\n"
               "example: a2a-bench grid --responder 'sdk=python examples/emqx-sdk/responder.py'"
               " \\\n"
               "             --requester 'sdk=python examples/emqx-sdk/requester.py' \\\n"
               "             --declare sdk=no-tokens --impl-version 'sdk=a2a-over-mqtt 0.1.0'\n"
               "         a2a-bench grid --responder 'mine=./my-agent' --only a2a_quickstart")
    gr.add_argument("--responder", action="append", default=[], metavar="NAME=CMD",
                    help="a responder besides the reference: its name in the grid, then its "
                         "command line (repeatable)")
    gr.add_argument("--requester", action="append", default=[], metavar="NAME=CMD",
                    help="a requester besides the reference (repeatable)")
    gr.add_argument("--broker", action="append", default=[], choices=["amqtt", "mosquitto"],
                    help="a broker to run every cell on (repeatable; default: every embedded "
                         "broker that speaks MQTT 5)")
    gr.add_argument("--no-reference", action="store_true",
                    help="leave the reference out of the sides given implementations")
    gr.add_argument("--declare", action="append", default=[], metavar="NAME=WHAT",
                    help="what the implementation NAME leaves out, as conform's flags say it: "
                         "core (no Extended clause), no-tokens (no bearer tokens), or both "
                         "(core,no-tokens); those clauses are then not applicable to it "
                         "(repeatable)")
    gr.add_argument("--impl-version", action="append", default=[], metavar="NAME=VERSION",
                    help="the version of implementation NAME, for its reports (repeatable)")
    gr.add_argument("--only", action="append", default=[], metavar="RUN",
                    help="only this run of the suites (repeatable)")
    gr.add_argument("--out", type=Path, default=None,
                    help="where the cells go (default: results/grid-<utc time>)")
    gr.add_argument("--json", action="store_true", help="print grid.json")
    gr.set_defaults(handler=_grid)


def _impls(given: list[str], flag: str, reference: bool) -> tuple[Impl, ...] | None:
    from bench.grid import REFERENCE, Impl
    impls = [Impl(REFERENCE)] if reference or not given else []
    for text in given:
        name, eq, cmd = text.partition("=")
        if not eq or not name or any(c in name for c in "/ ") or name == REFERENCE:
            print(f"a2a-bench: grid {flag} {text!r}: expected NAME=CMD, a name of its own "
                  f"(no '/' or space, not {REFERENCE!r}) then the command line",
                  file=sys.stderr)
            return None
        argv = command_line(cmd, f"grid {flag} {name}=…")
        if argv is None:
            return None
        if name in {i.name for i in impls}:
            print(f"a2a-bench: grid {flag} {name}=…: that name is given twice", file=sys.stderr)
            return None
        impls.append(Impl(name, argv))
    return tuple(impls)


def _declared(responders: tuple[Impl, ...], requesters: tuple[Impl, ...],
              declare: list[str], versions: list[str]
              ) -> tuple[tuple[Impl, ...], tuple[Impl, ...]] | None:
    """The implementations with what --declare and --impl-version say of each, by name."""
    from dataclasses import replace

    from bench.grid import DECLARATIONS
    names = {i.name for i in (*responders, *requesters) if i.command}
    said: dict[str, dict[str, Any]] = {}
    for flag, given in (("--declare", declare), ("--impl-version", versions)):
        for text in given:
            name, eq, what = text.partition("=")
            if not eq or name not in names:
                print(f"a2a-bench: grid {flag} {text!r}: expected NAME=…, NAME one of the "
                      f"implementations given ({', '.join(sorted(names)) or 'none'})",
                      file=sys.stderr)
                return None
            if flag == "--impl-version":
                said.setdefault(name, {})["version"] = what
                continue
            parts = {p.strip() for p in what.split(",")}
            if not parts <= set(DECLARATIONS):
                print(f"a2a-bench: grid --declare {text!r}: expected "
                      f"{' or '.join(DECLARATIONS)} (comma-separated), not "
                      f"{', '.join(sorted(parts - set(DECLARATIONS)))}", file=sys.stderr)
                return None
            said.setdefault(name, {}).setdefault("declares", frozenset())
            said[name]["declares"] |= parts
    return (tuple(replace(i, **said.get(i.name, {})) for i in responders),
            tuple(replace(i, **said.get(i.name, {})) for i in requesters))


def _grid(args: argparse.Namespace) -> int:
    from bench.grid import grid, mqtt5_brokers, render, suite, to_json
    responders = _impls(args.responder, "--responder", not args.no_reference)
    requesters = _impls(args.requester, "--requester", not args.no_reference)
    if responders is None or requesters is None:
        return EXIT_INVALID
    sides = _declared(responders, requesters, args.declare, args.impl_version)
    if sides is None:
        return EXIT_INVALID
    responders, requesters = sides
    brokers = tuple(dict.fromkeys(args.broker)) or mqtt5_brokers()
    if "amqtt" in brokers:
        print("a2a-bench: grid --broker amqtt: the profile speaks MQTT 5 and amqtt 3.1.1 "
              "only; use --broker mosquitto", file=sys.stderr)
        return EXIT_INVALID
    if unknown_run(args.only, [name for name, _s, _w in suite()], "grid", suites=True):
        return EXIT_INVALID
    out = out_folder(args.out, "grid")
    if out is None:
        return EXIT_INVALID
    cells_n = len(brokers) * len(responders) * len(requesters)
    say = (lambda line: None) if args.json else print
    say(f"grid: {cells_n} cell{'s' if cells_n != 1 else ''} ({len(brokers)} broker x "
        f"{len(responders)} responder x {len(requesters)} requester), "
        f"{len(suite(tuple(args.only)))} runs each, into {out}/")
    cells = grid(brokers, responders, requesters, out, tuple(args.only), say)
    if args.json:
        print(json.dumps(to_json(cells), indent=2))
    else:
        print(render(cells))
        print(f"report: {out / 'grid.html'}, {out / 'grid.json'}")
    codes = {c.exit_code(role) for c in cells for role in ("responder", "requester")}
    return EXIT_FALSE if 1 in codes else EXIT_UNKNOWN if 2 in codes else EXIT_OK
