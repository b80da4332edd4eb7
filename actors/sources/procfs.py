"""Process identity from the operating system: start tokens, liveness, the process tree.

Every function here is *blocking* (it reads ``/proc`` or calls psutil) and must be
called from a worker thread (``anyio.to_thread.run_sync``), never on the event
loop. Nothing here raises for a process that vanished or is unreadable: a pid can
exit between any two reads, so "gone" is an ordinary answer (``None``, ``False``
or an omitted entry), never an exception.

Start token (docs/design.md §5, process identity): on Linux it is field 22 of
``/proc/<pid>/stat`` (``starttime`` in clock ticks since boot) as a decimal
string, exactly what Claude Code writes as ``procStart`` in
``sessions/<pid>.json``. The stat line is parsed after the LAST ``)`` because the
comm field (field 2) may itself contain spaces and parentheses. Elsewhere the
token is psutil's ``create_time()`` rendered as a string: stable for one
incarnation, different for a recycled pid, which is all a token must be.

Liveness is ``os.kill(pid, 0)``: ``ESRCH`` means gone, ``EPERM`` means alive (the
process exists but belongs to another user).
"""

from __future__ import annotations

import errno
import os
import sys
import time

import msgspec
import psutil

from actors.core.procstat import StatFields, parse_stat

__all__ = [
    "HAVE_CHILDREN",
    "HAVE_PROCFS",
    "ProcessInfo",
    "children",
    "children_map",
    "is_alive",
    "list_pids",
    "listening_inodes",
    "parse_listening_inodes",
    "open_paths",
    "probe",
    "read_cmdline",
    "read_comm",
    "read_ppid",
    "read_stat",
    "read_uid",
    "scan_processes",
    "socket_holders",
    "start_token",
]

_PROC = "/proc"

# scan_processes releases the GIL this often (entries), see _scan_proc.
_YIELD_EVERY = 64

# True where /proc has the Linux layout (stat with starttime in field 22).
HAVE_PROCFS: bool = sys.platform.startswith("linux") and os.path.isfile("/proc/self/stat")


class ProcessInfo(msgspec.Struct, frozen=True):
    """One process as seen by :func:`scan_processes` (a snapshot, may be stale at once)."""

    pid: int
    ppid: int
    comm: str
    start_token: str


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        # ENOENT/ESRCH: vanished; EACCES: not ours to read. Both are "unknown".
        return None
    return data.decode("utf-8", "surrogateescape")


def _read_bytes(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # ENOENT/ESRCH: vanished; EACCES: not ours to read. Both are "unknown".
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def read_stat(pid: int) -> StatFields | None:
    """``/proc/<pid>/stat`` parsed, or ``None`` if gone (Linux only; ``None`` elsewhere)."""
    if pid <= 0 or not HAVE_PROCFS:
        return None
    data = _read_bytes(f"{_PROC}/{pid}/stat")
    return None if data is None else parse_stat(data)


def probe(pid: int) -> str | None:
    """The start token of ``pid`` if it is alive and not a zombie, else ``None``.

    Liveness is :func:`is_alive` (``ESRCH`` gone, ``EPERM`` alive); a zombie has
    exited already (it only waits to be reaped), so it counts as gone here.
    """
    if not is_alive(pid):
        return None
    if HAVE_PROCFS:
        stat = read_stat(pid)
        if stat is None or stat.state == "Z":
            return None
        return stat.start_token
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return _psutil_token(proc)
    except (psutil.Error, OSError):
        return None


def _psutil_token(proc: psutil.Process) -> str:
    # repr() of the float keeps every digit; it only has to be stable per incarnation.
    return repr(proc.create_time())


def start_token(pid: int) -> str | None:
    """The start token of ``pid``'s current incarnation, or ``None`` if it is gone."""
    if pid <= 0:
        return None
    if HAVE_PROCFS:
        stat = read_stat(pid)
        return None if stat is None else stat.start_token
    try:
        return _psutil_token(psutil.Process(pid))
    except (psutil.Error, OSError):
        return None


def is_alive(pid: int) -> bool:
    """Whether ``pid`` exists: ``os.kill(pid, 0)``, ``ESRCH`` gone, ``EPERM`` alive.

    A zombie still exists (it holds its pid until reaped), so it counts as alive
    here; the start token tells incarnations apart.
    """
    if pid <= 0:
        # 0 and negatives address process groups, never one process.
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as exc:
        return exc.errno == errno.EPERM
    return True


def read_comm(pid: int) -> str | None:
    """The process name (``/proc/<pid>/comm``, at most 15 bytes), or ``None``."""
    if pid <= 0:
        return None
    if HAVE_PROCFS:
        text = _read_text(f"{_PROC}/{pid}/comm")
        return None if text is None else text.rstrip("\n")
    try:
        return psutil.Process(pid).name()
    except (psutil.Error, OSError):
        return None


def read_uid(pid: int) -> int | None:
    """The user id ``pid`` runs as (the owner of ``/proc/<pid>``: its effective uid), or
    ``None`` if gone."""
    if pid <= 0:
        return None
    if HAVE_PROCFS:
        try:
            return os.stat(f"{_PROC}/{pid}").st_uid
        except OSError:
            return None
    try:
        return int(psutil.Process(pid).uids().effective)
    except (psutil.Error, OSError, AttributeError):
        return None


def read_cmdline(pid: int) -> list[str] | None:
    """The argument vector of ``pid``, or ``None`` if gone or unreadable.

    A zombie or kernel thread has an empty command line (``[]``).
    """
    if pid <= 0:
        return None
    if HAVE_PROCFS:
        text = _read_text(f"{_PROC}/{pid}/cmdline")
        if text is None:
            return None
        parts = text.split("\0")
        if parts and parts[-1] == "":
            parts.pop()
        return parts
    try:
        return list(psutil.Process(pid).cmdline())
    except (psutil.Error, OSError):
        return None


def read_ppid(pid: int) -> int | None:
    """The parent pid of ``pid``, or ``None`` if gone."""
    if pid <= 0:
        return None
    if HAVE_PROCFS:
        stat = read_stat(pid)
        return None if stat is None else stat.ppid
    try:
        return int(psutil.Process(pid).ppid())
    except (psutil.Error, OSError):
        return None


def list_pids() -> list[int]:
    """Every pid currently in the process table (threads excluded), ascending."""
    if HAVE_PROCFS:
        try:
            names = os.listdir(_PROC)
        except OSError:
            return []
        return sorted(int(n) for n in names if n.isdigit())
    return sorted(psutil.pids())


def open_paths(pid: int) -> list[str]:
    """Targets of ``pid``'s open file descriptors (readlink of ``/proc/<pid>/fd/*``).

    Descriptors that close or cannot be read mid-scan are skipped; a process we
    may not inspect yields ``[]``.
    """
    if pid <= 0:
        return []
    if HAVE_PROCFS:
        fd_dir = f"{_PROC}/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            return []
        paths: list[str] = []
        for fd in fds:
            try:
                paths.append(os.readlink(f"{fd_dir}/{fd}"))
            except OSError:
                continue
        return paths
    try:
        return [f.path for f in psutil.Process(pid).open_files()]
    except (psutil.Error, OSError):
        return []


def scan_processes() -> list[ProcessInfo]:
    """A snapshot of every process: pid, ppid, comm and start token.

    Raw ``/proc/<pid>/stat`` reads on Linux (one read per process), psutil
    elsewhere. Processes that vanish during the scan are omitted.
    """
    out: list[ProcessInfo] = []
    if HAVE_PROCFS:
        return _scan_proc(out)
    for proc in psutil.process_iter():
        try:
            with proc.oneshot():
                out.append(
                    ProcessInfo(
                        pid=proc.pid,
                        ppid=int(proc.ppid()),
                        comm=proc.name(),
                        start_token=_psutil_token(proc),
                    )
                )
        except (psutil.Error, OSError):
            continue
    return out


def _scan_proc(out: list[ProcessInfo]) -> list[ProcessInfo]:
    # The hot path of every discovery tick: one open+read per process and a split
    # limited to the 20 fields we need (the stat line has 52), bytes until the end.
    try:
        names = os.listdir(_PROC)
    except OSError:
        return out
    append = out.append
    for index, name in enumerate(names):
        if not index % _YIELD_EVERY:
            # Hand the GIL to the event loop thread every _YIELD_EVERY entries: otherwise it
            # waits a whole switch interval (5 ms) for this pure-Python loop.
            time.sleep(0)
        if not name.isdigit():
            continue
        try:
            # os.open/os.read: no buffered file object per process (a third of the cost).
            fd = os.open(f"{_PROC}/{name}/stat", os.O_RDONLY)
        except OSError:
            continue  # exited since listdir, or not ours to read
        try:
            data = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = parse_stat(data)
        if fields is not None:
            append(ProcessInfo(int(name), fields.ppid, fields.comm, fields.start_token))
    out.sort(key=_pid_of)
    return out


def _pid_of(info: ProcessInfo) -> int:
    return info.pid


def _have_children_files() -> bool:
    if not HAVE_PROCFS:
        return False
    me = os.getpid()
    return os.path.exists(f"{_PROC}/{me}/task/{me}/children")


#: Whether ``/proc/<pid>/task/<tid>/children`` exists (``CONFIG_PROC_CHILDREN``): then the
#: children of one process can be read without scanning the whole table.
HAVE_CHILDREN: bool = _have_children_files()


def children(pid: int) -> list[int]:
    """The child pids of ``pid`` (ascending; ``[]`` if gone), from the ``children`` file of each
    of its threads (a child belongs to the thread that forked it). Linux with
    :data:`HAVE_CHILDREN` only; elsewhere use :func:`children_map`.
    """
    try:
        tids = os.listdir(f"{_PROC}/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        data = _read_bytes(f"{_PROC}/{pid}/task/{tid}/children")
        if data:
            out.extend(int(child) for child in data.split())
    out.sort()
    return out


def children_map(processes: list[ProcessInfo] | None = None) -> dict[int, list[int]]:
    """``ppid -> [child pids, ascending]`` for the whole table (or for ``processes``)."""
    table = scan_processes() if processes is None else processes
    children: dict[int, list[int]] = {}
    for info in table:
        children.setdefault(info.ppid, []).append(info.pid)
    for kids in children.values():
        kids.sort()
    return children


_LOOPBACK4 = "0100007F"  # 127.0.0.1 as /proc/net/tcp prints it (little-endian hex)
_LOOPBACK6 = "00000000000000000000000001000000"  # ::1
_TCP_LISTEN = "0A"


def parse_listening_inodes(table: str, port: int) -> set[int]:
    """Pure: the socket inodes of ``/proc/net/tcp``/``tcp6`` text that LISTEN on loopback
    ``port`` (``127.0.0.1`` or ``::1``). Malformed lines are skipped."""
    want = f"{port:04X}"
    found: set[int] = set()
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != _TCP_LISTEN:
            continue
        address, _, local_port = fields[1].partition(":")
        if local_port != want or address not in (_LOOPBACK4, _LOOPBACK6):
            continue
        try:
            inode = int(fields[9])
        except ValueError:
            continue
        if inode > 0:
            found.add(inode)
    return found


def listening_inodes(port: int) -> set[int]:
    """The inodes of the sockets listening on loopback ``port`` (Linux; ``set()`` elsewhere
    or when ``/proc/net`` cannot be read)."""
    found: set[int] = set()
    for name in ("tcp", "tcp6"):
        text = _read_text(f"{_PROC}/net/{name}")
        if text is not None:
            found |= parse_listening_inodes(text, port)
    return found


def socket_holders(pids: list[int], inodes: set[int]) -> list[int]:
    """Those of ``pids`` that hold an open descriptor on one of the socket ``inodes``."""
    if not inodes:
        return []
    links = {f"socket:[{inode}]" for inode in inodes}
    return [pid for pid in pids if links.intersection(open_paths(pid))]
