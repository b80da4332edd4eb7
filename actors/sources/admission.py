"""Admission for a listening socket: the accept loop every listener of the daemon shares.

Used by the hook listener (its Unix socket and its http port) and the control server. The
rules are :mod:`actors.core.limits`; this is their I/O shell:

- ``accept()`` errors never end the loop. ``EMFILE``/``ENFILE``/``ENOBUFS``/``ENOMEM`` are
  counted; the loop makes room by closing the unproven connection idle the longest (if any)
  and backs off (10 ms doubling to 0.5 s), the queued connections waiting meanwhile; when the
  shortage persists (:data:`SHED_AFTER_ERRORS` in a row) it sheds the oldest queued connection
  with the process's reserve descriptor (closed, the connection accepted and closed at once,
  reopened: the libev/nginx trick), so the queue drains rather than every client hanging.
  ``ECONNABORTED`` and friends (the peer left while queued) are counted and skipped.
- At most ``cap`` connections are open. At the cap the loop closes the unproven connection idle
  the longest once it has been idle :data:`~actors.core.limits.EVICT_IDLE_S`; with nothing to
  close it waits (new connections stay queued in the kernel) until a slot frees. Nothing is
  refused for being one too many.
- Each connection gets a :class:`Connection`: its handler marks it :meth:`~Connection.prove`\\ n
  once it sent something valid, and reads under :meth:`Connection.deadline` (the head deadline
  while unproven, then whatever idle deadline the handler asks for).

Counters: :class:`AdmissionStatistics`, one record per socket, copied by ``statistics()``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.abc
import msgspec

from actors.core.limits import EVICT_IDLE_S, HEAD_DEADLINE_S, accept_backoff, eviction_victim

__all__ = ["Admission", "AdmissionStatistics", "Connection", "Handler"]

logger = logging.getLogger("paneward.admission")

#: Consecutive accept() errors (10+20+40+80 ms of backoff) before a queued connection is shed.
SHED_AFTER_ERRORS: Final = 5

#: Errors that mean "out of descriptors or kernel memory right now": back off, keep serving.
_RESOURCE_ERRORS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: Errors about one queued connection only (it went away): skip it.
_TRANSIENT_ERRORS: Final = frozenset(
    {errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENETDOWN, errno.EHOSTUNREACH,
     errno.ENETUNREACH, errno.EINTR, errno.ECONNRESET}
)


class AdmissionStatistics(msgspec.Struct, kw_only=True):
    """Counters of one listening socket: one record its :class:`Admission` keeps.

    ``cap`` the most connections open at once; ``open`` open now; ``accepted`` in all;
    ``evicted`` unproven connections closed to make room at the cap; ``timeouts`` connections
    closed at their deadline (head or idle); ``waits`` times the loop waited at the cap with
    nothing to evict; ``accept_errors`` failed ``accept()`` calls by errno name; ``shed``
    pending connections closed unread with the reserve descriptor (none could be evicted);
    ``handler_errors`` connections whose handler raised (logged; the others carry on).
    """

    cap: int = 0
    open: int = 0
    accepted: int = 0
    evicted: int = 0
    timeouts: int = 0
    waits: int = 0
    accept_errors: dict[str, int] = msgspec.field(default_factory=dict)
    shed: int = 0
    handler_errors: int = 0


class _Reserve:
    """One spare descriptor per process, given up for an instant to shed a connection."""

    def __init__(self) -> None:
        self._fd: int | None = None

    def ensure(self) -> None:
        if self._fd is None:
            with contextlib.suppress(OSError):
                self._fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def shed(self, listener: socket.socket) -> bool:
        """Close the reserve, accept one pending connection and close it, reopen the reserve."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        try:
            client, _ = listener.accept()
        except OSError:
            return False
        finally:
            self.ensure()
        client.close()
        return True


_RESERVE: Final = _Reserve()


class Connection:
    """One admitted connection: when it was last active, whether it has proven itself, and the
    cancel scope that closes it (eviction, deadline)."""

    __slots__ = ("_admission", "_head_deadline", "last_active", "proven", "scope")

    def __init__(self, admission: Admission, now: float) -> None:
        self._admission = admission
        self.scope = anyio.CancelScope()
        self.last_active = now
        self.proven = False
        self._head_deadline = now + admission.head_deadline

    def active(self) -> None:
        """Bytes arrived: it is not idle."""
        self.last_active = anyio.current_time()

    def prove(self) -> None:
        """It sent something valid: no head deadline any more, never evicted."""
        self.proven = True

    def deadline(self, idle: float | None = None) -> float:
        """The absolute time the next read must complete by: the head deadline while unproven,
        else ``idle`` seconds from now (``inf`` for none)."""
        if not self.proven:
            return self._head_deadline
        return anyio.current_time() + idle if idle is not None else float("inf")

    def timed_out(self) -> None:
        """The handler gave up at its deadline (counted)."""
        self._admission.stats.timeouts += 1


Handler = Callable[[anyio.abc.SocketStream, Connection], Awaitable[None]]


class Admission:
    """The accept loop of one listening socket (see the module docstring)."""

    def __init__(
        self,
        cap: int,
        *,
        head_deadline: float = HEAD_DEADLINE_S,
        evict_idle: float = EVICT_IDLE_S,
    ) -> None:
        if cap < 1:
            raise ValueError(f"cap must be at least 1, not {cap}")
        self.cap = cap
        self.head_deadline = head_deadline
        self.evict_idle = evict_idle
        self.stats = AdmissionStatistics(cap=cap)
        self._open: dict[Connection, None] = {}  # insertion order: oldest first
        self._slot_freed = anyio.Event()

    def statistics(self) -> AdmissionStatistics:
        return msgspec.structs.replace(
            self.stats, open=len(self._open), accept_errors=dict(self.stats.accept_errors)
        )

    async def serve(self, listener: socket.socket, handler: Handler) -> None:
        """Accept until cancelled; each connection runs ``handler`` in its own task."""
        _RESERVE.ensure()
        errors_in_a_row = 0
        unix = listener.family == socket.AF_UNIX
        async with anyio.create_task_group() as tg:
            while True:
                await self._room()
                await anyio.wait_readable(listener)
                try:
                    client, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    code = exc.errno or 0
                    name = errno.errorcode.get(code, str(code))
                    errors = self.stats.accept_errors
                    errors[name] = errors.get(name, 0) + 1
                    if code in _TRANSIENT_ERRORS:
                        continue
                    if code not in _RESOURCE_ERRORS:
                        raise
                    errors_in_a_row += 1
                    # Make room: an unproven connection goes first; a short exhaustion is
                    # waited out with the connection still queued (nothing lost); only a
                    # persistent one sheds the oldest queued connection.
                    if (
                        not self._evict(min_idle=0.0)
                        and errors_in_a_row >= SHED_AFTER_ERRORS
                        and _RESERVE.shed(listener)
                    ):
                        self.stats.shed += 1
                    await anyio.sleep(accept_backoff(errors_in_a_row))
                    continue
                errors_in_a_row = 0
                self.stats.accepted += 1
                connection = Connection(self, anyio.current_time())
                self._open[connection] = None
                tg.start_soon(self._run, client, unix, connection, handler)

    async def _room(self) -> None:
        """Return once fewer than ``cap`` connections are open (evicting if it may)."""
        while len(self._open) >= self.cap:
            if self._evict():
                continue  # its slot is free already
            self.stats.waits += 1
            unproven = [c.last_active for c in self._open if not c.proven]
            wait = (
                max(min(unproven) + self.evict_idle - anyio.current_time(), 0.001)
                if unproven
                else float("inf")
            )
            with anyio.move_on_after(wait):
                await self._slot_freed.wait()

    def _evict(self, min_idle: float | None = None) -> bool:
        victim = eviction_victim(
            ((c, c.proven, c.last_active) for c in self._open),
            anyio.current_time(),
            self.evict_idle if min_idle is None else min_idle,
        )
        if victim is None:
            return False
        self.stats.evicted += 1
        victim.scope.cancel()
        # Forget it now: its task may take a moment to unwind, and the slot is freed for sure.
        self._release(victim)
        return True

    def _release(self, connection: Connection) -> None:
        if self._open.pop(connection, True) is None:
            self._slot_freed.set()
            self._slot_freed = anyio.Event()

    async def _run(
        self, client: socket.socket, unix: bool, connection: Connection, handler: Handler
    ) -> None:
        try:
            with connection.scope:
                client.setblocking(False)
                stream: anyio.abc.SocketStream
                if unix:
                    stream = await anyio.abc.UNIXSocketStream.from_socket(client)
                else:
                    stream = await anyio.abc.SocketStream.from_socket(client)
                async with stream:
                    await handler(stream, connection)
        except OSError:
            pass  # the peer went away mid-way: nothing to count beyond what the handler did
        except Exception:
            # One connection's bug must not take the socket down for everyone (one_for_one at
            # the connection level); it is logged and counted.
            self.stats.handler_errors += 1
            logger.exception("connection handler failed")
        finally:
            client.close()
            self._release(connection)

