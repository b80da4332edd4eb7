"""Admission for a listening socket: the accept loop every listener of the daemon shares.

Used by the hook listener (its Unix socket and its http port) and the control server. The
rules are :mod:`actors.core.ingress.limits`; this is their I/O shell:

- ``accept()`` errors never end the loop. ``EMFILE``/``ENFILE``/``ENOBUFS``/``ENOMEM`` are
  counted; the loop makes room by closing the unproven connection idle the longest (if any)
  and backs off (10 ms doubling to 0.5 s), the queued connections waiting meanwhile; when the
  shortage persists (:data:`SHED_AFTER_ERRORS` in a row) it sheds the oldest queued connection
  with the process's reserve descriptor (closed, the connection accepted and closed at once,
  reopened: the libev/nginx trick), so the queue drains rather than every client hanging.
  ``ECONNABORTED`` and friends (the peer left while queued) are counted and skipped.
- At most ``cap`` connections are open. At the cap the loop closes the unproven connection idle
  the longest once it has been idle :data:`~actors.core.ingress.limits.EVICT_IDLE_S`; with nothing
  to close it waits (new connections stay queued in the kernel) until a slot frees. Nothing is
  refused for being one too many.
- Each connection gets a :class:`Connection` (its raw non-blocking socket); its handler calls
  :meth:`~Connection.prove` once it sent something valid, and reads under
  :meth:`Connection.deadline` (the head deadline while unproven, then whatever idle deadline
  the handler asks for). A handler that keeps its connection long (a control subscriber) may
  :meth:`~Admission.release` its slot: the connection is then counted by whoever holds it.
- :class:`HangupWatch`: one epoll set that notices a peer's hangup on connections whose
  handlers wait for something else (a subscriber waits for transitions, not for its peer).

Counters: :class:`AdmissionStatistics`, one record per socket, copied by ``statistics()``.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import logging
import math
import os
import select
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import msgspec

from actors.core.ingress.limits import (
    EVICT_IDLE_S,
    HEAD_DEADLINE_S,
    accept_backoff,
    eviction_victim,
    spread_deadline,
)

__all__ = ["Admission", "AdmissionStatistics", "Connection", "Handler", "HangupWatch"]

logger = logging.getLogger("paneward.admission")

#: Consecutive accept() errors (10+20+40+80 ms of backoff) before a queued connection is shed.
SHED_AFTER_ERRORS: Final = 5
#: Connections taken from the kernel's queue per wake-up (the default of ``accept_batch``).
ACCEPT_BATCH: Final = 64


def _silent(client: socket.socket) -> bool:
    """True when nothing has arrived on ``client`` yet."""
    try:
        return not client.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)  # b"": closed
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return True

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
    """One admitted connection: its non-blocking socket, when it was last active, whether it
    has proven itself, and the cancel scope that closes it (eviction).

    Reads and writes go straight to the socket (no transport or stream object per connection:
    a flood of idle connections costs an accept, a reader registration and a timer each).
    """

    __slots__ = (
        "_admission", "_head_deadline", "last_active", "pooled", "proven", "scope", "sock",
    )

    def __init__(self, admission: Admission, sock: socket.socket, now: float) -> None:
        self._admission = admission
        self.sock = sock
        self.scope = anyio.CancelScope()
        self.last_active = now
        self.proven = False
        self.pooled = False  # waiting for its first byte in the idle pool (no task yet)
        self._head_deadline = now + spread_deadline(
            admission.head_deadline, admission.stats.accepted
        )

    @property
    def head_deadline(self) -> float:
        return self._head_deadline

    def prove(self) -> None:
        """It sent something valid: no head deadline any more, never evicted."""
        self.proven = True

    def deadline(self, idle: float | None = None) -> float:
        """The absolute time the next read must complete by: the head deadline while unproven,
        else ``idle`` seconds from now (``inf`` for none)."""
        if not self.proven:
            return self._head_deadline
        return anyio.current_time() + idle if idle is not None else float("inf")

    async def receive(self, max_bytes: int, deadline: float) -> bytes | None:
        """The next bytes (``b""`` at end of stream or on a reset), or ``None`` when
        ``deadline`` passed first (counted in ``timeouts``). Data already waiting -- a hook
        client writes right after it connects -- is read without waiting at all."""
        while True:
            try:
                data = self.sock.recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                return b""
            else:
                self.last_active = anyio.current_time()
                return data
            with anyio.move_on_at(deadline) as scope:
                await anyio.wait_readable(self.sock)
            if scope.cancelled_caught:
                self._admission.stats.timeouts += 1
                return None

    async def send(self, data: bytes) -> None:
        """Write all of ``data``, waiting while the peer's buffer is full.

        :raises OSError: the peer went away (``BrokenPipeError``, ``ConnectionResetError``).
        """
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view) :]
            except (BlockingIOError, InterruptedError):
                await anyio.wait_writable(self.sock)

    def peer_credentials(self) -> tuple[int, int]:
        """``(pid, uid)`` of the peer of a Unix socket (``SO_PEERCRED``)."""
        raw = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        pid, uid, _gid = struct.unpack("3i", raw)
        return pid, uid


Handler = Callable[[Connection], Awaitable[None]]


class _IdlePool:
    """Connections that have not sent a byte yet, watched by ONE task through one epoll set:
    no task, timer or cancel scope per idle connection, so a thousand of them held open cost a
    registration each, and their deadlines expire in a loop, not in a thousand unwinding tasks.
    A connection leaves the pool for its own handler task once something arrives."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self._by_fd: dict[int, Connection] = {}
        self._deadlines: list[tuple[float, int, Connection]] = []
        self._added = 0
        self._until = math.inf
        self._wait: anyio.CancelScope | None = None

    def add(self, connection: Connection) -> None:
        fd = connection.sock.fileno()
        self._epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP)
        self._by_fd[fd] = connection
        connection.pooled = True
        self._added += 1
        heapq.heappush(self._deadlines, (connection.head_deadline, self._added, connection))
        if connection.head_deadline < self._until and self._wait is not None:
            self._wait.cancel()  # wake the pool task to wait for this earlier deadline

    def remove(self, connection: Connection) -> None:
        if connection.pooled:
            connection.pooled = False
            fd = connection.sock.fileno()
            self._by_fd.pop(fd, None)
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    async def run(
        self, expire: Callable[[Connection], None], ready: Callable[[Connection], None]
    ) -> None:
        """Until cancelled: hand each connection that becomes readable to ``ready``, and each
        whose head deadline passes first to ``expire``."""
        try:
            while True:
                now = anyio.current_time()
                heap = self._deadlines
                while heap and (not heap[0][2].pooled or heap[0][0] <= now):
                    _, _, connection = heapq.heappop(heap)
                    if connection.pooled:
                        self.remove(connection)
                        expire(connection)
                self._until = heap[0][0] if heap else math.inf
                with anyio.CancelScope(deadline=self._until) as self._wait:
                    await anyio.wait_readable(self._epoll.fileno())
                self._wait = None
                for fd, _events in self._epoll.poll(0):
                    woken = self._by_fd.get(fd)
                    if woken is not None:
                        self.remove(woken)
                        ready(woken)
        finally:
            for connection in list(self._by_fd.values()):
                self.remove(connection)
                connection.sock.close()
            self._epoll.close()


class HangupWatch:
    """Notices at once when the peer of a watched connection hangs up (``EPOLLHUP``: it closed
    its end, or was killed), while the connection's handler waits for something else.

    One epoll set and one task (:meth:`run`) for all of them, registered for no event but the
    hangup and errors epoll always reports: data the peer sends wakes nothing, and a peer that
    only shut its writing side (``socat``, a client done with its request) is still a reader.
    :meth:`add` registers a connection with the callback to run on its hangup (once);
    :meth:`remove` must come before its socket is closed. Without epoll (not Linux) nothing is
    noticed here: a dead peer is found at the next write.
    """

    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._by_fd: dict[int, Callable[[], None]] = {}
        #: Hangups noticed (callbacks run).
        self.hangups = 0

    def add(self, connection: Connection, on_hangup: Callable[[], None]) -> None:
        if self._epoll is None:
            return
        fd = connection.sock.fileno()
        self._epoll.register(fd, 0)  # EPOLLHUP and EPOLLERR only: epoll reports them always
        self._by_fd[fd] = on_hangup

    def remove(self, connection: Connection) -> None:
        fd = connection.sock.fileno()
        if self._by_fd.pop(fd, None) is not None and self._epoll is not None:
            with contextlib.suppress(OSError, ValueError):
                self._epoll.unregister(fd)

    async def run(self) -> None:
        """Until cancelled: run the callback of each connection whose peer hangs up."""
        epoll = self._epoll
        if epoll is None:
            await anyio.sleep_forever()
            return
        try:
            while True:
                await anyio.wait_readable(epoll.fileno())
                for fd, _events in epoll.poll(0):
                    on_hangup = self._by_fd.pop(fd, None)
                    with contextlib.suppress(OSError, ValueError):
                        epoll.unregister(fd)
                    if on_hangup is not None:
                        self.hangups += 1
                        on_hangup()
        finally:
            self._by_fd.clear()
            epoll.close()


class Admission:
    """The accept loop of one listening socket (see the module docstring).

    ``close_silent``: see the attribute; ``timeouts`` counts those too. ``accept_batch``: the
    most connections taken from the kernel's queue per wake-up.
    """

    def __init__(
        self,
        cap: int,
        *,
        head_deadline: float = HEAD_DEADLINE_S,
        evict_idle: float = EVICT_IDLE_S,
        close_silent: bool = False,
        accept_batch: int = ACCEPT_BATCH,
    ) -> None:
        if cap < 1:
            raise ValueError(f"cap must be at least 1, not {cap}")
        if accept_batch < 1:
            raise ValueError(f"accept_batch must be at least 1, not {accept_batch}")
        self.cap = cap
        self.accept_batch = accept_batch
        self.head_deadline = head_deadline
        self.evict_idle = evict_idle
        #: Close at once a connection with nothing to read yet (only for a listening socket
        #: with TCP_DEFER_ACCEPT, whose queue holds back connections until data arrives).
        self.close_silent = close_silent
        self._errors_in_a_row = 0
        self.stats = AdmissionStatistics(cap=cap)
        self._open: dict[Connection, None] = {}  # insertion order: oldest first
        self._slot_freed = anyio.Event()
        self._pool: _IdlePool | None = None

    def statistics(self) -> AdmissionStatistics:
        return msgspec.structs.replace(
            self.stats, open=len(self._open), accept_errors=dict(self.stats.accept_errors)
        )

    async def serve(self, listener: socket.socket, handler: Handler) -> None:
        """Accept until cancelled; each connection runs ``handler`` in its own task."""
        _RESERVE.ensure()
        self._errors_in_a_row = 0
        async with anyio.create_task_group() as tg:

            def spawn(connection: Connection) -> None:
                tg.start_soon(self._run, connection, handler)

            pool = self._pool = _IdlePool() if hasattr(select, "epoll") else None
            if pool is not None:
                tg.start_soon(pool.run, self._expire, spawn)
            while True:
                await self._room()
                await anyio.wait_readable(listener)
                # Take what is queued without an event-loop round trip per connection (a
                # flood of connections would otherwise cost one loop iteration each).
                for _ in range(self.accept_batch):
                    if len(self._open) >= self.cap:
                        break  # _room() decides: evict, or wait for a slot
                    try:
                        client, _ = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError as exc:
                        if await self._accept_failed(listener, exc):
                            continue
                        break
                    self._errors_in_a_row = 0
                    silent = _silent(client)
                    if silent and self.close_silent:
                        # With TCP_DEFER_ACCEPT, a connection accept() sees without a byte
                        # waited out the deferral already: it is idle, not slow.
                        client.close()
                        self.stats.timeouts += 1
                        continue
                    self.stats.accepted += 1
                    client.setblocking(False)
                    connection = Connection(self, client, anyio.current_time())
                    self._open[connection] = None
                    if silent and pool is not None:
                        pool.add(connection)  # a task once its first byte arrives
                    else:
                        spawn(connection)

    async def _accept_failed(self, listener: socket.socket, exc: OSError) -> bool:
        """Count a failed accept(); True to go on accepting at once (the connection had gone),
        False after backing off (out of descriptors or memory). Raises anything else."""
        code = exc.errno or 0
        name = errno.errorcode.get(code, str(code))
        errors = self.stats.accept_errors
        errors[name] = errors.get(name, 0) + 1
        if code in _TRANSIENT_ERRORS:
            return True
        if code not in _RESOURCE_ERRORS:
            raise exc
        self._errors_in_a_row += 1
        # Make room: an unproven connection goes first; a short exhaustion is waited out with
        # the connection still queued (nothing lost); only a persistent one sheds the oldest
        # queued connection.
        if (
            not self._evict(min_idle=0.0)
            and self._errors_in_a_row >= SHED_AFTER_ERRORS
            and _RESERVE.shed(listener)
        ):
            self.stats.shed += 1
        await anyio.sleep(accept_backoff(self._errors_in_a_row))
        return False

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
        if victim.pooled and self._pool is not None:
            self._pool.remove(victim)
            victim.sock.close()
        else:
            victim.scope.cancel()
        # Forget it now: its task may take a moment to unwind, and the slot is freed for sure.
        self._release(victim)
        return True

    def _expire(self, connection: Connection) -> None:
        """A pooled connection reached its head deadline without a byte."""
        self.stats.timeouts += 1
        connection.sock.close()
        self._release(connection)

    def release(self, connection: Connection) -> None:
        """Give up ``connection``'s slot while its handler goes on (it no longer counts against
        ``cap`` and is never evicted). Called by a handler that holds its connection for long
        and counts it under a cap of its own (the control server's subscribers). Idempotent."""
        self._release(connection)

    def _release(self, connection: Connection) -> None:
        if self._open.pop(connection, True) is None:
            self._slot_freed.set()
            self._slot_freed = anyio.Event()

    async def _run(self, connection: Connection, handler: Handler) -> None:
        try:
            with connection.scope:
                await handler(connection)
        except OSError:
            pass  # the peer went away mid-way: nothing to count beyond what the handler did
        except Exception:
            # One connection's bug must not take the socket down for everyone (one_for_one at
            # the connection level); it is logged and counted.
            self.stats.handler_errors += 1
            logger.exception("connection handler failed")
        finally:
            connection.sock.close()
            self._release(connection)

