"""File-system change notifications on the event loop: inotify, with no thread and no timer.

Used by the discovery actors (the Claude registry, Codex rollouts, Hermes ledgers) to learn that
a file changed the moment it changed, and to cost nothing while nothing changes: one
:class:`Inotify` is one inotify descriptor (``inotify_simple``) that the event loop waits on
(``anyio.wait_readable``); a change wakes the waiting task once with every event pending.

Why not ``watchfiles``: its ``awatch`` runs a worker thread that sleeps ``step`` milliseconds,
takes the GIL and looks at its queue, over and over, whether or not anything changed (with
``step=1``, needed for a prompt badge, about 900 wake-ups a second per watcher), and it reports
neither opens nor close-after-write, which say who holds a file.

Closing never blocks the loop: the kernel releases an inotify descriptor only after an SRCU
grace period, so :meth:`Inotify.close` hands it to one closer thread per process.

Linux only (:data:`AVAILABLE`); where it is not, the actors fall back to their stat polls.
Adding a watch raises :class:`OSError` when the kernel refuses it (``ENOSPC``: the user's watch
limit, ``fs.inotify.max_user_watches``); callers count that and poll instead.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import queue
import sys
import threading
from pathlib import Path
from typing import Final, NamedTuple

import anyio

__all__ = [
    "APPEARS",
    "AVAILABLE",
    "CLOSE_WRITE",
    "CREATE",
    "DELETE",
    "DELETE_SELF",
    "IGNORED",
    "ISDIR",
    "MODIFY",
    "MOVED_FROM",
    "MOVED_TO",
    "MOVE_SELF",
    "ONLYDIR",
    "OPEN",
    "Q_OVERFLOW",
    "FsEvent",
    "Inotify",
    "nearest_existing",
    "wait_for_directory",
    "watch_nearest",
]

# The kernel's event bits (linux/inotify.h): stable ABI, spelled out so that importing this
# module never needs the library on a platform without inotify.
MODIFY = 0x2
CLOSE_WRITE = 0x8
OPEN = 0x20
MOVED_FROM = 0x40
MOVED_TO = 0x80
CREATE = 0x100
DELETE = 0x200
DELETE_SELF = 0x400
MOVE_SELF = 0x800
Q_OVERFLOW = 0x4000
IGNORED = 0x8000
ONLYDIR = 0x1000000
ISDIR = 0x40000000

try:
    if not sys.platform.startswith("linux"):
        raise ImportError("inotify is Linux only")
    import inotify_simple
except (ImportError, OSError):  # pragma: no cover - exercised off Linux only
    inotify_simple = None

#: Whether :class:`Inotify` can be used here.
AVAILABLE: bool = inotify_simple is not None


class FsEvent(NamedTuple):
    """One notification: ``path`` is the watched directory joined with the entry's name (the
    directory itself for its own events; ``""`` for a queue overflow); ``mask`` the kernel's
    bits (:data:`ISDIR` set for a directory entry)."""

    path: str
    mask: int

    @property
    def name(self) -> str:
        """The entry's name inside the watched directory."""
        return os.path.basename(self.path)

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & ISDIR)


#: Descriptors handed over by :meth:`Inotify.close`, closed by :func:`_closer`.
_CLOSING: Final[queue.SimpleQueue[io.FileIO]] = queue.SimpleQueue()
_CLOSER_STARTED = threading.Lock()
_closer_running = False


def _closer() -> None:
    """The closer thread: close each descriptor :meth:`Inotify.close` hands over."""
    while True:
        descriptor = _CLOSING.get()
        with contextlib.suppress(OSError):
            descriptor.close()


def _start_closer() -> None:
    """Start the closer thread once per process, with the first :class:`Inotify`: starting a
    thread waits for it to run, a wait that stays out of the first close."""
    global _closer_running
    with _CLOSER_STARTED:
        if not _closer_running:
            threading.Thread(target=_closer, name="inotify-closer", daemon=True).start()
            _closer_running = True


class Inotify:
    """One inotify descriptor and its watches, read from the event loop.

    Owned by one actor (one task calls :meth:`wait`). :meth:`add` / :meth:`remove` may be called
    from any thread (they are system calls on the descriptor); the watch table is only read by
    :meth:`wait`. Use as a context manager, or :meth:`close` it.

    :raises OSError: from the constructor when inotify cannot be initialised (``EMFILE``: the
        per-user instance limit).
    """

    def __init__(self) -> None:
        if inotify_simple is None:
            raise OSError(errno.ENOSYS, "inotify is not available on this platform")
        _start_closer()
        self._fd = inotify_simple.INotify()
        self._dirs: dict[int, str] = {}  # watch descriptor -> directory
        self._wds: dict[str, int] = {}  # directory -> watch descriptor
        self._closed = False

    def add(self, directory: str | os.PathLike[str], mask: int) -> bool:
        """Watch ``directory`` for ``mask`` (plus its own removal); blocking (a path lookup).

        Returns False when it is not (or no longer) a directory.

        :raises OSError: the kernel refused the watch (``ENOSPC``: watch limit reached).
        """
        path = os.fspath(directory)
        try:
            wd = self._fd.add_watch(path, mask | ONLYDIR | DELETE_SELF | MOVE_SELF)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES):
                return False
            raise
        self._dirs[wd] = path
        self._wds[path] = wd
        return True

    def remove(self, directory: str | os.PathLike[str]) -> None:
        """Stop watching ``directory`` (unknown ones are ignored)."""
        wd = self._wds.pop(os.fspath(directory), None)
        if wd is not None:
            self._dirs.pop(wd, None)
            with contextlib.suppress(OSError):  # already gone with its directory
                self._fd.rm_watch(wd)

    @property
    def watched(self) -> list[str]:
        """The directories watched now."""
        return sorted(self._wds)

    async def wait(self) -> list[FsEvent]:
        """Wait for the next notifications; return every one pending (never empty).

        A directory whose watch ended (deleted, moved away, unmounted) comes as an event on the
        directory itself with :data:`IGNORED` set, and is no longer watched. A queue overflow
        (events were lost) comes as ``FsEvent("", Q_OVERFLOW)``.
        """
        while True:
            await anyio.wait_readable(self._fd.fileno())
            out = self._drain()
            if out:
                return out

    def _drain(self) -> list[FsEvent]:
        out: list[FsEvent] = []
        for event in self._fd.read(timeout=0):
            if event.mask & Q_OVERFLOW:
                out.append(FsEvent("", Q_OVERFLOW))
                continue
            directory = self._dirs.get(event.wd)
            if directory is None:
                continue  # a watch removed meanwhile
            if event.mask & IGNORED:
                del self._dirs[event.wd]
                if self._wds.get(directory) == event.wd:
                    del self._wds[directory]
                out.append(FsEvent(directory, IGNORED))
            elif event.name:
                out.append(FsEvent(os.path.join(directory, event.name), event.mask))
            else:
                out.append(FsEvent(directory, event.mask))
        return out

    def close(self) -> None:
        """Stop watching and release the descriptor; returns at once, never blocks.

        The kernel releases an inotify descriptor only after an SRCU grace period
        (``fsnotify_destroy_group``; 13-16 ms measured on this project's machines), and
        callers close on the event loop: the closer thread (:func:`_closer`) closes the
        descriptor, so no task of the loop waits for the kernel
        (``bench/bench_codex_daemon.py --first-homes``).
        """
        if self._closed:
            return
        self._closed = True
        self._dirs.clear()
        self._wds.clear()
        _CLOSING.put(self._fd)

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """``path`` if it is a directory, else its nearest ancestor that is (blocking: stats)."""
    target = Path(path)
    for candidate in (target, *target.parents):
        if candidate.is_dir():
            return candidate
    return Path(target.anchor or "/")


#: What makes a missing path appear under its nearest existing ancestor.
APPEARS: Final = CREATE | MOVED_TO


def watch_nearest(notify: Inotify, path: str | os.PathLike[str], mask: int) -> Path:
    """Watch ``path`` for ``mask`` if it is a directory; while it is not, watch its nearest
    existing ancestor for :data:`APPEARS`, so the creation of the next missing component wakes
    the watcher at once (blocking: a path lookup per level). Returns the directory watched.

    This is how every source waits for a directory that does not exist yet (a fresh home, a
    first daemon's control directory, a first day of sessions): one inotify event, no timer.
    A caller woken by an event under an ancestor looks again and calls this again, one level
    deeper.

    :raises OSError: the kernel refused the watch (``ENOSPC``: watch limit reached).
    """
    while True:
        directory = nearest_existing(path)
        watch_mask = mask if directory == Path(path) else APPEARS
        if notify.add(directory, watch_mask):
            return directory
        # Gone between the look and the watch: look again, one level higher.


async def wait_for_directory(path: str | os.PathLike[str]) -> None:
    """Return once ``path`` is a directory, without polling (:func:`watch_nearest`).

    :raises OSError: inotify is unavailable or refused the watch.
    """
    target = Path(path)
    with Inotify() as notify:
        # Watch first, then look: an entry created in between is not missed.
        def arm() -> bool:
            if target.is_dir():
                return True
            watch_nearest(notify, target, APPEARS)
            return target.is_dir()

        while not await anyio.to_thread.run_sync(arm):
            # Something appeared (or an ancestor went): look again, one level deeper, on the
            # same descriptor (the watches already in place stay).
            await notify.wait()
