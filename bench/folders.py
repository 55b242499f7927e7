"""Run folders: each run writes into a folder no other run ever shares, and travels whole
from the machine that ran it to the one that asked (`pack`, `unpack`).

A default name is `<what>-<UTC second>`; two runs started in the same second (two
terminals, two brokers side by side) must not meet, so a folder is claimed with an atomic
`mkdir`, and the loser of a race takes the next free `-2`, `-3`, ... A folder the user
names with `--out` is used only if it is new or empty: reopening an old run's folder
would restart its nodes from their old data and mix two histories in one file.
"""

from __future__ import annotations

import base64
import datetime
import io
import zipfile
from pathlib import Path


class FolderTaken(ValueError):
    """`--out` names a folder that already holds something, or one that cannot be made
    (a path through a file, a parent without write permission)."""


def utc_stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")


def claim(parent: Path, name: str) -> Path:
    """A new folder `parent/name` (or `name-2`, `name-3`, ... if taken), created here."""
    _mkdir(parent, "results folder")
    for k in range(1, 10_000):
        path = parent / (name if k == 1 else f"{name}-{k}")
        try:
            path.mkdir()     # atomic: of two runs racing for one name, exactly one wins
        except FileExistsError:
            continue         # the name is another run's: the loser takes the next one
        except OSError as exc:
            raise FolderTaken(f"{path}: cannot be created ({exc.strerror or exc})") from None
        return path
    raise FolderTaken(f"{parent}: no free folder named {name}-N")


def claim_named(path: Path, flag: str = "--out") -> Path:
    """The folder the user named: created, or taken as it is if it exists and is empty."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        what = "is a file" if not path.is_dir() else "already holds a run or other files"
        raise FolderTaken(f"{flag}={path}: {what}; name a new folder (a run never reuses "
                          "one: its nodes would restart from the old data)")
    _mkdir(path, flag)
    return path


def _mkdir(path: Path, what: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise FolderTaken(f"{what}={path}: is a file; name a folder") from None
    except NotADirectoryError:
        raise FolderTaken(f"{what}={path}: a parent of it is a file, not a folder") from None
    except OSError as exc:
        raise FolderTaken(f"{what}={path}: cannot be created ({exc.strerror or exc})") from None


def pack(folder: Path) -> str:
    """A cell's folder as text a report can carry (zip, base64)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(folder.rglob("*")):
            if f.is_file():
                z.write(f, f.relative_to(folder).as_posix())
    return base64.b64encode(buf.getvalue()).decode("ascii")


def unpack(text: str, folder: Path) -> None:
    """Write a packed cell folder into `folder`; cell.json last, as `run_cell` does, so a
    half-written folder never looks finished."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(base64.b64decode(text))) as z:
        names = sorted(z.namelist(), key=lambda n: n == "cell.json")
        for name in names:
            target = (folder / name).resolve()
            if not target.is_relative_to(folder.resolve()):
                raise ValueError(f"a shipped cell names a file outside its folder: {name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(name))
