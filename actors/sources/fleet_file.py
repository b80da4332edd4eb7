"""The hosts file, followed while the daemon runs: a change to it changes the links at once.

:class:`FleetFile` watches ``fleet.toml``'s directory with inotify (its nearest existing
ancestor while it is missing: :func:`actors.sources.fswatch.watch_nearest`; no timer), and at
every event there reads the file again. A text that differs from the one last applied is
parsed (``read``, blocking, in a worker thread) and its links (``links_for``) handed to the
merged view (:meth:`actors.sources.fleet.FleetView.use`): hosts added start following, hosts
removed leave the view, the others go on untouched. A file that cannot be used -- not TOML, a
bad entry -- is logged with the reason and counted (``errors``, ``last_error``) and changes
nothing: the links of the last good file keep running, and ``status`` says so under the hosts
(:meth:`actors.sources.fleet.FleetView.file_line`) until a good file is applied. A missing file
is an empty fleet.

Started by the daemon's wiring (:mod:`actors.cli.daemon`) under the supervisor (``fleet-file``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import anyio
import msgspec

from actors.core.clock import now_ms
from actors.core.fleet.hosts import Fleet, FleetFileError
from actors.core.fleet.transport import Link
from actors.sources import fswatch
from actors.sources.fleet import FleetView

__all__ = ["FleetFile", "FleetFileStatistics", "read_text"]

logger = logging.getLogger("paneward.fleet")

#: What in the file's directory can change the file: written, renamed over, made, removed.
_CHANGES: Final = (fswatch.CLOSE_WRITE | fswatch.MOVED_TO | fswatch.MOVED_FROM
                   | fswatch.CREATE | fswatch.DELETE)


class FleetFileStatistics(msgspec.Struct, kw_only=True):
    """``reloads``: files applied after the first; ``errors``: files refused (the last one's
    reason in ``last_error``, ``None`` again once a good file is applied); ``started`` /
    ``stopped``: links started and stopped by reloads."""

    path: str
    reloads: int = 0
    errors: int = 0
    last_error: str | None = None
    started: int = 0
    stopped: int = 0


class FleetFile:
    """Follows the hosts file at ``path`` for ``view`` (see the module docstring).

    :param read: the file's fleet (blocking; :exc:`FleetFileError` when it cannot be used).
    :param links_for: the links of a fleet (:exc:`FleetFileError` when they cannot be made).
    :param applied: the text the view's links come from already (the file read at start).
    """

    def __init__(
        self, path: str, view: FleetView, read: Callable[[str], Fleet],
        links_for: Callable[[Fleet], Sequence[Link]], *, applied: str | None = None,
    ) -> None:
        self.path = path
        self._view = view
        self._read = read
        self._links_for = links_for
        self._applied = applied
        self._refused_text: str | None = None
        self._stats = FleetFileStatistics(path=path)
        self._changed = anyio.Event()

    def statistics(self) -> FleetFileStatistics:
        return msgspec.structs.replace(self._stats)

    async def wait_changed(self) -> None:
        """Until the next look at the file (applied, refused or unchanged)."""
        await self._changed.wait()

    async def run(self, sink: object = None) -> None:
        """Watch and apply until cancelled."""
        del sink
        directory = os.path.dirname(self.path)
        while True:
            with fswatch.Inotify() as notify:
                # Watch first, then read: a write in between is not missed.
                await anyio.to_thread.run_sync(fswatch.watch_nearest, notify, directory,
                                               _CHANGES)
                await self._look()
                await notify.wait()

    async def _look(self) -> None:
        try:
            text = await anyio.to_thread.run_sync(read_text, self.path)
        except OSError as exc:
            self._refused(f"{self.path}: cannot read it: {exc}")
            return
        if text != self._applied and text != self._refused_text:
            try:
                fleet = await anyio.to_thread.run_sync(self._read, self.path)
                links = self._links_for(fleet)
            except FleetFileError as exc:
                self._refused_text = text  # counted once, however often the directory moves
                self._refused(str(exc))
            else:
                started, stopped = self._view.use(links)
                stats = self._stats
                if self._applied is not None:
                    stats.reloads += 1
                    logger.info("fleet: %s read again: %d links started, %d stopped",
                                self.path, started, stopped)
                stats.started += started
                stats.stopped += stopped
                stats.last_error = None
                self._view.file_used()
                self._applied, self._refused_text = text, None
        self._changed.set()
        self._changed = anyio.Event()

    def _refused(self, reason: str) -> None:
        self._stats.errors += 1
        if reason != self._stats.last_error:
            logger.error("fleet: %s; the hosts followed stay as they were", reason)
        self._stats.last_error = reason
        self._view.file_refused(reason, now_ms(), kept=self._applied is not None)
        self._changed.set()
        self._changed = anyio.Event()


def read_text(path: str) -> str:
    """The file's text, ``""`` when there is none (an empty fleet); blocking.

    :raises OSError: it exists and cannot be read.
    """
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ""
