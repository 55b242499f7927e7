"""Entry points that are tools rather than layers, each `python -m bench.tools.<name>` (the
back-to-back exchange is `a2a-bench exchange`); docs/reference/commands.md lists every one,
generated from their docstrings."""

from __future__ import annotations

import argparse
import sys

#: Bad arguments, as every command of the bench says so (STYLE: exit 3, one line)
EXIT_INVALID = 3


class Parser(argparse.ArgumentParser):
    """argparse's parser, exiting 3 on bad arguments (argparse's own is 2, which the bench
    keeps for an UNKNOWN or a harness error)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")
