"""The fleet's transport interface: what a link is to the merged view (pure declarations).

The merged view (:class:`actors.sources.fleet.FleetView`) follows hosts through links, and
knows a link only by this interface: it imports neither transport. Two transports implement
it: :class:`actors.sources.fleet_link.SshLink` (one host over the user's ``ssh``) and
:class:`actors.sources.nats_link.NatsLink` (every host publishing to one NATS server).

What a link delivers, per host, through ``deliver(host, changes)`` (:data:`Deliver`):

- **Host identity.** Each host is its name in every view (an SSH destination, a NATS
  publisher's ``--nats-host``) and a daemon identity (``id``, the seq space; ``run``, new at
  each start): a link hands them to the host's
  :class:`~actors.core.fleet.follow.Follower` as a :class:`~messages.Daemon` frame.
- **Frames.** ``Daemon``, then ``Transition`` (with the host's own seq), ``Gap`` (seqs that
  will not come) and ``Snapshot`` (the host's sessions as of a seq), as the host's daemon
  wrote them; the follower turns them into :data:`~actors.core.fleet.follow.Change` items
  (``Upsert`` / ``Drop`` of a host-qualified key), which are what ``deliver`` carries.
- **Health.** Each host is ``connected``, ``connecting``, ``stale`` since a time (its link lost,
  or its sign of life lapsed by the one rule, :func:`actors.core.fleet.follow.lapsed`), or
  ``unreachable`` with a reason in words to act on; :meth:`Link.hosts` reports it as
  :class:`HostRow` items, and every change of it that changes what a session shows is
  delivered as changes too.

A host name is shown from one link only (:class:`actors.sources.fleet.FleetView`): a link
delivering a name another link has is refused for it, counted and shown as ``refused``.

A link runs (:meth:`Link.run`) until cancelled and never raises for a host's failure: that is
the host's health. Its ``entry`` is the hosts-file entry it follows: the daemon's wiring
compares entries when the hosts file changes and starts, keeps or stops links by them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import msgspec

from actors.core.fleet.follow import Change, Follower
from messages.activity import Activity

__all__ = ["Deliver", "HostRow", "Link", "host_row"]

#: ``deliver(host_name, changes)``: a link hands each batch of one host's changes to the view.
Deliver = Callable[[str, Sequence[Change]], None]


class HostRow(msgspec.Struct, frozen=True, kw_only=True):
    """One host's health as ``status --json`` shows it (``hosts``). ``no_jump``: why ``next``
    and ``pick`` cannot reach this host's panes (``None`` when they can)."""

    host: str
    health: str
    since_ms: int
    reason: str | None = None
    daemon: str | None = None
    version: str | None = None
    sessions: int = 0
    no_jump: str | None = None


def host_row(follower: Follower) -> HostRow:
    """The :class:`HostRow` of a host its ``follower`` knows."""
    health = follower.health
    return HostRow(host=follower.host, health=health.state, since_ms=health.since_ms,
                   reason=health.reason, daemon=follower.daemon_id, version=follower.version,
                   sessions=len(follower.sessions))


class Link(Protocol):
    """One transport's link: one host (SSH) or every host of one server (NATS)."""

    #: The hosts-file entry followed (hashable: compared when the file changes).
    @property
    def entry(self) -> Hashable: ...

    #: The entry's name (an SSH destination, a NATS URL): unique in the hosts file.
    @property
    def name(self) -> str: ...

    #: The host names the entry itself gives (an SSH host: its destination; a NATS server:
    #: none, its hosts name themselves): each is this link's from the start (docs/fleet.md,
    #: "One name, one host").
    @property
    def named(self) -> tuple[str, ...]: ...

    def hosts(self) -> list[HostRow]:
        """Each host this link carries, with its health; a link that has reached no host yet
        reports itself (its entry's name) with the reason."""
        ...

    def attach(self, activity: Activity) -> list[str] | None:
        """The local command that shows a remote session's pane, or ``None`` when this link
        has no way to reach it."""
        ...

    def statistics(self) -> Any:
        """The link's counters (``status --counters``, under ``fleet.links``)."""
        ...

    async def run(self) -> None:
        """Follow until cancelled."""
        ...
