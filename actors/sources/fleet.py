"""The fleet in the daemon: one link per host, and the merged view's remote part.

:class:`FleetView` is the ``deliver(host, changes)`` every transport calls
(:mod:`actors.sources.fleet_link`; the interface is docs/fleet.md): it keeps each remote
session's shown :class:`~messages.Activity` (its key carries ``host``) and hands each change
to the watchers as a :class:`~messages.Transition` line whose ``seq`` is the host's (the local
seqs are the local daemon's alone). It never knows which transport carried a host.

The control server (:mod:`actors.sources.control_server`) reads it for ``status`` (the remote
activities after the local ones, every host's health) and subscribes each ``watch`` to it.
Remote sessions never enter the supervisor, the store or the tmux bridge: they cannot touch a
local session or pane, and each host's own daemon is their durable log.

Started by the daemon's wiring (:mod:`actors.cli.daemon`) when the hosts file has hosts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import messages
from actors.core.fleet import attach_argv
from actors.core.fleet_follow import Change, Drop, Upsert
from actors.sources.fleet_link import SshLink
from messages.activity import Activity, Transition
from messages.common import SessionKey

__all__ = ["FleetView", "WATCH_BATCHES"]

#: Batches of lines a watcher may lag behind before it is cut off (it then reconnects).
WATCH_BATCHES: Final = 4096


class FleetView:
    """The remote sessions of every host and their health (see the module docstring)."""

    def __init__(self, links: Sequence[SshLink] = ()) -> None:
        self.links = list(links)
        self._shown: dict[SessionKey, Activity] = {}
        self._watchers: set[MemoryObjectSendStream[bytes]] = set()
        self.delivered = 0
        self.watchers_cut = 0
        self._changed = anyio.Event()

    # --------------------------------------------------------------- the transports' side

    def deliver(self, host: str, changes: Sequence[Change]) -> None:
        """Apply one batch of a host's changes; every watcher gets them as one write."""
        del host  # the changes' keys name it
        lines: list[Transition] = []
        for change in changes:
            key = change.key
            qualified = SessionKey(key.key.harness, key.key.session_id, host=key.host)
            before = self._shown.get(qualified)
            if isinstance(change, Upsert):
                self._shown[qualified] = change.activity
                lines.append(Transition(seq=change.seq, key=qualified, after=change.activity,
                                        cause=change.cause, before=before))
            elif isinstance(change, Drop) and before is not None:
                del self._shown[qualified]
                gone = msgspec.structs.replace(before, pane=None, attention=None)
                lines.append(Transition(seq=change.seq, key=qualified, after=gone,
                                        cause="Forget", before=before))
        self.delivered += len(lines)
        if lines:
            self._changed.set()
            self._changed = anyio.Event()
        if not lines or not self._watchers:
            return
        data = messages.encode_lines(lines)
        for watcher in list(self._watchers):
            try:
                watcher.send_nowait(data)
            except anyio.WouldBlock:
                self.watchers_cut += 1
                self._watchers.discard(watcher)
                watcher.close()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._watchers.discard(watcher)

    # --------------------------------------------------------------- the readers' side

    def activities(self, host: str | None = None) -> list[Activity]:
        """Every remote session's shown activity (of ``host`` only, if given)."""
        if host is None:
            return list(self._shown.values())
        return [a for a in self._shown.values() if a.key.host == host]

    def hosts(self) -> list[dict[str, Any]]:
        """Each host's health, as ``status --json`` shows it (``hosts``)."""
        out = []
        for link in self.links:
            stats = link.statistics()
            out.append({"host": stats.host, "health": stats.health, "since_ms": stats.since_ms,
                        "reason": stats.reason, "daemon": stats.daemon,
                        "version": stats.version, "sessions": stats.sessions})
        return out

    def attach(self, activity: Activity) -> list[str] | None:
        """The local command that shows a remote session's pane (``ssh -t HOST tmux attach
        ...``, :func:`actors.core.fleet.attach_argv`), ``None`` without a usable pane."""
        link = next((lk for lk in self.links if lk.host.name == activity.key.host), None)
        if link is None or activity.pane is None:
            return None
        return attach_argv(link.host, link.control_dir, activity.pane,
                           keepalive_s=link.keepalive_s, ssh=link.ssh)

    async def wait_changed(self) -> None:
        """Until the next batch of changes (the tmux summary counts remote sessions)."""
        await self._changed.wait()

    def names(self) -> list[str]:
        return [link.host.name for link in self.links]

    def subscribe(self) -> MemoryObjectReceiveStream[bytes]:
        """A watcher's stream of remote lines (encoded batches); close it to leave. A watcher
        more than :data:`WATCH_BATCHES` batches behind is cut off (its stream ends)."""
        send, receive = anyio.create_memory_object_stream[bytes](WATCH_BATCHES)
        self._watchers.add(send)
        return receive

    def statistics(self) -> dict[str, Any]:
        return {
            "hosts": [msgspec.to_builtins(link.statistics()) for link in self.links],
            "sessions": len(self._shown),
            "delivered": self.delivered,
            "watchers": len(self._watchers),
            "watchers_cut": self.watchers_cut,
        }
