"""Following one host's daemon: its stream's lines in, what the merged view must change out (pure).

A :class:`Follower` holds what is known of one host: the remote daemon's identity, the last
remote seq applied, every remote session's latest :class:`~messages.Activity`, the link's
health. A transport (:mod:`actors.sources.fleet_link` runs ``ssh``; any other carries the same
lines) calls, per connection:

1. :meth:`Follower.connecting` before it starts one (and asks :meth:`Follower.since` for the
   ``--since`` to send);
2. :meth:`Follower.feed` with each line read (bytes, newline removed, already bounded in
   length by the transport's :class:`~actors.core.frames.FrameSplitter`; an oversized line is
   :meth:`Follower.oversize`) -- each returns the :data:`Change` items the merged view applies;
3. :meth:`Follower.ended` when the connection is gone, with why when it never worked.

Remote lines are untrusted. Each is checked like the hook socket's frames
(:func:`actors.core.frames.check_bytes`: NUL, invalid UTF-8, nesting) and decoded with the one
codec (:func:`messages.decode_outbound`); a line that fails, a type out of place, a transition
whose activity names another key, a seq at or below the last one applied (a duplicate), or a
session beyond :data:`MAX_SESSIONS` is counted by reason in :attr:`Follower.rejected` and
changes nothing. A remote key is a plain ``(harness, session_id)``: the merged view qualifies
it with the host's name (:class:`HostKey`, and ``host`` in the activity's own key), so no
remote line can name a local session; a remote key that already names a host is refused
(``foreign_host``: a daemon publishes only its own machine's sessions).

Resume: a ``Daemon`` line with the ``id`` already known goes on after the last seq (the
journal's replay fills what the link missed, a ``Gap`` says what it could not); another ``id``
is another daemon -- its replay is skipped and its snapshot replaces every session of the host.
A skip in the seqs that no ``Gap`` explains is counted (``unexplained``) and the snapshot that
ends the replay settles every session either way.

Health (:class:`Health`): ``connecting`` until the first line of the first connection;
``connected`` from a ``Daemon`` line on; when a connection that worked ends, ``stale`` from
that moment -- its sessions keep their presence and attention, their turn shows ``unknown``
(:func:`shown`), nothing turns ``idle`` or ``done`` for lack of news -- and ``unreachable``
(with the reason) when a try ends without working; the ``since_ms`` of a stale host stays the
moment the link was lost however many tries fail after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import msgspec

import messages
from actors.core.frames import check_bytes
from messages.activity import Activity, Daemon, Gap, Overflow, Snapshot, Transition
from messages.common import SessionKey

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_SESSIONS",
    "Change",
    "Drop",
    "Follower",
    "Health",
    "HealthState",
    "HostKey",
    "Upsert",
    "shown",
]

#: The longest remote line taken: a snapshot of :data:`MAX_SESSIONS` ordinary activities fits.
MAX_LINE_BYTES: Final = 16 << 20
#: The most sessions kept per host; a new session beyond it is refused (``too_many_sessions``).
MAX_SESSIONS: Final = 10_000
_MAX_GAPS: Final = 64

HealthState = Literal["connecting", "connected", "stale", "unreachable"]


@dataclass(frozen=True, slots=True)
class HostKey:
    """A remote session's key in the merged view: the host's name and the remote key."""

    host: str
    key: SessionKey

    def __str__(self) -> str:
        return f"{self.host}/{self.key}"


@dataclass(frozen=True, slots=True)
class Health:
    """One host's link: ``state`` since ``since_ms``; ``reason`` why it is unreachable (or why
    the last try failed while stale), in words to act on."""

    state: HealthState
    since_ms: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Upsert:
    """Show ``activity`` for ``key`` (its own key qualified with the host); ``seq`` the remote
    seq it is as of; ``edge`` whether it is one remote transition (else a snapshot settled it,
    or the host's health changed how it shows); ``cause`` the remote transition's cause
    (``Snapshot``, ``HostHealth`` otherwise)."""

    key: HostKey
    activity: Activity
    seq: int
    cause: str
    edge: bool = False


@dataclass(frozen=True, slots=True)
class Drop:
    """``key`` is no longer on its host: forgotten there (``cause`` ``Forget``, ``seq`` that
    transition's), or not in the snapshot that settled the host (``Snapshot``)."""

    key: HostKey
    cause: str
    seq: int = 0


Change = Upsert | Drop


def shown(activity: Activity, health: Health) -> Activity:
    """What the merged view shows of a remote ``activity`` while its host is ``health``: as it
    is when connected; otherwise its turn ``unknown`` (presence, attention and the rest kept:
    no news is not news of an end)."""
    if health.state == "connected" or activity.turn == "unknown":
        return activity
    return msgspec.structs.replace(activity, turn="unknown")


@dataclass
class Follower:
    """What is known of one host's daemon (see the module docstring)."""

    host: str
    max_sessions: int = MAX_SESSIONS
    health: Health = field(default_factory=lambda: Health("connecting", 0))
    daemon_id: str | None = None
    run: str | None = None
    version: str | None = None
    last_seq: int = 0
    sessions: dict[SessionKey, Activity] = field(default_factory=dict)
    #: Lines refused, by reason; transitions applied; duplicates skipped; seqs skipped unexplained.
    rejected: dict[str, int] = field(default_factory=dict)
    applied: int = 0
    duplicates: int = 0
    unexplained: int = 0
    connections: int = 0
    restarts: int = 0
    new_daemons: int = 0
    gaps: list[tuple[int, int, str]] = field(default_factory=list)
    _phase: Literal["hello", "replay", "live"] = "hello"
    _skip_to: int = 0
    _worked: bool = False

    # ---------------------------------------------------------------- the connection

    def since(self) -> int | None:
        """The ``--since`` of the next connection: the last seq of a known daemon."""
        return self.last_seq if self.daemon_id is not None else None

    def connecting(self, now_ms: int) -> None:
        """A connection is being made."""
        self._phase = "hello"
        self._worked = False
        if self.health.state == "connecting" and self.health.since_ms == 0:
            self.health = Health("connecting", now_ms)

    def ended(self, now_ms: int, reason: str | None) -> list[Change]:
        """The connection is gone; ``reason`` why, when it never answered (the transport's
        words, :func:`actors.core.fleet.unreachable_reason`). Returns the changes that show
        the host's sessions stale (their turn ``unknown``)."""
        if self._worked:
            self.health = Health("stale", now_ms)
        elif self.health.state in ("stale", "unreachable") and self.sessions:
            self.health = Health("stale", self.health.since_ms, reason)
        else:
            self.health = Health("unreachable", now_ms, reason or "the connection closed")
        self._phase = "hello"
        self._worked = False
        return self._reshow()

    def _reshow(self) -> list[Change]:
        return [
            Upsert(HostKey(self.host, key), shown(activity, self.health), self.last_seq,
                   "HostHealth")
            for key, activity in self.sessions.items()
        ]

    # ---------------------------------------------------------------- the lines

    def _reject(self, reason: str) -> list[Change]:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        return []

    def oversize(self) -> list[Change]:
        """A line longer than :data:`MAX_LINE_BYTES` was skipped by the transport."""
        return self._reject("oversize")

    def feed(self, line: bytes, now_ms: int) -> list[Change]:
        """One line of the stream: the changes for the merged view (see the module). A blank
        line is skipped (a transport may send them to keep a link busy)."""
        if not line.strip():
            return []
        problem = check_bytes(line)
        if problem is not None:
            return self._reject(problem.reason)
        try:
            frame = messages.decode_outbound(line)
        except messages.MessageError:
            return self._reject("invalid")
        if self._phase == "hello":
            if not isinstance(frame, Daemon):
                return self._reject("no_daemon_line")
            return self._hello(frame, now_ms)
        if isinstance(frame, Transition):
            return self._transition(frame)
        if isinstance(frame, Snapshot):
            return self._snapshot(frame)
        if isinstance(frame, Gap):
            if self._phase == "replay" and self._skip_to:
                return []
            self.gaps = [*self.gaps[-(_MAX_GAPS - 1):], (frame.next_seq, frame.dropped,
                                                          frame.reason)]
            if frame.next_seq + frame.dropped - 1 > self.last_seq:
                self.last_seq = frame.next_seq + frame.dropped - 1
            return []
        if isinstance(frame, Overflow):
            return []  # the remote closes the stream next: the reconnect resumes after last_seq
        return self._reject("unexpected_type")

    def _hello(self, frame: Daemon, now_ms: int) -> list[Change]:
        self.connections += 1
        self._worked = True
        was_stale = self.health.state != "connected"
        self.health = Health("connected", now_ms)
        if frame.id == self.daemon_id and frame.seq >= self.last_seq:
            if frame.run != self.run:
                self.restarts += 1
            self._skip_to = 0
        else:
            if self.daemon_id is not None:
                self.new_daemons += 1
            # another daemon (or a seq space that went back): its replay says nothing of ours
            self._skip_to = frame.seq
            self.last_seq = 0
        self.daemon_id, self.run, self.version = frame.id, frame.run, frame.version
        self._phase = "replay"
        # until the snapshot settles them, what is held shows again as connected
        return self._reshow() if was_stale else []

    def _qualified(self, activity: Activity) -> Activity:
        key = activity.key
        return msgspec.structs.replace(
            activity, key=SessionKey(key.harness, key.session_id, host=self.host)
        )

    def _transition(self, frame: Transition) -> list[Change]:
        if self._phase == "replay" and self._skip_to and frame.seq <= self._skip_to:
            return []
        if frame.after.key != frame.key:
            return self._reject("key_mismatch")
        if frame.key.host is not None:
            return self._reject("foreign_host")
        if frame.seq <= self.last_seq:
            self.duplicates += 1
            return []
        if self.last_seq and frame.seq > self.last_seq + 1:
            self.unexplained += frame.seq - self.last_seq - 1
        self.last_seq = frame.seq
        key = HostKey(self.host, frame.key)
        if frame.forgets:
            self.sessions.pop(frame.key, None)
            self.applied += 1
            return [Drop(key, frame.cause, frame.seq)]
        if frame.key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return self._reject("too_many_sessions")
        after = self._qualified(frame.after)
        self.sessions[frame.key] = after
        self.applied += 1
        return [Upsert(key, shown(after, self.health), frame.seq, frame.cause, edge=True)]

    def _snapshot(self, frame: Snapshot) -> list[Change]:
        if self._phase != "replay":
            return self._reject("unexpected_type")
        self._phase = "live"
        self._skip_to = 0
        changes: list[Change] = []
        fresh: dict[SessionKey, Activity] = {}
        for activity in frame.activities:
            if activity.key.host is not None:
                self._reject("foreign_host")
                continue
            if len(fresh) >= self.max_sessions:
                self._reject("too_many_sessions")
                continue
            fresh[activity.key] = self._qualified(activity)
        if frame.seq > self.last_seq:
            if self.last_seq:  # the replay should have reached the snapshot's seq
                self.unexplained += frame.seq - self.last_seq
            self.last_seq = frame.seq
        for key in [k for k in self.sessions if k not in fresh]:
            del self.sessions[key]
            changes.append(Drop(HostKey(self.host, key), "Snapshot", self.last_seq))
        for key, activity in fresh.items():
            if self.sessions.get(key) != activity:
                self.sessions[key] = activity
                changes.append(Upsert(HostKey(self.host, key), activity, self.last_seq,
                                      "Snapshot"))
        return changes
