"""What every subcommand of `a2a-bench` shares: the exit codes and a few helpers.

Exit codes (STYLE): 0 every verdict true, 1 some verdict false, 2 unknown or harness
error, 3 invalid input (bad arguments or files).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from typing import TYPE_CHECKING, Any

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[Any]
else:
    Sub = argparse._SubParsersAction


def command_line(command: str, given: str, role: str | None = None) -> tuple[str, ...] | None:
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
    roles = ("orchestrator", "executor", "requester", "responder")
    if role is not None and (role not in roles or not argv):
        got = why if role in roles else f"role {role!r}"
        print(f"a2a-bench: {given}: expected ROLE=CMD, ROLE orchestrator or executor (on an "
              f"A2A-over-MQTT topology requester or responder) and CMD a command line (got "
              f"{got})", file=sys.stderr)
        return None
    if shutil.which(argv[0]) is None:
        print(f"a2a-bench: {given}: {argv[0]!r} is not an executable file "
              "(nor a program on PATH)", file=sys.stderr)
        return None
    return argv


def clip(text: str, width: int) -> str:
    """One line of `list`: cut at `width`, and said to be cut."""
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"
