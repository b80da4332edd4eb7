"""Following one host's daemon: the frames a transport carries in, what the merged view must
change out (pure).

A :class:`Follower` holds what is known of one host: the remote daemon's identity, the last
remote seq applied, every remote session's latest :class:`~messages.Activity`, the link's
health. It is the transport interface's inner half (docs/fleet.md, "One transport interface";
the outer half, what a link is to the merged view, is :mod:`actors.core.fleet.transport`). A
transport calls, per connection:

1. :meth:`Follower.connecting` before it starts one (and asks :meth:`Follower.since` for the
   seq to resume after);
2. the frames as they come: :meth:`Follower.hello` (the host's daemon identity: a
   :class:`~messages.Daemon`), then :meth:`Follower.transition`, :meth:`Follower.gap` and
   :meth:`Follower.snapshot` -- or, for a transport that carries lines (SSH: ``paneward watch
   --fleet``), :meth:`Follower.feed` with each line read (bytes, newline removed, already
   bounded in length by the transport's :class:`~actors.core.ingress.frames.FrameSplitter`; an
   oversized line is :meth:`Follower.oversize`), which decodes it and calls the same;
3. :meth:`Follower.lapse` when the host's sign of life stops while the connection is up (a NATS
   host's heartbeat, :func:`lapsed`), and :meth:`Follower.ended` when the connection is gone,
   with why when it never worked.

Each returns the :data:`Change` items the merged view applies.

Remote lines are untrusted. Each is checked like the hook socket's frames
(:func:`actors.core.ingress.frames.check_bytes`: NUL, invalid UTF-8, nesting) and decoded with the
one codec (:func:`messages.decode_outbound`); a line that fails, a type out of place, a transition
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
``connected`` from a ``Daemon`` line on; ``stale`` from the moment a connection that worked
ends or the host's sign of life lapses -- its sessions keep their presence and attention,
their turn shows ``unknown`` (:func:`shown`), nothing turns ``idle`` or ``done`` for lack of
news -- and ``unreachable`` (with the reason) when a try ends without working; the
``since_ms`` of a stale host stays the moment the link was lost however many tries fail after
it. One rule says when silence is a lapse, whatever the transport (:func:`lapsed`):
:data:`STALE_AFTER_INTERVALS` of the host's liveness interval -- SSH's keepalive
(``ServerAliveCountMax`` is one less: :func:`actors.core.fleet.hosts.ssh_argv`), a NATS host's
heartbeat interval.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import msgspec

import messages
from actors.core.ingress.frames import check_bytes
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
    "STALE_AFTER_INTERVALS",
    "Upsert",
    "lapsed",
    "shown",
    "turn_unknown",
]

#: The longest remote line taken: a snapshot of :data:`MAX_SESSIONS` ordinary activities fits.
MAX_LINE_BYTES: Final = 16 << 20
#: The most sessions kept per host; a new session beyond it is refused (``too_many_sessions``).
MAX_SESSIONS: Final = 10_000
_MAX_GAPS: Final = 64
#: A host whose link has shown no sign of life for this many of its liveness intervals is
#: stale: SSH keepalives (``ServerAliveInterval``), a NATS host's heartbeats.
STALE_AFTER_INTERVALS: Final = 2


def lapsed(last_sign_ms: int, interval_ms: int, now_ms: int) -> bool:
    """Whether a host last heard from at ``last_sign_ms``, which shows a sign of life every
    ``interval_ms``, is stale at ``now_ms`` (:data:`STALE_AFTER_INTERVALS`)."""
    return now_ms - last_sign_ms > STALE_AFTER_INTERVALS * interval_ms

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


def turn_unknown(activity: Activity) -> Activity:
    """``activity`` as shown for a host not heard from: its turn ``unknown``, presence,
    attention and the rest kept (no news is not news of an end)."""
    if activity.turn == "unknown":
        return activity
    return msgspec.structs.replace(activity, turn="unknown")


def shown(activity: Activity, health: Health) -> Activity:
    """What the merged view shows of a remote ``activity`` while its host is ``health``: as it
    is when connected; otherwise :func:`turn_unknown`."""
    if health.state == "connected":
        return activity
    return turn_unknown(activity)


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
        words, :func:`actors.core.fleet.hosts.unreachable_reason`). Returns the changes that show
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

    def lapse(self, now_ms: int, reason: str) -> list[Change]:
        """The host's sign of life stopped (:func:`lapsed`) while the connection is up: stale
        from ``now_ms`` (``reason`` says which sign); the changes that show it. A host not
        connected stays as it is."""
        if self.health.state != "connected":
            return []
        self.health = Health("stale", now_ms, reason)
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

    def decode(self, line: bytes) -> messages.Outbound | None:
        """One remote message, checked and decoded by the one codec; ``None`` (counted by
        reason in :attr:`rejected`) when it is not one."""
        problem = check_bytes(line)
        if problem is not None:
            self._reject(problem.reason)
            return None
        try:
            return messages.decode_outbound(line)
        except messages.MessageError:
            self._reject("invalid")
            return None

    def refuse(self, reason: str) -> None:
        """A frame the transport refused before it got here (``reason`` counted)."""
        self._reject(reason)

    def oversize(self) -> list[Change]:
        """A line longer than :data:`MAX_LINE_BYTES` was skipped by the transport."""
        return self._reject("oversize")

    def feed(self, line: bytes, now_ms: int) -> list[Change]:
        """One line of the stream: the changes for the merged view (see the module). A blank
        line is skipped (a transport may send them to keep a link busy)."""
        if not line.strip():
            return []
        frame = self.decode(line)
        if frame is None:
            return []
        if self._phase == "hello":
            if not isinstance(frame, Daemon):
                return self._reject("no_daemon_line")
            return self.hello(frame, now_ms)
        if isinstance(frame, Transition):
            return self.transition(frame)
        if isinstance(frame, Snapshot):
            return self.snapshot(frame)
        if isinstance(frame, Gap):
            return self.gap(frame)
        if isinstance(frame, Overflow):
            return []  # the remote closes the stream next: the reconnect resumes after last_seq
        return self._reject("unexpected_type")

    def gap(self, frame: Gap) -> list[Change]:
        """The host's daemon says seqs ``next_seq`` .. ``next_seq + dropped - 1`` are not
        coming (kept in :attr:`gaps`, the last :data:`_MAX_GAPS`); changes nothing shown."""
        if self._phase == "replay" and self._skip_to:
            return []
        self.gaps = [*self.gaps[-(_MAX_GAPS - 1):], (frame.next_seq, frame.dropped,
                                                      frame.reason)]
        if frame.next_seq + frame.dropped - 1 > self.last_seq:
            self.last_seq = frame.next_seq + frame.dropped - 1
        return []

    def hello(self, frame: Daemon, now_ms: int) -> list[Change]:
        """Who answers for the host: a known ``id`` with a ``seq`` not behind the last one
        applied resumes; anything else is another daemon, whose replay is skipped up to
        ``seq`` and whose snapshot settles the host. The host is connected from here."""
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

    def transition(self, frame: Transition) -> list[Change]:
        """One transition of the host's daemon (see the module docstring for what is
        refused)."""
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

    def snapshot(self, frame: Snapshot) -> list[Change]:
        """The host's sessions as of ``frame.seq``, ending the replay after :meth:`hello`:
        every session not in it is dropped, every one that differs is shown anew."""
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
