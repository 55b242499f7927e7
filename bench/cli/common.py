"""What every subcommand of `a2a-bench` shares: the exit codes and a few helpers.

Exit codes (STYLE): 0 every verdict true, 1 some verdict false, 2 unknown or harness
error, 3 invalid input (bad arguments or files).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.folders import FolderTaken, claim, claim_named, utc_stamp

EXIT_OK, EXIT_FALSE, EXIT_UNKNOWN, EXIT_INVALID = 0, 1, 2, 3

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[Any]
else:
    Sub = argparse._SubParsersAction


def out_folder(given: Path | None, name: str) -> Path | None:
    """Where a command writes: the folder given (--out, which must hold no run yet), or
    results/<name>-<UTC time>; None once the one line saying why not is printed."""
    try:
        return claim_named(given) if given else claim(Path("results"), f"{name}-{utc_stamp()}")
    except FolderTaken as exc:
        print(f"a2a-bench: {exc}", file=sys.stderr)
        return None


def unknown_run(only: list[str], known: list[str], command: str, suites: bool = False) -> bool:
    """Whether an --only names a run the suite (or `suites`) has not, once the one line
    saying so, with the runs it has, is printed."""
    wrong = [name for name in only if name not in known]
    if wrong:
        what = "the suites (their runs" if suites else "this suite (its runs"
        print(f"a2a-bench: {command} --only={wrong[0]}: not a run of {what}: "
              f"{', '.join(known)})", file=sys.stderr)
    return bool(wrong)


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
    roles = role_names()
    if role is not None and (role not in roles or not argv):
        got = why if role in roles else f"role {role!r}"
        print(f"a2a-bench: {given}: expected ROLE=CMD, ROLE one of {', '.join(roles)} (the "
              f"bench's roles, then each protocol's own names for them) and CMD a command line "
              f"(got {got})", file=sys.stderr)
        return None
    from bench.substrates.live.nodes import OWN_PYTHON
    if argv[0] not in OWN_PYTHON and shutil.which(argv[0]) is None:
        print(f"a2a-bench: {given}: {argv[0]!r} is not an executable file "
              "(nor a program on PATH)", file=sys.stderr)
        return None
    return argv


def role_names() -> list[str]:
    """The roles a node may be named by: the bench's, then each protocol's own."""
    from bench.protocols import protocols
    from bench.spec.topology import Role
    return [*(r.value for r in Role),
            *(name for spec in protocols().values() for name in spec.roles)]


def clip(text: str, width: int) -> str:
    """One line of `list`: cut at `width`, and said to be cut."""
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"
