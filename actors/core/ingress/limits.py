"""How many connections each socket may hold, for how long, and who goes first (pure).

The listeners (:mod:`actors.sources.admission`, used by the hook listener and the control
server) ask these questions; the daemon raises its file-descriptor limit with
:func:`raised_fd_limit` at start. The rules, as the most trusted daemons do it (nginx's
``worker_connections`` and ``client_header_timeout``, sshd's ``MaxStartups``/``LoginGraceTime``):

- every socket has a cap, derived from the file-descriptor limit so that all caps together leave
  room for the daemon's own files (database, inotify, pidfds); unauthenticated http gets the
  smallest;
- a connection that has not *proven* itself (sent a valid frame, an authorized request, a
  request line) within :data:`HEAD_DEADLINE_S` is closed: a real hook client finishes in
  milliseconds;
- at the cap, the unproven connection idle the longest is closed to make room once it has been
  idle :data:`EVICT_IDLE_S`; a connection that proved itself is never evicted; with nothing to
  evict, new connections wait in the kernel's backlog (briefly: unproven ones time out) instead
  of being refused;
- a control connection that subscribes (``watch``, ``paneward wait``) leaves the control cap
  for the subscribers' own, much higher one (:func:`watch_cap`), so however many subscribers
  are held open, requests (``status``, ``next``, ``pick``) keep the control cap's slots.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, TypeVar

from actors.core.backoff import retry_delay

__all__ = [
    "ACCEPT_BACKOFF_MAX_S",
    "ACCEPT_BACKOFF_S",
    "DAEMON_RESERVED_FDS",
    "EVICT_IDLE_S",
    "HEAD_DEADLINE_S",
    "KEEPALIVE_IDLE_S",
    "MAX_FD_LIMIT",
    "MAX_WATCHERS",
    "ConnectionCaps",
    "accept_backoff",
    "connection_caps",
    "eviction_victim",
    "raised_fd_limit",
    "spread_deadline",
    "watch_cap",
]

#: A connection must prove itself this soon after it was accepted (a hook takes milliseconds).
HEAD_DEADLINE_S: Final = 2.0
#: An authorized http connection may sit idle between requests this long (keep-alive).
KEEPALIVE_IDLE_S: Final = 5.0
#: At the cap, an unproven connection idle this long may be closed to make room.
EVICT_IDLE_S: Final = 0.25
#: After an accept() error (EMFILE, ENFILE, ENOBUFS, ENOMEM), wait this long, doubling per
#: further error up to the maximum, before accepting again.
ACCEPT_BACKOFF_S: Final = 0.01
ACCEPT_BACKOFF_MAX_S: Final = 0.5
#: File descriptors kept for the daemon's own use when dividing the limit among the sockets.
DAEMON_RESERVED_FDS: Final = 64
#: The soft limit is raised to the hard one, but not beyond this (a hard limit of 2**30 would
#: only make the kernel's per-process tables larger).
MAX_FD_LIMIT: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class ConnectionCaps:
    """The most connections held open at once on each socket."""

    hook: int
    http: int
    control: int


def connection_caps(fd_limit: int) -> ConnectionCaps:
    """The caps for a process allowed ``fd_limit`` open files (its soft ``RLIMIT_NOFILE``).

    Half of what is left after :data:`DAEMON_RESERVED_FDS` goes to the hook socket (at most
    1,024), a sixteenth each to the control socket and to http (at most 64); never fewer than
    4 (hooks) or 2. At the usual limit of 1,024: 480 / 60 / 60.
    """
    spare = max(fd_limit - DAEMON_RESERVED_FDS, 0)
    return ConnectionCaps(
        hook=min(max(spare // 2, 4), 1024),
        http=min(max(spare // 16, 2), 64),
        control=min(max(spare // 16, 2), 64),
    )


#: The most control-socket subscribers at once, whatever the file-descriptor limit.
MAX_WATCHERS: Final = 4096


def watch_cap(fd_limit: int) -> int:
    """The most subscribers (``watch`` and ``paneward wait`` connections) the control socket
    holds at once for a process allowed ``fd_limit`` open files: a quarter of what is left
    after :data:`DAEMON_RESERVED_FDS`, at most :data:`MAX_WATCHERS`, never fewer than 2 -- with
    :func:`connection_caps`' shares, seven eighths of the spare descriptors at most. At the
    usual limit of 1,024: 240; from a limit of 16,448 on: 4,096."""
    spare = max(fd_limit - DAEMON_RESERVED_FDS, 0)
    return min(max(spare // 4, 2), MAX_WATCHERS)


def raised_fd_limit(soft: int, hard: int, infinity: int = -1) -> int:
    """The soft ``RLIMIT_NOFILE`` to set: the hard limit (``infinity`` is unlimited), at most
    :data:`MAX_FD_LIMIT`, never lower than ``soft``."""
    ceiling = MAX_FD_LIMIT if hard == infinity else min(hard, MAX_FD_LIMIT)
    return max(soft, ceiling) if soft != infinity else soft


def spread_deadline(deadline: float, sequence: int) -> float:
    """The head deadline of the ``sequence``-th connection accepted: ``deadline`` stretched by
    up to half (64 steps), so a thousand connections opened at once do not all time out -- and
    get re-opened by whoever holds them -- in the same instant, one spike for every real hook
    that lands in it."""
    return deadline * (1 + (sequence % 64) / 128)


def accept_backoff(errors_in_a_row: int) -> float:
    """Seconds to wait after the ``errors_in_a_row``-th consecutive accept() error (from 1)."""
    return retry_delay(errors_in_a_row, ACCEPT_BACKOFF_S, ACCEPT_BACKOFF_MAX_S)


C = TypeVar("C")


def eviction_victim(
    candidates: Iterable[tuple[C, bool, float]], now: float, min_idle: float = EVICT_IDLE_S
) -> C | None:
    """Which connection to close to make room: of ``(connection, proven, last_active)``, the
    unproven one idle the longest, if it has been idle at least ``min_idle`` seconds."""
    victim: C | None = None
    oldest = now - min_idle
    for connection, proven, last_active in candidates:
        if not proven and last_active <= oldest:
            victim, oldest = connection, last_active
    return victim
