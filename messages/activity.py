"""Outbound messages: what subscribers of the broadcast hub receive.

Published by the supervisor's broadcast hub; consumed by the tmux sink, the
store, ``paneward watch`` and tests. A subscription yields one
:class:`Snapshot`, then :class:`Transition` items in ``seq`` order, and ends
either cleanly or with an :class:`Overflow` marker.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from messages.common import (
    Attention,
    Evidence,
    ExitInfo,
    Harness,
    Id,
    Message,
    Presence,
    SessionKey,
    Turn,
)

__all__ = [
    "Activity",
    "Daemon",
    "OutboundMessage",
    "Gap",
    "Overflow",
    "PaneView",
    "Rejected",
    "Snapshot",
    "Transition",
    "Unmapped",
]


class OutboundMessage(Message, frozen=True):
    """Base of every outbound message (its settings: :class:`messages.common.Message`)."""


class Activity(OutboundMessage, frozen=True, kw_only=True):
    """The published state of one session: the three axes plus their evidence.

    Made by the session reducer; a stable public JSON contract (README).
    """

    key: SessionKey
    presence: Presence
    turn: Turn
    evidence: Evidence
    attention: Attention | None = None
    pane: Id | None = None
    exit: ExitInfo | None = None
    subagents: int = 0

    def visible(self) -> tuple[object, ...]:
        """The fields whose change is worth a transition (docs/design.md §4, Publishing)."""
        ev = self.evidence
        return (
            self.presence,
            self.turn,
            self.attention,
            ev.source,
            ev.native_state,
            ev.harness_version,
            self.pane,
            self.exit,
            self.subagents,
        )


class PaneView(OutboundMessage, frozen=True, kw_only=True):
    """Which session one pane shows: ``key`` (its turn ``turn``), the winner among the
    sessions bound to the pane by :func:`actors.core.session.reducer.pane_rank`, the same rule the
    badges and the status table use; ``hidden`` are the others bound to it, best first.
    ``note`` says why the pane shows less than it could (e.g. ``codex daemon: thread not bound
    to this pane ...``), else ``None``.

    Made by :func:`actors.core.session.reducer.pane_views` for ``paneward status --json --panes``
    (the control socket's ``status`` answer carries them as ``panes``).
    """

    pane: Id
    key: SessionKey
    turn: Turn
    hidden: tuple[SessionKey, ...] = ()
    note: str | None = None


class Transition(OutboundMessage, frozen=True, kw_only=True):
    """One published change of a session's :class:`Activity`.

    ``seq`` is global and strictly increasing; ``before`` is ``None`` for a new
    session; ``cause`` names the message that caused it (e.g.
    ``RegistryStatus:busy`` or ``HookHint:Stop``).
    """

    seq: int
    key: SessionKey
    after: Activity
    cause: str
    before: Activity | None = None

    @property
    def forgets(self) -> bool:
        """The session's last transition: the user forgot it (a
        :class:`~messages.control.Forget`); it is in no later snapshot, and the store deletes
        its row."""
        return self.cause == "Forget"


class Snapshot(OutboundMessage, frozen=True):
    """The current activity of every known session, as of ``seq``.

    The first item of every subscription made with ``snapshot=True``; the live
    transitions that follow all have a larger ``seq``.
    """

    seq: int
    activities: tuple[Activity, ...]


class Overflow(OutboundMessage, frozen=True):
    """The last item of an ``all`` subscription that fell too far behind.

    ``next_seq`` is the first transition this subscriber did not receive; the
    subscription is closed after this marker.
    """

    next_seq: int
    dropped: int
    reason: str


class Gap(OutboundMessage, frozen=True, kw_only=True):
    """Transitions the journal does not hold: ``dropped`` of them from ``next_seq`` on.

    Printed by ``paneward watch --since`` where its replay skips them, so a reader knows the
    history has a hole there and why: ``reason`` is ``overflow`` (the store's subscription fell
    behind), ``store_full`` (more rows waited than the store keeps: a stuck disk),
    ``write_failed`` (the batch could not be committed), ``shutdown`` (not flushed by the close
    deadline), ``retention`` (older than the journal keeps), ``not_committed`` (the last run
    stopped -- ``kill -9``, power loss -- before committing them; the range is every seq it had
    reserved, so some may never have been used) or ``lost_committed`` (committed, and no longer
    in the database: a damaged write-ahead log, a file put back from a backup). ``noticed_ms``
    is when.
    """

    next_seq: int
    dropped: int
    reason: str
    noticed_ms: int


class Daemon(OutboundMessage, frozen=True, kw_only=True):
    """Who answers a ``paneward watch --fleet`` stream: its first line.

    ``id`` names the daemon's seq space (a random id kept beside its database): a follower that
    saw seqs up to N from this ``id`` resumes with ``--since N``, across restarts of that
    daemon; another ``id`` is another daemon (reinstalled, or another machine behind the same
    name) whose seqs say nothing about the ones seen. ``run`` is new at every start of the
    daemon (a restart is the same ``id`` with another ``run``); ``seq`` is the seq of the
    :class:`Snapshot` that follows the journal's replay; ``version`` is paneward's there.

    Written by the control server (:mod:`actors.sources.control_server`) for a watch request
    with ``fleet``; read by a fleet follower (:mod:`actors.core.fleet.follow`).
    """

    id: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
    run: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
    seq: Annotated[int, msgspec.Meta(ge=0)]
    version: Annotated[str, msgspec.Meta(max_length=64)]


class Unmapped(OutboundMessage, frozen=True, kw_only=True):
    """A valid payload the harness module could not map; it changed no state.

    Recorded (bounded) and counted by the supervisor; ``keys`` lists at most six
    of the payload's keys.
    """

    harness: Harness
    event: str | None
    keys: tuple[str, ...]
    at_ms: int


class Rejected(OutboundMessage, frozen=True, kw_only=True):
    """An inbound message refused as malformed; recorded and counted."""

    reason: str
    origin: Literal["inject", "hook", "discovery", "routing"]
    at_ms: int
    key: Id | None = None
