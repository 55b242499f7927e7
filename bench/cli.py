"""The `a2a-bench` command.

Exit codes (STYLE): 0 every verdict true, 1 some verdict false, 2 unknown or harness
error, 3 invalid input (bad arguments or files).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from bench import __version__

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3

DESCRIPTION = """\
a2a-bench: find the failures of agent-to-agent systems over MQTT that only appear across
processes — a task executed twice after a QoS1 redelivery, a mute receiver with an empty
directory, a response that cannot find its way back, a "strict" mode that trusts claims.
"""

EPILOG = """\
examples:
  a2a-bench exchange                 two reference nodes, the seeds' failure shapes, judged
  a2a-bench exchange --auth strict   the same with HMAC signatures required on every message
  a2a-bench exchange --json          machine-readable summary on stdout

exit codes: 0 all checks true, 1 some check false, 2 harness error, 3 invalid arguments
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
    ex = sub.add_parser(
        "exchange", help="run a real two-node exchange through the reference core and judge it",
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_INVALID
    if args.command == "exchange":
        return _exchange(parser, args)
    parser.error(f"unknown command {args.command}")
    return EXIT_INVALID


def _exchange(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from bench.core.auth import AuthMode, SignatureVersion
    from bench.exchange import default_run_dir, render, run_exchange

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
