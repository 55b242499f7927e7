"""`python -m bench.substrates.hosts.guard COMMAND...`: runs COMMAND on a host for a
`--mode hosts` run, says its pid on the first line of stdout, and ends with it: when
COMMAND ends, with its exit status; when stdin ends — the bench's SSH connection gone, the
bench killed — by SIGKILLing COMMAND first, so that a broker never outlives the run that
started it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m bench.substrates.hosts.guard COMMAND...", file=sys.stderr)
        return 3
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    print(child.pid, flush=True)
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if child.poll() is not None:
            return child.returncode if child.returncode >= 0 else 128 - child.returncode
        if ready and not os.read(sys.stdin.fileno(), 4096):
            child.send_signal(signal.SIGKILL)
            child.wait()
            return 137


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
