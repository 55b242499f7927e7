"""`conform`: anyone's node judged against docs/PROTOCOL.md, rule by rule."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
    command_line,
)
from bench.folders import FolderTaken, claim, claim_named, utc_stamp

if TYPE_CHECKING:
    pass


def add_conform(sub: Sub) -> None:
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
    cf.set_defaults(handler=_conform)


def _conform(args: argparse.Namespace) -> int:
    from bench.conform import SUITE, conform, render
    argv = command_line(args.cmd, f"conform {args.cmd!r}")
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
