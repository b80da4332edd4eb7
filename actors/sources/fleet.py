"""The fleet in the daemon: the merged view's remote part, and the links it runs.

:class:`FleetView` is the ``deliver(host, changes)`` every transport calls: it keeps each
remote session's shown :class:`~messages.Activity` (its key carries ``host``) and hands each
change to the watchers as a :class:`~messages.Transition` line whose ``seq`` is the host's (the
local seqs are the local daemon's alone). It knows a link only by the transport interface
(:class:`actors.core.fleet.transport.Link`) and imports neither transport: the SSH link and the
NATS link are made by the daemon's wiring (:mod:`actors.cli.daemon`), which hands them over.

:meth:`FleetView.run` runs every link (one supervisor actor, ``fleet``); :meth:`FleetView.use`
replaces the set of links while it runs -- a link whose entry is unchanged keeps running, a
removed one is cancelled and its hosts' sessions leave the view (a ``Forget`` line each), a new
one starts (the hosts file re-read, :mod:`actors.sources.fleet_file`). Each link delivers
through its own :meth:`FleetView.deliver_for`, by which one host name is one host: a name two
links carry is shown from one of them, the other refused (docs/fleet.md, "One name, one host").
While the hosts file cannot be used, :meth:`FleetView.file_line` says why for ``status``.

The control server (:mod:`actors.sources.control_server`) reads it for ``status`` (the remote
activities after the local ones, every host's health) and subscribes each ``watch`` to it.
Remote sessions never enter the supervisor, the store or the tmux bridge: they cannot touch a
local session or pane, and each host's own daemon is their durable log.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from typing import Any, Final

import anyio
import anyio.abc
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

import messages
from actors.core.clock import now_ms
from actors.core.fleet.follow import Change, Drop, HostKey, Upsert
from actors.core.fleet.hosts import file_problem_line
from actors.core.fleet.transport import Deliver, HostRow, Link
from messages.activity import Activity, Transition
from messages.common import SessionKey

__all__ = ["FleetView", "WATCH_BATCHES"]

logger = logging.getLogger("paneward.fleet")

#: Batches of lines a watcher may lag behind before it is cut off (it then reconnects).
WATCH_BATCHES: Final = 4096


class FleetView:
    """The remote sessions of every host and their health (see the module docstring)."""

    def __init__(self, links: Sequence[Link] = ()) -> None:
        self.links: list[Link] = list(links)
        self._scopes: dict[Hashable, anyio.CancelScope] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._shown: dict[SessionKey, Activity] = {}
        self._watchers: set[MemoryObjectSendStream[bytes]] = set()
        self.delivered = 0
        self.watchers_cut = 0
        self._changed = anyio.Event()
        #: host name -> the name of the link its shown sessions come from
        self._owner: dict[str, str] = {}
        #: (host, link name) -> (when first refused, batches refused)
        self._refused: dict[tuple[str, str], list[int]] = {}
        #: (why, since when, whether a good file's links are followed) while the hosts file
        #: cannot be used
        self._file_problem: tuple[str, int, bool] | None = None

    # --------------------------------------------------------------- the links

    def file_refused(self, error: str, at_ms: int, *, kept: bool) -> None:
        """The hosts file cannot be used (``error`` says why; ``kept``: the links of the last
        good file go on); called by :mod:`actors.sources.fleet_file` and the daemon's
        wiring. Shown by :meth:`file_line` from the first refusal until :meth:`file_used`."""
        since = at_ms if self._file_problem is None else self._file_problem[1]
        self._file_problem = (error, since, kept)

    def file_used(self) -> None:
        """The hosts file was read and its links are followed."""
        self._file_problem = None

    def file_line(self) -> str | None:
        """``fleet: <why> (since T; ...)`` while the hosts file cannot be used (``status``
        shows it under the hosts: :func:`actors.core.fleet.hosts.file_problem_line`)."""
        if self._file_problem is None:
            return None
        error, since, kept = self._file_problem
        return file_problem_line(error, since, kept=kept)

    @property
    def configured(self) -> bool:
        """Whether any host or server is followed (the views show a fleet only then)."""
        return bool(self.links)

    async def run(self, sink: object = None) -> None:
        """Run every link until cancelled (``sink`` unused: the supervisor's actor call)."""
        del sink
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                for link in self.links:
                    self._start(link)
                await anyio.sleep_forever()
            finally:
                self._tg = None
                self._scopes.clear()

    def _start(self, link: Link) -> None:
        assert self._tg is not None
        scope = anyio.CancelScope()
        self._scopes[link.entry] = scope

        async def one() -> None:
            with scope:
                await link.run()

        self._tg.start_soon(one)

    def use(self, links: Sequence[Link]) -> tuple[int, int]:
        """Follow ``links`` from now on: a link whose ``entry`` is already followed is kept
        (the new one is dropped unused), one no longer there is cancelled and the sessions of
        the hosts it carried leave the view. Returns ``(started, stopped)``."""
        kept = {link.entry: link for link in self.links}
        wanted = {link.entry: link for link in links}
        gone = [link for entry, link in kept.items() if entry not in wanted]
        fresh = [link for entry, link in wanted.items() if entry not in kept]
        self.links = [kept.get(entry, link) for entry, link in wanted.items()]
        for link in gone:
            scope = self._scopes.pop(link.entry, None)
            if scope is not None:
                scope.cancel()
            carried = {row.host for row in link.hosts()} | {
                host for host, owner in self._owner.items() if owner == link.name}
            for host in carried:
                if self._owner.get(host, link.name) == link.name:
                    self._owner.pop(host, None)
                    self._forget(host)
        names = {link.name for link in self.links}
        self._refused = {pair: seen for pair, seen in self._refused.items() if pair[1] in names}
        for link in self.links:
            for host in link.named:
                owner = self._owner.get(host)
                if owner is not None and owner != link.name:
                    # a name the hosts file gives is that entry's: what another link showed
                    # under it leaves the view
                    self._forget(host)
                self._owner[host] = link.name
        if self._tg is not None:
            for link in fresh:
                self._start(link)
        return len(fresh), len(gone)

    def _forget(self, host: str) -> None:
        """Every shown session of ``host`` leaves the view (a ``Forget`` line each)."""
        self.deliver(host, [
            Drop(HostKey(host, SessionKey(a.key.harness, a.key.session_id)), "Forget")
            for a in self.activities(host)
        ])

    # --------------------------------------------------------------- the transports' side

    def deliver_for(self, name: str) -> Deliver:
        """The ``deliver(host, changes)`` of the link named ``name`` (:attr:`Link.name`).

        One name, one host: a host name belongs to the entry that names it (an SSH host's
        destination), else to the first link that delivers it; a link delivering a name that
        belongs to another is refused for it -- nothing of it is shown, each batch is counted
        (``refused_hosts``) and its row in :meth:`hosts` says ``refused`` and why."""

        def deliver(host: str, changes: Sequence[Change]) -> None:
            owner = self._owner.setdefault(host, name)
            if owner == name:
                self.deliver(host, changes)
                return
            seen = self._refused.get((host, name))
            if seen is None:
                self._refused[(host, name)] = [now_ms(), 1]
                logger.error("fleet: %s", self._refusal(host, name, owner))
            else:
                seen[1] += 1

        return deliver

    def _refusal(self, host: str, name: str, owner: str) -> str:
        if any(host in link.named for link in self.links if link.name == owner):
            shown = f"that is the SSH host {host} of the hosts file, the one shown"
        else:
            shown = f"which {owner} carried first: {owner}'s is the one shown"
        return (f"{name} carries a host named {host}, {shown} (publish the other under another "
                "name: paneward run --nats-host NAME)")

    def deliver(self, host: str, changes: Sequence[Change]) -> None:
        """Apply one batch of a host's changes; every watcher gets them as one write (the
        links deliver through :meth:`deliver_for`)."""
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
        """Each host's health, as ``status --json`` shows it (``hosts``): every link's
        :class:`~actors.core.fleet.transport.HostRow` items; a host a link is refused for
        (:meth:`deliver_for`) is ``refused``, since its first refused batch, with the reason."""
        rows = []
        for link in self.links:
            for row in link.hosts():
                owner = self._owner.get(row.host, link.name)
                if owner != link.name:
                    since = self._refused.get((row.host, link.name), [row.since_ms])[0]
                    row = HostRow(host=row.host, health="refused", since_ms=since,
                                  reason=self._refusal(row.host, link.name, owner))
                rows.append(msgspec.to_builtins(row))
        return rows

    def attach(self, activity: Activity) -> list[str] | None:
        """The local command that shows a remote session's pane (the first link that has
        one: ``ssh -t HOST tmux attach ...`` for an SSH host), ``None`` without one."""
        for link in self.links:
            command = link.attach(activity)
            if command is not None:
                return command
        return None

    async def wait_changed(self) -> None:
        """Until the next batch of changes (the tmux summary counts remote sessions)."""
        await self._changed.wait()

    def names(self) -> list[str]:
        return [row.host for link in self.links for row in link.hosts()]

    def subscribe(self) -> MemoryObjectReceiveStream[bytes]:
        """A watcher's stream of remote lines (encoded batches); close it to leave. A watcher
        more than :data:`WATCH_BATCHES` batches behind is cut off (its stream ends)."""
        send, receive = anyio.create_memory_object_stream[bytes](WATCH_BATCHES)
        self._watchers.add(send)
        return receive

    def statistics(self) -> dict[str, Any]:
        return {
            "hosts": self.hosts(),
            "links": [msgspec.to_builtins(link.statistics()) for link in self.links],
            "sessions": len(self._shown),
            "delivered": self.delivered,
            "watchers": len(self._watchers),
            "watchers_cut": self.watchers_cut,
            "refused_hosts": {f"{host} via {name}": seen[1]
                              for (host, name), seen in self._refused.items()},
        }
