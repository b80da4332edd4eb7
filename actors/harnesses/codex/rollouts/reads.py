"""The discovery actor's blocking reads, each run in a worker thread: which files a process
holds open (:func:`fd_targets`), the ``codex`` processes (:func:`codex_processes`), one
rollout's new bytes through its tail (:func:`refresh_tail`) and its header
(:func:`read_head`). Rollouts are opened with :func:`actors.sources.files.open_evidence`:
never through a link, never blocking on a FIFO.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Final

import psutil

from actors.harnesses.codex.rollouts.ownership import RolloutOwner
from actors.harnesses.codex.rollouts.parsing import BoundaryRecord
from actors.harnesses.codex.rollouts.tail import RolloutTail
from actors.sources import procfs
from actors.sources.files import open_evidence
from messages.common import SessionKey

__all__ = [
    "HEADER_LIMIT_BYTES",
    "TailResult",
    "Tracked",
    "codex_processes",
    "fd_targets",
    "read_head",
    "read_heads",
    "refresh_all",
    "refresh_tail",
]

HEADER_LIMIT_BYTES: Final = 256 << 10  # session_meta must fit in the first 256 KiB


def fd_targets(pid: int) -> list[str] | None:
    """Open-file targets of ``pid``: [] if it is gone, None if we may not look (blocking).

    ``procfs.open_paths`` answers [] for both, which would let an unreadable fd
    table look like "holds nothing" and retire a live owner; so this reads it here.
    """
    if procfs.HAVE_PROCFS:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except PermissionError:
            return None
        except OSError:
            return []  # ENOENT/ESRCH: exited during the scan
        targets: list[str] = []
        for name in names:
            try:
                targets.append(os.readlink(f"{fd_dir}/{name}"))
            except OSError:
                continue  # closed during the scan
        return targets
    try:
        return [f.path for f in psutil.Process(pid).open_files()]
    except psutil.AccessDenied:
        return None
    except (psutil.Error, OSError):
        return []


def codex_processes() -> list[procfs.ProcessInfo]:
    """Every process whose comm is exactly ``codex``, with its start token (blocking).

    On Linux this reads ``/proc/<pid>/comm`` (a few bytes) for every pid and the
    ``stat`` line only of the ``codex`` ones: the whole-table ``procfs.scan_processes``
    parses every stat line, which costs about twice as much for the same answer.
    Elsewhere it filters ``procfs.scan_processes``.
    """
    if not procfs.HAVE_PROCFS:
        return [p for p in procfs.scan_processes() if p.comm == "codex"]
    out: list[procfs.ProcessInfo] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm", "rb") as f:
                if f.read() != b"codex\n":
                    continue
        except OSError:
            continue  # exited during the scan (or not ours to read: then not provable)
        stat = procfs.read_stat(int(name))
        if stat is not None:
            out.append(procfs.ProcessInfo(int(name), stat.ppid, stat.comm, stat.start_token))
    return out


@dataclass
class Tracked:
    """Everything known about one owned rollout (touched only under the actor's lock)."""

    path: str
    key: SessionKey
    owner: RolloutOwner
    root_key: SessionKey | None
    version: str | None
    tail: RolloutTail


@dataclass
class TailResult:
    path: str
    records: list[BoundaryRecord] = field(default_factory=list)
    vanished: bool = False
    unreadable: bool = False


def refresh_tail(tracked: Tracked) -> TailResult:
    """Stat and read one rollout's new bytes (blocking; worker thread)."""
    result = TailResult(tracked.path)
    try:
        # Never blocks (a FIFO swapped in opens at once and is refused), never follows a link.
        fd, st = open_evidence(tracked.path)
    except FileNotFoundError:
        result.vanished = True
        return result
    except OSError:
        result.unreadable = True
        return result
    try:

        def read(offset: int, length: int) -> bytes:
            return os.pread(fd, length, offset)

        result.records = tracked.tail.update(st.st_size, read, (st.st_dev, st.st_ino))
    except OSError:
        result.unreadable = True
    finally:
        os.close(fd)
    return result


def read_head(path: str) -> bytes | None:
    try:
        fd, _ = open_evidence(path)
    except OSError:
        return None
    try:
        return os.pread(fd, HEADER_LIMIT_BYTES, 0)
    except OSError:
        return None
    finally:
        os.close(fd)



def read_heads(paths_: list[str]) -> dict[str, bytes | None]:
    return {path: read_head(path) for path in paths_}


def refresh_all(targets: list[Tracked]) -> list[TailResult]:
    return [refresh_tail(t) for t in targets]
