"""The `a2a-bench` command.

Exit codes (STYLE): 0 every verdict true, 1 some verdict false, 2 unknown or harness
error, 3 invalid input (bad arguments or files).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import traceback
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from bench import __version__
from bench.folders import FolderTaken, claim, claim_named, utc_stamp

if TYPE_CHECKING:
    from bench.run import Interrupted, RunResult

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3
#: How long `run` and `brokers` try to reach a broker named by URL before calling it wrong.

DESCRIPTION = """\
a2a-bench: find the failures of agent-to-agent systems over MQTT that only appear across
processes — a task executed twice after a QoS1 redelivery, a mute receiver with an empty
directory, a response that cannot find its way back, a "strict" mode that trusts claims.
"""

EPILOG = """\
examples:
  a2a-bench run scenarios/quickstart.toml             live on the embedded broker, check, report
  a2a-bench run quickstart --mode sim                 the same in simulation (virtual time, seeded)
  a2a-bench run restart --nodes process --broker mosquitto
                                                     one OS process per node, SIGKILL restarts
  a2a-bench run qos1_redelivery --variant memory_dedup_60s
                                                     the same scenario against a seeded defect
  a2a-bench run restart --mode sim --seed 7          replay any run with its printed seed
  a2a-bench run partition --mode sim --broker mosquitto
                                                     simulate what Mosquitto would do
  a2a-bench run quickstart --topology split           the same scenario on another topology
  a2a-bench check results/<run-id>                    judge a stored history again
  a2a-bench compare results/A results/B               runs side by side (sim vs live, amqtt vs mosquitto)
  a2a-bench list                                      scenarios, topologies, faults, checkers, variants
  a2a-bench matrix scenarios/default.matrix.toml -j 2 every fault and every seeded defect, 2 at a time
  a2a-bench matrix scenarios/default.matrix.toml -k gate --lf
                                                     only the gate cells / only what failed last time
  a2a-bench report results/<run-id>                   plots and a self-contained report.html
  a2a-bench explore --variant memory_dedup_60s --minutes 5 -j 2
                                                     random scenarios until one fails, then shrink it
  a2a-bench brokers --broker mqtt://user:pw@host     what a broker does where MQTT leaves room
  a2a-bench run quickstart --node-command executor=./my-node
                                                     your own node as every executor (docs/PROTOCOL.md)
  a2a-bench conform ./my-node                         your node against every protocol rule: PASS/FAIL/UNKNOWN

exit codes: 0 every verdict as expected (true unless the scenario expects otherwise),
1 some verdict false, 2 some verdict unknown or a harness error, 3 invalid input files or arguments
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="a2a-bench", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"a2a-bench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    run = sub.add_parser(
        "run", help="run a scenario, check its history, write results/<run-id>/",
        description="Run SCENARIO (a file, or a name in scenarios/) on its topology, inject its "
                    "faults, record one history, judge it with every checker, and write the "
                    "run folder: scenario.json, topology.json, history.jsonl, verdicts.json, "
                    "metrics.json, summary.json, report.md. The seed and the command that "
                    "replays the run are printed.")
    run.add_argument("scenario", help="scenario file or name (see `a2a-bench list`)")
    run.add_argument("--topology", help="topology file or name, replacing the scenario's")
    run.add_argument("--mode", choices=["live", "sim", "docker"], default=None,
                     help="substrate: live (real broker and nodes), sim (simpy, virtual time) "
                          "or docker (the broker and every node in containers on a network of "
                          "their own; needs a Docker Engine); default: the scenario's mode key, "
                          "else live")
    run.add_argument("--broker",
                     help="live: amqtt (embedded), mosquitto, mqtt://[user:password@]host[:port] "
                          "(1883 by default) or mqtts://… (default: the topology's [broker] "
                          "model; amqtt for a generic one). sim: the broker model, generic "
                          "(MQTT 3.1.1 as written), amqtt or mosquitto: the simulator then "
                          "does what that broker was measured to do (a2a-bench brokers)")
    run.add_argument("--broker-restart-command", metavar="CMD",
                     help="live, external broker: shell command the broker_restart fault runs")
    run.add_argument("--broker-ca", metavar="FILE",
                     help="live, mqtts:// broker: the CA certificate (PEM) to verify it by "
                          "(default: the system's CAs)")
    run.add_argument("--no-isolation", action="store_true",
                     help="live, external broker: keep the topology's client ids and the topic "
                          "prefix as they are (by default a run adds its run id to both and "
                          "clears its sessions and retained messages at the end, so runs on a "
                          "long-lived broker never see each other)")
    run.add_argument("--node-command", action="append", default=[], metavar="ROLE=CMD",
                     help="live: start every node of ROLE (orchestrator or executor) with CMD "
                          "instead of the reference node — anyone's node speaking the "
                          "node-process protocol (docs/PROTOCOL.md), e.g. executor=./my-node "
                          "--flag; repeatable; such nodes run as processes. A topology names "
                          "one per node with command = [...]")
    run.add_argument("--wire-tap", action="store_true",
                     help="live: record what crosses every node's connection (CONNECT, "
                          "SUBSCRIBE, PUBLISH, PUBACK) as `wire` events, read off the packets "
                          "by a proxy in front of it, and judge the wire_evidence checker from "
                          "them (nodes started by --node-command are always tapped)")
    run.add_argument("--keep", action="store_true",
                     help="docker: leave the deployment up after the run — the broker "
                          "container (its port printed) and every node, restarted on its data "
                          "dir once judged, on the run's network — and print the command "
                          "that removes it. Later runs leave it alone")
    run.add_argument("--swarm", action="store_true",
                     help="docker: the run's network is an attachable overlay network of the "
                          "engine's swarm (docker swarm init first) instead of a bridge: "
                          "the network multi-host deployments use")
    run.add_argument("--nodes", choices=["inproc", "process"],
                     help="live: nodes on this process's event loop, or one OS process each")
    run.add_argument("--seed", type=int, help="seed for every random draw (default: the scenario's)")
    run.add_argument("--variant", default="reference",
                     help="reference node or a seeded defect (see `a2a-bench list`)")
    run.add_argument("--out", type=Path, help="run folder (default results/<scenario>-<variant>-s<seed>-<utc>)")
    run.add_argument("--json", action="store_true", help="print the summary and verdicts as JSON")
    run.add_argument("--no-plots", action="store_true",
                     help="skip plots/ and report.html (report.md and the JSON files stay)")
    check = sub.add_parser("check", help="judge a stored run's history again",
                           description="Re-run every checker over RUN_DIR/history.jsonl and "
                                       "rewrite verdicts.json, metrics.json and report.md.")
    check.add_argument("run_dir", type=Path)
    check.add_argument("--json", action="store_true")
    cmp_ = sub.add_parser("compare", help="show runs side by side (verdicts, counts, latency)",
                          description="Print the verdicts, message counts and latency quantiles "
                                      "of two or more run folders side by side, e.g. one "
                                      "scenario in sim and live, on amqtt and Mosquitto, or on "
                                      "several topologies. One matrix folder: its cells that ran "
                                      "one scenario on several topologies, substrates or "
                                      "brokers, side by side. Two or more matrix folders: cell "
                                      "by cell.")
    cmp_.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    cmp_.add_argument("--json", action="store_true")
    dp = sub.add_parser(
        "deploy", help="write a topology's docker deployment as a Compose file",
        description="Write TOPOLOGY's deployment — the broker and one container per node, the "
                    "same image and node process as --mode docker — as a Compose file, with "
                    "each node's launch spec and data dir beside it. Bring it up with "
                    "`docker-compose -f FILE up -d` (or `docker compose`), look at it, point "
                    "`a2a-bench run SCENARIO --broker mqtt://127.0.0.1:1883` at its broker, "
                    "and take it down with `docker-compose -f FILE down`.",
        epilog="example:\n  a2a-bench deploy star --broker mosquitto --compose deploy/star.yml",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    dp.add_argument("topology", help="topology file or name (see `a2a-bench list`)")
    dp.add_argument("--broker", choices=["amqtt", "mosquitto"], default="amqtt")
    dp.add_argument("--compose", metavar="FILE", required=True, type=Path,
                    help="the Compose file to write (specs/ and data/ go beside it)")
    dp.add_argument("--port", type=int, default=1883,
                    help="the broker's port published on 127.0.0.1 (default 1883)")
    sub.add_parser("list", help="show scenarios, topologies, faults, checkers and variants")
    runs = sub.add_parser(
        "runs", help="the run folders under results/, newest first, and how each was judged",
        description="List the run folders under DIR (default results/), newest first: when, "
                    "scenario, variant, substrate and broker, the verdicts and the exit code; "
                    "an interrupted run says so. --keep N removes all but the newest N runs "
                    "(matrix and explore folders are never touched).")
    runs.add_argument("--results", type=Path, default=Path("results"), metavar="DIR")
    runs.add_argument("--keep", type=int, metavar="N", help="remove all but the newest N runs")
    runs.add_argument("--json", action="store_true")
    desc = sub.add_parser(
        "describe", help="everything about one scenario, topology, matrix, fault, checker or "
                         "variant",
        description="Print the whole of one thing `list` shows a line of: a scenario (its "
                    "topology, workload, faults and what it expects, per broker too), a "
                    "topology, a matrix, a fault kind, a checker with its rules, a variant.")
    desc.add_argument("name", help="a name from `a2a-bench list`, or a .toml file")
    val = sub.add_parser(
        "validate", help="check scenario, topology and matrix files without running them",
        description="Load each FILE as a run would (a scenario with its topology) and say "
                    "what it holds; a wrong file gets one line naming the file, the key and "
                    "what was expected.\n\nexit codes: 0 every file is valid, 3 some file is not",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    val.add_argument("files", nargs="+", type=Path, metavar="FILE")
    mx = sub.add_parser(
        "matrix", help="run a matrix of cells in parallel; resumable; aggregated report",
        description="Run every cell of MATRIX_FILE (scenarios x topologies x variants x seeds x "
                    "modes x brokers, see scenarios/README.md) as one pytest item each, N at a "
                    "time through pytest-xdist. Cells land in results/<matrix-id>/cells/<cell>/; "
                    "a finished cell is never run again, so a killed matrix resumes where it "
                    "stopped (--fresh starts over). At the end: matrix.md, matrix.html (plots "
                    "inline) and matrix.json.\n\nexit codes: 0 every cell shows what it "
                    "expects (a defect: its checker FALSE), 1 some cell does not, 2 interrupted, "
                    "3 invalid matrix file or arguments, 5 -k or --lf selected no cell",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mx.add_argument("matrix_file", type=Path, help="a *.matrix.toml file")
    mx.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="cells run at once (pytest-xdist workers; default 1)")
    mx.add_argument("--id", help="matrix id: the results folder name (default: the file's name)")
    mx.add_argument("--fresh", action="store_true", help="discard finished cells and start over")
    mx.add_argument("-k", dest="keyword", metavar="EXPR",
                    help="only cells whose id matches (pytest -k), e.g. 'gate and not live'")
    mx.add_argument("--lf", action="store_true", help="only the cells that failed last time")
    mx.add_argument("--junitxml", type=Path, metavar="PATH", help="also write JUnit XML")
    mx.add_argument("--tx", action="append", default=[], metavar="GATEWAY",
                    help="run cells on another machine: an execnet gateway, as pytest-xdist "
                         "takes it (repeatable; '3*ssh=…' is three workers there). The host "
                         "needs this project checked out and installed, and the gateway "
                         "starts in that checkout: e.g. ssh=me@hostb//python=/opt/a2a-bench/"
                         ".venv/bin/python//chdir=/opt/a2a-bench (README: Matrices across machines). Each "
                         "finished cell comes back into this machine's results folder; -j "
                         "is then ignored")
    rp = sub.add_parser("report", help="(re)draw plots and report.html for a run folder",
                        description="Draw the plots (PNG and SVG under plots/) and a "
                                    "self-contained report.html for RUN_DIR; for a matrix "
                                    "folder, its matrix.html and plots.")
    rp.add_argument("run_dir", type=Path)
    xp = sub.add_parser(
        "explore", help="random scenarios in simulation until a verdict fails, then shrink it",
        description="Draw random scenarios (a topology family, a workload mix, 0-3 faults from\n"
                    "the whole catalogue, security faults included), run them in simulation N\n"
                    "at a time and judge each one, until a verdict is FALSE that the scenario\n"
                    "does not expect, or the budget is spent. The failing scenario is then\n"
                    "shrunk (fewer faults, nodes, seconds, requests, workload keys) while the\n"
                    "same checker still fails, and written as OUT/minimal.toml and\n"
                    "OUT/minimal-topology.toml, with the command that replays it. The same\n"
                    "--seed draws the same scenarios in the same order. OUT/explore.json holds\n"
                    "every run's verdicts and the situations each reached.\n\n"
                    "exit codes: 1 a failure was found, 0 none within the budget, 2 interrupted,\n"
                    "3 invalid arguments",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  a2a-bench explore --variant memory_dedup_60s --minutes 5 -j 2 "
               "--out results/explore\n  a2a-bench run results/explore/minimal.toml --mode sim "
               "--variant memory_dedup_60s")
    xp.add_argument("--variant", default="reference",
                    help="reference node or a seeded defect (see `a2a-bench list`)")
    xp.add_argument("--seed", type=int, default=1, help="seed of the draws (default 1)")
    budget = xp.add_mutually_exclusive_group()
    budget.add_argument("--runs", type=int, metavar="N", help="stop after N scenarios")
    budget.add_argument("--minutes", type=float, metavar="M",
                        help="stop after M minutes (default 5 when --runs is not given)")
    xp.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                    help="scenarios run at once, one process each (default 1)")
    xp.add_argument("--out", type=Path,
                    help="folder for explore.json, failing runs and minimal.toml "
                         "(default results/explore-<variant>-s<seed>-<utc>)")
    xp.add_argument("--keep-going", action="store_true",
                    help="spend the whole budget; shrink only the first failure")
    xp.add_argument("--tx", action="append", default=[], metavar="GATEWAY",
                    help="run scenarios on another machine, one at a time per gateway: an "
                         "execnet gateway as for `matrix --tx` (repeatable, '3*ssh=…'); "
                         "the host needs this project installed where the gateway starts. "
                         "A failing run comes back into OUT; -j is then the gateway count")
    xp.add_argument("--json", action="store_true", help="print explore.json's summary as JSON")
    bk = sub.add_parser(
        "brokers", help="measure what a broker does where MQTT leaves room (redelivery, DUP, "
                        "keepalive, takeover will, overlapping filters, RETAIN flags, persistence)",
        description="Measure, with the bench's own raw MQTT clients, what each broker does\n"
                    "where MQTT 3.1.1 leaves room or brokers stray: whether an unacknowledged\n"
                    "QoS1 message is resent on resume and with DUP=1; how long a silent client\n"
                    "(keepalive 2 s) lives before its will is published, with nothing to send\n"
                    "it and while it is sent messages; which will a session takeover publishes;\n"
                    "how many copies one client with overlapping filters gets; whether RETAIN is\n"
                    "set as 3.1.1 says; what a graceful restart keeps. Topics and client ids\n"
                    "carry a fresh nonce, so a shared broker is safe. About 15 s per broker.\n\n"
                    "exit codes: 0 measured, 2 a broker the bench starts could not be started,\n"
                    "3 invalid arguments (a URL that names no reachable broker, a refused login or\n"
                    "an unverifiable certificate included)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  a2a-bench brokers                      amqtt and Mosquitto, started here\n"
               "  a2a-bench brokers --broker mqtt://user:secret@10.0.0.5 --broker-restart-command "
               "'systemctl restart mosquitto'\n"
               "  a2a-bench brokers --broker mqtts://broker.example:8883 --broker-ca ca.pem")
    bk.add_argument("--broker", action="append", metavar="BROKER",
                    help="amqtt, mosquitto, mqtt://[user:password@]host[:port] or mqtts://… "
                         "(repeatable; default: amqtt, and mosquitto when installed)")
    bk.add_argument("--broker-ca", metavar="FILE",
                    help="the CA certificate (PEM) that verifies the mqtts:// brokers "
                         "(default: the system's CAs)")
    bk.add_argument("--broker-restart-command", metavar="CMD",
                    help="an external broker: a shell command that restarts it gracefully "
                         "(without it, persistence is not measured)")
    bk.add_argument("--json", action="store_true", help="print the facts as JSON")
    cf = sub.add_parser(
        "conform", help="judge anyone's node against docs/PROTOCOL.md, rule by rule",
        description="Start CMD as every executor of a star beside the reference orchestrator,\n"
                    "on the embedded broker and behind the wire tap, through a short run of each\n"
                    "situation the protocol's rules are about (streamed tasks, malformed and\n"
                    "forged input, QoS1 redelivery, a restart, a missing replyNodeId, an emptied\n"
                    "roster), then print each rule of docs/PROTOCOL.md as PASS, FAIL or UNKNOWN\n"
                    "with its evidence. Exit 0 all PASS (or UNKNOWN only where the node declares\n"
                    "it leaves that part out), 1 some FAIL, 2 some other UNKNOWN. About 2 minutes.",
        epilog="example: a2a-bench conform ./my-node\n"
               "         a2a-bench conform './my-node --verbose'   (one argument: quote it)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    cf.add_argument("cmd", metavar="CMD", help="the node's command line (one argument; quote it)")
    cf.add_argument("--broker", choices=["amqtt", "mosquitto"], default="amqtt",
                    help="the embedded broker to run on (default: amqtt)")
    cf.add_argument("--out", type=Path, default=None,
                    help="where the runs go (default: results/conform-<utc time>)")
    cf.add_argument("--json", action="store_true", help="print the rows as JSON")
    ex = sub.add_parser(
        "exchange", help="two reference cores back to back (no broker), the seeds' failure shapes",
        description="Run two reference nodes back to back (no broker; each with its own data "
                    "dir on disk), drive requests through QoS1 redelivery, a retry, an "
                    "unresolvable agent, a missing replyNodeId and an executor crash, record "
                    "the history and check it.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ex.add_argument("--out", type=Path, default=None,
                    help="run directory (default: results/exchange-<utc time>-<pid>)")
    ex.add_argument("--auth", choices=["strict", "loose", "audit"], default="loose",
                    help="admission mode on both nodes (default: loose, as in the seed)")
    ex.add_argument("--signature", choices=["1", "2"], default="1",
                    help="1: the seed's HMAC over messageId|from|type|timestamp; "
                         "2: HMAC over a digest of the whole canonical envelope")
    ex.add_argument("--requests", type=int, default=3, metavar="N",
                    help="ordinary requests before the failure shapes (default 3, 1..1000)")
    ex.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def _command_line(command: str, given: str, role: str | None = None) -> tuple[str, ...] | None:
    """A node's command line (for `role`, when given as ROLE=CMD), or None once the one
    line saying why not is printed."""
    try:
        argv = tuple(shlex.split(command))
    except ValueError as exc:
        argv, why = (), str(exc)
    else:
        why = "an empty command"
    if role is None and not argv:
        print(f"a2a-bench: {given}: expected a command line, the program then its "
              f"arguments (got {why})", file=sys.stderr)
        return None
    if role is not None and (role not in ("orchestrator", "executor") or not argv):
        got = why if role in ("orchestrator", "executor") else f"role {role!r}"
        print(f"a2a-bench: {given}: expected ROLE=CMD, ROLE orchestrator "
              f"or executor and CMD a command line (got {got})", file=sys.stderr)
        return None
    if shutil.which(argv[0]) is None:
        print(f"a2a-bench: {given}: {argv[0]!r} is not an executable file "
              "(nor a program on PATH)", file=sys.stderr)
        return None
    return argv


def _conform(args: argparse.Namespace) -> int:
    from bench.conform import SUITE, conform, render
    argv = _command_line(args.cmd, f"conform {args.cmd!r}")
    if argv is None:
        return EXIT_INVALID
    try:
        out = claim_named(args.out) if args.out else claim(Path("results"), f"conform-{utc_stamp()}")
    except FolderTaken as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if not args.json:
        print(f"conform {shlex.join(argv)}: every executor of a star, beside the reference "
              f"orchestrator, on {args.broker}; {len(SUITE)} short runs into {out}/")
    rows = conform(argv, out, args.broker, say=(lambda line: None) if args.json else print)
    if args.json:
        print(json.dumps([r.to_json() for r in rows], indent=2))
    else:
        print(render(rows))
    # a part the node declares it leaves out is UNKNOWN in the table, as a run says it,
    # and no more a failure of the node than in a run
    untested = [r for r in rows if r.status == "UNKNOWN" and not r.declared_out]
    return EXIT_FALSE if any(r.status == "FAIL" for r in rows) else \
        EXIT_UNKNOWN if untested else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        # whoever read the output went away (`a2a-bench list | head -1`): not a failure;
        # stdout goes nowhere from now on, so the interpreter's last flush is quiet too
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        # a Ctrl-C before a run took charge of it (loading files, importing the substrate):
        # nothing was started, so nothing is left to stop or judge
        print("a2a-bench: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_UNKNOWN


def _dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    if args.command == "conform":
        return _conform(args)
    if args.command == "exchange":
        return _exchange(parser, args)
    if args.command == "run":
        return _run(args)
    if args.command == "check":
        return _check(args)
    if args.command == "list":
        return _list()
    if args.command == "runs":
        return _runs(args)
    if args.command == "describe":
        return _describe(args.name)
    if args.command == "validate":
        return _validate(args.files)
    if args.command == "compare":
        return _compare(args)
    if args.command == "matrix":
        return _matrix(args)
    if args.command == "report":
        return _report(args)
    if args.command == "explore":
        return _explore(args)
    if args.command == "deploy":
        return _deploy(args)
    if args.command == "brokers":
        return _brokers(args)
    parser.error(f"unknown command {args.command}")
    return EXIT_INVALID


def _exchange(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from bench.core.auth import AuthMode, SignatureVersion
    from bench.tools.exchange import default_run_dir, render, run_exchange

    if not 1 <= args.requests <= 1000:
        parser.error(f"--requests={args.requests} must be within [1, 1000]")
    out = args.out or default_run_dir(Path("results"))
    try:
        summary = run_exchange(out, AuthMode(args.auth), SignatureVersion(args.signature),
                               args.requests)
    except Exception:
        traceback.print_exc()
        print(f"a2a-bench: harness error; whatever was recorded is in {out}/history.jsonl",
              file=sys.stderr)
        return EXIT_UNKNOWN
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(f"a2a-bench exchange: auth={args.auth} signature=v{args.signature} run={out}")
        print(render(summary))
    return EXIT_OK if summary.ok else EXIT_FALSE


def _deploy(args: argparse.Namespace) -> int:
    from bench.spec.distribution import SpecError
    from bench.substrates.docker.compose import compose
    from bench.substrates.docker.image import tag
    try:
        doc = compose(args.topology, args.broker, args.compose, args.port)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except OSError as exc:
        print(f"a2a-bench: --compose={args.compose}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    print(f"wrote {args.compose}: {len(doc['services']) - 1} nodes and the {args.broker} "
          f"broker on 127.0.0.1:{args.port}, image {tag()} (build it with "
          "`python -m bench.substrates.docker.image` if it is not there)\n"
          f"  up:   docker-compose -f {args.compose} up -d\n"
          f"  run:  a2a-bench run quickstart --broker mqtt://127.0.0.1:{args.port}\n"
          f"  down: docker-compose -f {args.compose} down")
    return EXIT_OK


def _brokers(args: argparse.Namespace) -> int:
    import tempfile

    from bench.substrates.live import broker_refusal
    from bench.substrates.live.brokers import BrokerError
    from bench.substrates.live.facts import measure, render

    specs = args.broker or ["amqtt", *(["mosquitto"] if shutil.which("mosquitto")
                                       or Path("/usr/sbin/mosquitto").exists() else [])]
    if args.broker_ca and not any(s.startswith("mqtts://") for s in specs):
        print(f"a2a-bench: --broker-ca={args.broker_ca}: no mqtts:// --broker to verify with it",
              file=sys.stderr)
        return EXIT_INVALID

    def ca(spec: str) -> str | None:
        return args.broker_ca if spec.startswith("mqtts://") else None
    for spec in specs:   # every argument checked before anything is measured
        if (refusal := broker_refusal(spec, ca(spec))) is not None:
            print(f"a2a-bench: {refusal}", file=sys.stderr)
            return EXIT_INVALID
    facts = {}
    for spec in specs:
        name = spec.split("@")[-1] if "://" in spec else spec   # never print a password
        name = name.split("://")[-1]
        if not args.json:
            print(f"a2a-bench brokers: measuring {name}", file=sys.stderr)
        try:
            with tempfile.TemporaryDirectory(prefix="a2a-brokers-") as tmp:
                facts[name] = measure(spec, Path(tmp), args.broker_restart_command,
                                      say=(lambda line: None) if args.json else
                                      (lambda line: print("  " + line, file=sys.stderr)),
                                      ca_file=ca(spec))
        except (BrokerError, OSError) as exc:
            print(f"a2a-bench: {name}: {exc}", file=sys.stderr)
            return EXIT_UNKNOWN
    if args.json:
        print(json.dumps({b: [{"name": f.name, "value": f.value, "detail": f.detail}
                              for f in fs] for b, fs in facts.items()}, indent=2))
    else:
        print(render(facts))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    import signal

    from bench.checks import checkers
    from bench.report.progress import Status
    from bench.run import Interrupted, print_progress, run_scenario
    from bench.spec.distribution import SpecError
    from bench.spec.scenario import SCENARIOS, find, load_scenario
    from bench.substrates import Choice, substrate
    from bench.substrates.live.brokers import BrokerError
    from bench.variants import variant

    try:
        path = find(args.scenario, SCENARIOS, "scenario")
        scenario = load_scenario(path, topology=args.topology, seed=args.seed,
                                 known_checks=tuple(checkers()))
        chosen = variant(args.variant)
    except (SpecError, KeyError) as exc:
        print(f"a2a-bench: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return EXIT_INVALID
    mode = args.mode or scenario.mode
    for given in args.node_command:
        role, _, command = given.partition("=")
        argv = _command_line(command, f"--node-command={given}", role)
        if argv is None:
            return EXIT_INVALID
        try:
            scenario = scenario.with_node_command(role, argv)
        except SpecError as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            return EXIT_INVALID
    described = substrate(mode)
    choice = Choice(broker=args.broker, nodes=args.nodes, broker_ca=args.broker_ca,
                    restart_command=args.broker_restart_command,
                    no_isolation=args.no_isolation, keep=args.keep, swarm=args.swarm,
                    wire_tap=args.wire_tap, node_commands=tuple(args.node_command))
    refusal = described.refusal(scenario, choice)
    if refusal is not None:
        print(f"a2a-bench: {refusal}", file=sys.stderr)
        return EXIT_INVALID
    scenario, options = described.prepare(scenario, choice)
    try:
        out = claim_named(args.out) if args.out else claim(
            Path("results"), f"{scenario.name}-{chosen.name}-s{scenario.seed}-{utc_stamp()}")
    except FolderTaken as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if not args.json:
        print(f"a2a-bench run {scenario.source}: topology {scenario.topology.name} "
              f"({len(scenario.topology.nodes)} nodes), variant {chosen.name}, "
              f"seed {scenario.seed}, {mode}" + described.header(scenario, options))
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


def _matrix(args: argparse.Namespace) -> int:
    import pytest

    from bench.matrix import finished, load_matrix
    from bench.spec.distribution import SpecError
    try:
        matrix = load_matrix(args.matrix_file)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.jobs < 1:
        print("a2a-bench: -j must be >= 1", file=sys.stderr)
        return EXIT_INVALID
    out = Path("results") / (args.id or matrix.name)
    if args.fresh:
        shutil.rmtree(out / "cells", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    copy = out / f"{matrix.name}.matrix.toml"
    for old in out.glob("*.matrix.toml"):
        if old != copy:
            old.unlink()
    shutil.copyfile(args.matrix_file, copy)
    ini = out / "pytest.ini"
    # this matrix's own settings and cache (--lf), not the repo's; our lines replace the [n%]
    ini.write_text("[pytest]\nconsole_output_style = classic\n")
    argv = [str(copy), "-c", str(ini), "--rootdir", str(out), "-p", "bench.matrix.plugin",
            "--matrix-out", str(out), "--no-header", "-rfE"]
    if args.tx:
        # every host reads the matrix file and the scenarios at the same place in its own
        # checkout, runs into its own results folder and ships each cell back
        source = args.matrix_file
        if source.is_absolute() or ".." in source.parts or len(source.parts) < 2 \
                or not source.exists():
            print(f"a2a-bench: --tx: {args.matrix_file} must be a file in a folder of the "
                  "project, named relative to it (scenarios/x.matrix.toml): pytest-xdist "
                  "sends that folder, scenarios/ and topologies/ to every host",
                  file=sys.stderr)
            return EXIT_INVALID
        sent = sorted(d for d in {source.parts[0], "scenarios", "topologies"} if Path(d).is_dir())
        done = [c.id for c in matrix.cells if finished(out, c) is not None]
        # one token per option: xdist rewrites every argument that names an existing path
        # (the matrix file, absolute) relative to the folder it sends
        argv = [str(source.resolve()), "-o", "console_output_style=classic", "--rootdir=.",
                "-p", "bench.matrix.plugin", f"--matrix-out={out}", "--matrix-ship",
                f"--matrix-skip={','.join(done)}", "--no-header", "-rfE", "--dist=load",
                *(f"--tx={tx}" for tx in args.tx), *(f"--rsyncdir={d}" for d in sent)]
        if done:
            print(f"{len(done)} cells finished before: left out")
    elif args.jobs > 1:
        argv += ["-n", str(args.jobs)]
    else:
        argv += ["-p", "no:xdist"]
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.lf:
        argv += ["--lf"]
    if args.junitxml:
        argv += ["--junitxml", str(args.junitxml)]
    where = f"on {len(args.tx)} gateways" if args.tx else f"{args.jobs} at a time"
    print(f"a2a-bench matrix {args.matrix_file}: {len(matrix.cells)} cells in the file, "
          f"{where} -> {out}/")
    return int(pytest.main(argv))


def _explore(args: argparse.Namespace) -> int:
    from bench.explore import explore, write_report
    from bench.variants import variant

    try:
        variant(args.variant)
    except KeyError as exc:
        print(f"a2a-bench: {exc.args[0]}", file=sys.stderr)
        return EXIT_INVALID
    for flag, value in (("-j", args.jobs), ("--runs", args.runs), ("--minutes", args.minutes)):
        if value is not None and value <= 0:
            print(f"a2a-bench: {flag}={value} must be > 0", file=sys.stderr)
            return EXIT_INVALID
    minutes = args.minutes if args.minutes is not None or args.runs is not None else 5.0
    try:
        out = claim_named(args.out) if args.out else claim(
            Path("results"), f"explore-{args.variant}-s{args.seed}-{utc_stamp()}")
    except FolderTaken as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    budget = f"{args.runs} scenarios" if args.runs else f"{minutes:g} minutes"
    say = (lambda line: None) if args.json else (lambda line: print("  " + line, flush=True))
    if args.tx:
        from bench.explore.hosts import gateways
        args.jobs = len(gateways(args.tx))
    if not args.json:
        where = f"on {args.jobs} gateways" if args.tx else f"{args.jobs} at a time"
        print(f"a2a-bench explore: variant {args.variant}, seed {args.seed}, {budget}, "
              f"{where} -> {out}/", flush=True)
    try:
        e = explore(variant=args.variant, seed=args.seed, runs=args.runs, minutes=minutes,
                    jobs=args.jobs, out=out, keep_going=args.keep_going, say=say,
                    tx=args.tx or None)
    except KeyboardInterrupt:
        print(f"a2a-bench: explore interrupted; the failing runs so far are in {out}/runs",
              file=sys.stderr)
        return EXIT_UNKNOWN
    report, summary = write_report(e, out, variant=args.variant, seed=args.seed, jobs=args.jobs)
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "runs"}, indent=2))
    else:
        print(f"explored {summary['scenarios']} scenarios in {summary['elapsed_s']} s "
              f"({summary['per_minute']}/min); report {report}")
        missed = [name for name, n in summary["situations"].items() if not n]
        print(f"situations reached: {len(summary['situations']) - len(missed)} of "
              f"{len(summary['situations'])}" + (f" (never: {', '.join(missed)})" if missed else ""))
        if e.found is None:
            print("no verdict failed")
        else:
            f = summary["found"]
            print(f"FAILED: {', '.join(e.found.failing)} in run {e.found.index} after "
                  f"{f['after_s']} s ({e.found.folder})")
            print(f"shrunk from {f['drawn_size']}\n        to   {f['shrunk_size']}")
            print(f"minimal: {e.minimal} and {out / 'minimal-topology.toml'}")
            print(f"replay:  a2a-bench run {e.minimal} --mode sim --variant {args.variant}")
    return EXIT_FALSE if e.found is not None else EXIT_OK


def _report(args: argparse.Namespace) -> int:
    if (args.run_dir / "matrix.json").exists():
        from bench.matrix import load_matrix
        from bench.matrix.report import write_matrix_report
        sources = sorted(args.run_dir.glob("*.matrix.toml"))
        if not sources:
            print(f"a2a-bench: {args.run_dir}: no *.matrix.toml copy in the matrix folder",
                  file=sys.stderr)
            return EXIT_INVALID
        paths = write_matrix_report(args.run_dir, load_matrix(sources[0]))
        print(f"{paths['md']}\n{paths['html']}")
        return EXIT_OK
    if not (args.run_dir / "history.jsonl").exists():
        print(f"a2a-bench: {args.run_dir}: not a run folder (no history.jsonl) nor a matrix "
              "folder (no matrix.json)", file=sys.stderr)
        return EXIT_INVALID
    from bench.report.html import write_run_report
    if not (args.run_dir / "summary.json").exists():   # a killed run: judge what it recorded
        from bench.run import rejudge
        try:
            rejudge(args.run_dir)
        except (ValueError, OSError) as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            return EXIT_INVALID
    print(write_run_report(args.run_dir))
    return EXIT_OK


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
    from bench.substrates import substrate
    s, m = result.summary, result.metrics
    if as_json:
        print(json.dumps({"summary": s, "verdicts": [v.to_json() for v in result.verdicts],
                          "metrics": m}, indent=2))
        return
    lat = m["latency_ms"]
    stop = s.get("interrupted")
    if stop:
        print(f"  interrupted ({stop['how']}) at {stop['at_s']:.1f} s of {stop['planned_s']:.1f} s: "
              "judged on what it recorded")
    described = substrate(s["mode"])
    if not described.wall_clock:
        print(f"  {s['events']} events; simulated {s['simulated_s']:.1f} s in {s['wall_s']:.2f} s "
              f"wall = {s['sim_s_per_wall_s']:.1f} simulated s per wall s")
    else:
        print(f"  {s['events']} events; {described.label(s)} for {s['simulated_s']:.1f} s")
    unsettled = m["requests"] - sum(m["outcomes"].values())
    print(f"  requests {m['requests']}: " + ", ".join(
        [f"{k} {n}" for k, n in m["outcomes"].items()] +
        ([f"{unsettled} unsettled"] if unsettled > 0 else [])))
    if lat["p50"] is not None:
        print(f"  latency ms p50 {lat['p50']:.1f}  p90 {lat['p90']:.1f}  p99 {lat['p99']:.1f}  "
              f"max {lat['max']:.1f}; duplicates delivered {m['duplicates_delivered']}, "
              f"executed {m['duplicates_executed']}")
    d = m.get("directory")
    if d and d["full_after_ms"]["p50"] is not None:
        full = d["full_after_ms"]
        print(f"  directory: {d['to_fill_per_node']['mean']:g} announcements per node to fill it "
              f"(max {d['to_fill_per_node']['max']}, {d['announcements']} in all); full "
              f"{full['p50']:.0f} ms after a node's start (p50), {full['max']:.0f} ms (max)")
    relay = m.get("relay")
    if relay and relay["event_latency_ms"]["p50"] is not None:
        el, ttft = relay["event_latency_ms"], relay["time_to_first_token_ms"]
        print(f"  relay: {relay['frames']} frames, {relay['deliveries']} deliveries, "
              f"{relay['gaps']} gaps; event latency ms p50 {el['p50']:.1f} p99 {el['p99']:.1f}; "
              f"time to first token ms p50 {ttft['p50'] or 0:.1f} p99 {ttft['p99'] or 0:.1f}")
    gates = m.get("gates")
    if gates and gates["round_trip_ms"]["p50"] is not None:
        rt, think = gates["round_trip_ms"], gates["think_ms"]
        print(f"  gates: {gates['opened']} opened, {gates['decided_by_human']} decided by people, "
              f"{gates['decided_by_timeout']} by timeout, {gates['already_decided']} extra clicks, "
              f"{gates['rehydrated']} rehydrated; round trip without think time ms "
              f"p50 {rt['p50']:.1f} p99 {rt['p99']:.1f} (think p50 {think['p50']:.0f})")
    for o in m.get("broker_outages") or []:
        print(f"  broker: down at {o['downMs'] / 1000:.1f} s ({o['how']}"
              + ("" if o["planned"] else "; no fault did this") + "), "
              + (f"back at {o['upMs'] / 1000:.1f} s" if o["upMs"] is not None
                 else "not back by the end"))
    for w in m.get("wills_after_silence") or []:
        print(f"  broker keepalive: {w['node']} partitioned for {w['partitionMs'] / 1000:.1f} s; "
              + (f"its will reached a peer after {w['willAfterMs'] / 1000:.1f} s"
                 if w["willAfterMs"] is not None else "no will before the heal (the broker "
                 "never gave the silent client up)"))
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


def _clip(text: str, width: int) -> str:
    """One line of `list`: cut at `width`, and said to be cut."""
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def _list() -> int:
    from bench.checks import checkers
    from bench.faults import CATALOGUE
    from bench.spec.scenario import SCENARIOS, TOPOLOGIES
    from bench.variants import VARIANTS

    def first_line(path: Path) -> str:
        import tomllib
        try:
            d = tomllib.loads(path.read_text()).get("description", "")
        except tomllib.TOMLDecodeError:
            return "(invalid TOML)"
        text = " ".join(str(d).split())
        sentence = text.split(". ")[0]
        return _clip(sentence if len(sentence) < len(text) else text, 110)

    print("(`a2a-bench describe NAME` shows the whole of any of these)")
    print("scenarios (scenarios/):")
    for p in sorted(SCENARIOS.glob("*.toml")):
        if not p.name.endswith(".matrix.toml"):
            print(f"  {p.stem:<26} {first_line(p)}")
    print("matrices (scenarios/*.matrix.toml, run with `a2a-bench matrix FILE`):")
    for p in sorted(SCENARIOS.glob("*.matrix.toml")):
        print(f"  {p.name.removesuffix('.matrix.toml'):<26} {first_line(p)}")
    print("topologies (topologies/):")
    for p in sorted(TOPOLOGIES.glob("*.toml")):
        print(f"  {p.stem:<26} {first_line(p)}")
    print("faults:")
    for k in CATALOGUE.values():
        print(f"  {k.name:<26} {k.summary}")
        for name, prm in k.params.items():
            req = "required" if prm.required else f"default {prm.default!r}"
            print(f"      {name} ({prm.kind}, {req}): {prm.help}")
    print("checkers:")
    for name, checker in checkers().items():
        print(f"  {name:<26} {_clip(' '.join(checker.summary.split()), 110)}")
        for r in checker.rules:
            print(f"      {r.id}: {_clip(r.definition, 96)}")
    print("variants (--variant):")
    for v in VARIANTS.values():
        caught = "" if v.name == "reference" else f"  [caught by {v.caught_by} in {v.scenario}]"
        print(f"  {v.name:<26} {_clip(v.summary, 90)}{caught}")
    return EXIT_OK


def _runs(args: argparse.Namespace) -> int:
    from bench.report.runs import find_runs, prune, render
    if args.keep is not None and args.keep < 0:
        print(f"a2a-bench: --keep={args.keep} must be >= 0", file=sys.stderr)
        return EXIT_INVALID
    found = find_runs(args.results)
    if args.keep is not None:
        gone = prune(found, args.keep)
        print(f"removed {len(gone)} run folder(s) under {args.results}, kept the newest "
              f"{min(args.keep, len(found))}", file=sys.stderr)
        found = found[:args.keep]
    print(json.dumps([r.to_json() for r in found], indent=2) if args.json else render(found))
    return EXIT_OK


def _describe(name: str) -> int:
    from bench.spec.describe import describe
    from bench.spec.distribution import SpecError
    try:
        text = describe(name)
    except SpecError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if text is None:
        print(f"a2a-bench: nothing is called {name!r} (see `a2a-bench list`)", file=sys.stderr)
        return EXIT_INVALID
    print(text)
    return EXIT_OK


def _validate(files: list[Path]) -> int:
    from bench.checks import checkers
    from bench.spec.describe import validate
    from bench.spec.distribution import SpecError
    worst = EXIT_OK
    for path in files:
        try:
            print(f"ok   {validate(path, tuple(checkers()))}")
        except SpecError as exc:
            print(f"a2a-bench: {exc}", file=sys.stderr)
            worst = EXIT_INVALID
    return worst


def _compare(args: argparse.Namespace) -> int:
    from bench.report.compare import (
        fidelity,
        is_matrix,
        load,
        matrix_groups,
        render,
        render_matrices,
        rows,
    )
    from bench.report.fidelity import render as fidelity_report
    dirs: list[Path] = args.run_dirs
    try:
        if all(is_matrix(d) for d in dirs):
            if len(dirs) > 1:
                print(render_matrices(dirs))
                return EXIT_OK
            groups = matrix_groups(dirs[0])
            if not groups:
                print(f"{dirs[0]}: no scenario ran in more than one topology, substrate or broker")
            for title, runs in groups:
                if args.json:
                    print(json.dumps({"group": title, "rows": rows(runs),
                                      "fidelity": fidelity(runs)}))
                else:
                    print(f"== {title}\n{render(runs)}\n")
            if not args.json and (report := fidelity_report(dirs[0])) is not None:
                print(report)
            return EXIT_OK
        if len(dirs) < 2:
            print("a2a-bench: compare needs two or more run folders, or matrix folders",
                  file=sys.stderr)
            return EXIT_INVALID
        runs = [load(d) for d in dirs]
    except ValueError as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        print(json.dumps({"rows": rows(runs), "fidelity": fidelity(runs)}))
    else:
        print(render(runs))
    return EXIT_OK
