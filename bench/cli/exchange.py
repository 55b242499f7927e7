"""`exchange`: two reference cores back to back, no broker."""
from __future__ import annotations

import argparse
import functools
import json
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from bench.cli.common import (
    EXIT_FALSE,
    EXIT_OK,
    EXIT_UNKNOWN,
    Sub,
)

if TYPE_CHECKING:
    pass


def add_exchange(sub: Sub) -> None:
    ex = sub.add_parser(
        "exchange", help="two reference cores back to back (no broker), the seeds' failure shapes",
        description="Run two reference nodes back to back (no broker; each with its own data "
                    "dir on disk), drive requests through QoS1 redelivery, a retry, an "
                    "unresolvable agent, a missing replyNodeId and an executor crash, record "
                    "the history and check it.")
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
    ex.set_defaults(handler=functools.partial(_exchange, ex))


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
