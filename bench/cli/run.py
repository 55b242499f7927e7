"""Running one scenario (`run`) and judging a stored run again (`check`)."""
from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_INVALID,
    EXIT_UNKNOWN,
    Sub,
    command_line,
    out_folder,
)

if TYPE_CHECKING:
    from bench.run import Interrupted, RunResult
    from bench.spec.scenario import Scenario
    from bench.substrates import Options
    from bench.substrates.descriptor import Substrate
    from bench.variants import Variant


def add_run(sub: Sub) -> None:
    run = sub.add_parser(
        "run", help="run a scenario, check its history, write `results/<run-id>/`",
        description="Run SCENARIO (a file, or a name in scenarios/) on its topology, inject its "
                    "faults, record one history, judge it with every checker, and write the "
                    "run folder: scenario.json, topology.json, history.jsonl, verdicts.json, "
                    "metrics.json, summary.json, report.md. The seed and the command that "
                    "replays the run are printed.",
        epilog="exit codes: 0 every verdict as its scenario expects (an UNKNOWN it expects "
               "included), 1 a verdict TRUE or FALSE other than expected (a FALSE; a defect's "
               "TRUE), 2 an UNKNOWN not expected or a harness error (an interrupted run: "
               "Ctrl-C, SIGTERM), 3 "
               "invalid input (a file, a key, an argument, a broker nobody answers at)\n\n"
               "examples:\n"
               "  a2a-bench run quickstart                          live on the embedded amqtt\n"
               "  a2a-bench run restart --mode sim --seed 7         simulated, another seed\n"
               "  a2a-bench run restart --broker mosquitto --nodes process\n"
               "  a2a-bench run quickstart --variant agent_id_as_node_id   a seeded defect\n"
               "  a2a-bench run a2a_restart --node-command \"responder=python my_agent.py\"")
    run.add_argument("scenario", help="scenario file or name (see `a2a-bench list`)")
    deployment_arguments(run)
    run.add_argument("--keep", action="store_true",
                     help="docker: leave the deployment up after the run — the broker "
                          "container (its port printed) and every node, restarted on its data "
                          "dir once judged, on the run's network — and print the command "
                          "that removes it. Later runs leave it alone")
    run.add_argument("--swarm", action="store_true",
                     help="docker: the run's network is an attachable overlay network of the "
                          "engine's swarm (docker swarm init first) instead of a bridge: "
                          "the network multi-host deployments use")
    run.add_argument("--out", type=Path, help="run folder (default results/<scenario>-<variant>-s<seed>-<utc>)")
    run.add_argument("--json", action="store_true", help="print the summary and verdicts as JSON")
    run.add_argument("--no-plots", action="store_true",
                     help="skip plots/ and report.html (report.md and the JSON files stay)")
    run.set_defaults(handler=_run)


def deployment_arguments(p: argparse.ArgumentParser) -> None:
    """The options that say what a run deploys, shared by `run` and `load`."""
    p.add_argument("--topology", help="topology file or name, replacing the scenario's")
    p.add_argument("--mode", choices=["live", "sim", "docker", "hosts"], default=None,
                   help="substrate: live (real broker and nodes), sim (simpy, virtual time), "
                        "docker (the broker and every node in containers on a network of "
                        "their own; needs a Docker Engine) or hosts (the broker and every "
                        "node on the hosts --hosts lists, started by SSH; link faults by "
                        "iptables and tc there); default: the scenario's mode key, else live")
    p.add_argument("--hosts", type=Path, metavar="FILE",
                   help="hosts: the inventory — the hosts, how the bench logs in to them, "
                        "which runs the broker and which each node (docs/hosts.md); docker: "
                        "the same, each host with its Docker Engine (docker = URL), the "
                        "containers placed across the engines of one swarm; "
                        "`python -m bench.tools.hosts up 3` makes three on this machine and "
                        "prints one")
    p.add_argument("--broker",
                   help="live: amqtt (embedded), mosquitto, or another broker the bench "
                        "starts and configures (moat-lib-mqtt, iotcore, rumqttd, rmqttd, "
                        "rabbitmq, ejabberd: docs/brokers/), mqtt://[user:password@]host[:port] "
                        "(1883 by default) or mqtts://… (default: the topology's [broker] "
                        "model; amqtt for a generic one). sim: the broker model, generic "
                        "(MQTT 3.1.1 as written), amqtt or mosquitto: the simulator then "
                        "does what that broker was measured to do (a2a-bench brokers)")
    p.add_argument("--broker-restart-command", metavar="CMD",
                   help="live, external broker: shell command the broker_restart fault runs")
    p.add_argument("--broker-ca", metavar="FILE",
                   help="live, mqtts:// broker: the CA certificate (PEM) to verify it by "
                        "(default: the system's CAs)")
    p.add_argument("--no-isolation", action="store_true",
                   help="live, external broker: keep the topology's client ids and the topic "
                        "prefix as they are (by default a run adds its run id to both and "
                        "clears its sessions and retained messages at the end, so runs on a "
                        "long-lived broker never see each other)")
    p.add_argument("--node-command", action="append", default=[], metavar="ROLE=CMD",
                   help="live: start every node of ROLE (orchestrator or executor, or a "
                        "protocol's own name for one: requester, commander, ...) with CMD "
                        "instead of the reference node — anyone's node speaking the "
                        "node-process protocol (docs/PROTOCOL.md), e.g. executor=./my-node "
                        "--flag; repeatable; such nodes run as processes (`python` or "
                        "`python3` is the bench's own interpreter). A topology names one per "
                        "node with command = [...]")
    p.add_argument("--node-image", action="append", default=[], metavar="ROLE=IMAGE",
                   help="docker: every node of ROLE a container of IMAGE (built beforehand: "
                        "docker build) instead of the reference node or the topology's "
                        "command, its entrypoint speaking the node-process protocol, e.g. "
                        "responder=my-agent:1.2 (examples/*/Dockerfile build such images); "
                        "repeatable. A topology names one per node with image = \"...\"")
    p.add_argument("--wire-tap", action="store_true",
                   help="live: record what crosses every node's connection (CONNECT, "
                        "SUBSCRIBE, PUBLISH, PUBACK) as `wire` events, read off the packets "
                        "by a proxy in front of it, and judge the wire_evidence checker from "
                        "them (nodes started by --node-command are always tapped)")
    p.add_argument("--nodes", choices=["inproc", "process"],
                   help="live: nodes on this process's event loop, or one OS process each")
    p.add_argument("--mqtt", choices=["3.1.1", "5"],
                   help="the MQTT version every client speaks (default: the scenario's mqtt "
                        "key, else its topology's [broker] mqtt, else 3.1.1). amqtt speaks "
                        "3.1.1 only: live, MQTT 5 runs on Mosquitto or a broker you name")
    p.add_argument("--seed", type=int, help="seed for every random draw (default: the scenario's)")
    p.add_argument("--variant", default="reference",
                   help="reference node or a seeded defect (see `a2a-bench list`)")


def add_check(sub: Sub) -> None:
    check = sub.add_parser("check", help="judge a stored run's history again",
                           description="Re-run every checker over RUN_DIR/history.jsonl and "
                                       "rewrite verdicts.json, metrics.json and report.md.")
    check.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                       help="a run folder (results/<run-id>/) holding history.jsonl and "
                            "scenario.json")
    check.add_argument("--json", action="store_true",
                       help="print the summary and the verdicts as one JSON object, not the "
                            "table")
    check.set_defaults(handler=_check)


@dataclass(frozen=True)
class Prepared:
    """What the deployment options came to: the scenario as it will run, and where."""

    scenario: Scenario
    chosen: Variant
    mode: str
    described: Substrate
    options: Options


def prepared(args: argparse.Namespace) -> Prepared | int:
    """The scenario and deployment `deployment_arguments` describe, or the exit code once
    the one line saying why not is printed."""
    from bench.checks import judging
    from bench.spec.distribution import SpecError
    from bench.spec.scenario import SCENARIOS, find, load_scenario
    from bench.substrates import Choice, substrate
    from bench.variants import variant

    try:
        path = find(args.scenario, SCENARIOS, "scenario")
        scenario = load_scenario(path, topology=args.topology, seed=args.seed,
                                 known_checks=judging(), mqtt=args.mqtt)
        chosen = variant(args.variant)
    except (SpecError, KeyError) as exc:
        print(f"a2a-bench: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return EXIT_INVALID
    mode = args.mode or scenario.mode
    for given in args.node_command:
        role, _, command = given.partition("=")
        argv = command_line(command, f"--node-command={given}", role)
        if argv is None:
            return EXIT_INVALID
        try:
            scenario = scenario.with_node_command(role, argv)
        except SpecError as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            return EXIT_INVALID
    for given in args.node_image:
        role, _, image = given.partition("=")
        try:
            if not role or not image.strip():
                raise SpecError(f"--node-image={given!r}: expected ROLE=IMAGE, e.g. "
                                "responder=my-agent:1.2")
            scenario = scenario.with_node_image(role, image, "--node-image")
        except SpecError as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            return EXIT_INVALID
    described = substrate(mode)
    choice = Choice(broker=args.broker, nodes=args.nodes, broker_ca=args.broker_ca,
                    restart_command=args.broker_restart_command,
                    no_isolation=args.no_isolation, keep=getattr(args, "keep", False),
                    swarm=getattr(args, "swarm", False),
                    wire_tap=args.wire_tap, node_commands=tuple(args.node_command),
                    node_images=tuple(args.node_image),
                    hosts=str(args.hosts) if args.hosts else None)
    from bench.substrates import variant_refusal
    refusal = described.refusal(scenario, choice) or variant_refusal(chosen, scenario)
    if refusal is not None:
        print(f"a2a-bench: {refusal}", file=sys.stderr)
        return EXIT_INVALID
    scenario, options = described.prepare(scenario, choice)
    return Prepared(scenario, chosen, mode, described, options)


def _run(args: argparse.Namespace) -> int:
    import signal

    from bench.report.progress import Status
    from bench.run import Interrupted, print_progress, run_scenario
    from bench.spec.topology import MqttVersion
    from bench.substrates import BrokerRefused, EnvironmentFailure
    from bench.substrates.live.brokers import BrokerError

    ready = prepared(args)
    if isinstance(ready, int):
        return ready
    scenario, chosen, mode, described, options = (ready.scenario, ready.chosen, ready.mode,
                                                  ready.described, ready.options)
    out = out_folder(args.out, f"{scenario.name}-{chosen.name}-s{scenario.seed}")
    if out is None:
        return EXIT_INVALID
    if not args.json:
        print(f"a2a-bench run {scenario.source}: topology {scenario.topology.name} "
              f"({len(scenario.topology.nodes)} nodes), variant {chosen.name}, "
              f"seed {scenario.seed}, {mode}" + described.header(scenario, options)
              + ("" if scenario.mqtt is MqttVersion.V311 else f", MQTT {scenario.mqtt}"))
        own: dict[str, list[str]] = {}
        for n in scenario.topology.nodes:
            if n.external:   # anyone's node: say so, or a user may think theirs never ran
                own.setdefault(shlex.join(n.command) if n.command else f"image {n.image}",
                               []).append(n.id)
        for how, ids in own.items():
            print(f"  {', '.join(ids)}: your node ({how}), not the reference; its agents "
                  "played by the bench, its wire tapped")

    def terminated(_signum: int, _frame: object) -> None:
        raise Interrupted("SIGTERM")
    signal.signal(signal.SIGTERM, terminated)   # as Ctrl-C: keep and judge what was recorded
    # a status line on a terminal; piped, the simulator's sparse progress lines, live nothing
    status = Status(sys.stderr, described.clock_word) \
        if sys.stderr.isatty() and not args.json else None
    progress = status.tick if status else None if args.json or described.wall_clock else \
        print_progress()
    try:
        try:
            result = run_scenario(
                scenario, chosen, out, topology_overridden=args.topology is not None,
                mode=mode, options=options, progress=progress,
                say=(lambda line: None) if args.json else
                (lambda line: print("  " + line, file=sys.stderr)),
                observe=status.observe if status else None)
        finally:
            if status:
                status.close()
    except Interrupted as exc:
        return _interrupted(exc, out)
    except KeyboardInterrupt:
        print("a2a-bench: interrupted before the run began", file=sys.stderr)
        return EXIT_UNKNOWN
    except BrokerError as exc:   # not started or not reached: nothing ran to be judged
        shutil.rmtree(out, ignore_errors=True)
        print(f"a2a-bench: broker: {exc}", file=sys.stderr)
        return EXIT_UNKNOWN
    except BrokerRefused as exc:   # the broker said no: this setup cannot run
        print(f"a2a-bench: broker {options.shown_broker}: {exc}; what "
              f"was recorded is in {out}/history.jsonl", file=sys.stderr)
        return EXIT_INVALID
    except EnvironmentFailure as exc:   # the environment's failure, said in one line
        print(f"a2a-bench: {exc}; what was recorded is in {out}/history.jsonl",
              file=sys.stderr)
        return EXIT_UNKNOWN
    except Exception:
        traceback.print_exc()
        print(f"a2a-bench: harness error; what was recorded is in {out}/history.jsonl",
              file=sys.stderr)
        return EXIT_UNKNOWN
    if not args.no_plots:
        from bench.report.html import write_run_report
        try:
            write_run_report(result.out_dir)
        except Exception:   # a plot must never cost the run its verdicts
            traceback.print_exc()
            print(f"a2a-bench: plots failed; the run's JSON and report.md are in {out}",
                  file=sys.stderr)
    _print_result(result, args.json)
    return result.exit_code


def _interrupted(exc: Interrupted, out: Path) -> int:
    """One line for a run stopped from outside: where, and what its partial history says."""
    result = exc.result
    if result is None:
        print(f"a2a-bench: interrupted ({exc.how}); what was recorded is in {out}/history.jsonl",
              file=sys.stderr)
        return EXIT_UNKNOWN
    stop = result.summary["interrupted"]
    tally = ", ".join(f"{n} {value}" for value, n in sorted(
        Counter(v.value.value.upper() for v in result.verdicts).items()))
    print(f"a2a-bench: interrupted ({exc.how}) at {stop['at_s']:.1f} s of {stop['planned_s']:.1f} s; "
          f"judged what it recorded ({tally}): {out}/report.md", file=sys.stderr)
    return result.exit_code


def _check(args: argparse.Namespace) -> int:
    from bench.run import rejudge
    for name in ("history.jsonl", "scenario.json"):
        if not (args.run_dir / name).exists():
            print(f"a2a-bench: {args.run_dir}: no {name} (is it a run folder?)", file=sys.stderr)
            return EXIT_INVALID
    try:
        result = rejudge(args.run_dir)
    except ValueError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    _print_result(result, args.json)
    return result.exit_code


def _print_result(result: RunResult, as_json: bool) -> None:
    from bench.checks import NOTHING, as_expected
    s, m = result.summary, result.metrics
    if as_json:
        print(json.dumps({"summary": s, "verdicts": [v.to_json() for v in result.verdicts],
                          "metrics": m}, indent=2))
        return
    from bench.report import text
    stop = s.get("interrupted")
    if stop:
        print(f"  interrupted ({stop['how']}) at {stop['at_s']:.1f} s of {stop['planned_s']:.1f} s: "
              "judged on what it recorded")
    print(f"  {s['events']} events; {text.clock(s)}")
    print(f"  requests {m['requests']}: {text.outcomes(m)}")
    if m["latency_ms"]["p50"] is not None:
        print(f"  latency ms {text.latency(m['latency_ms'])}; {text.duplicates(m)}")
    d = m["directory"]
    if d and d["full_after_ms"]["p50"] is not None:
        print(f"  directory: {text.directory(d)}")
    relay = m["relay"]
    if relay and relay["event_latency_ms"]["p50"] is not None:
        print(f"  relay: {text.relay(relay)}")
    gates = m["gates"]
    if gates and gates["round_trip_ms"]["p50"] is not None:
        print(f"  gates: {text.gates(gates)}")
    for o in m["broker_outages"] or []:
        print(f"  broker: {text.broker_outage(o)}")
    for w in m["wills_after_silence"] or []:
        print(f"  broker keepalive: {text.will_after_silence(w)}")
    print("  verdicts:")
    for v in result.verdicts:
        want = s["expect"].get(v.name, "true")
        flag = "" if as_expected(v.value.value, want) else f"   <-- expected {want}"
        print(f"    {v.name:<20} {v.value.value.upper():<8}{flag}".rstrip())
        for c in v.counterexamples[:3]:
            print(f"      {c['rule']}: seq {','.join(map(str, c['seq']))}: {c['why']}")
        if v.note and (v.value.value != "true" or v.note.startswith(NOTHING)):
            print(f"      note: {v.note.splitlines()[0]}")
    print(f"  seed {s['seed']}; replay: {s['replay']}")
    html = result.out_dir / "report.html"
    print(f"  results: {result.out_dir}/ (report.md" + (", report.html with plots)" if html.exists() else ")"))
