"""A tmux control-mode client: one ``tmux -C attach`` process, pipelined command batches.

Who uses it: :class:`actors.sinks.tmux.TmuxBridge` owns exactly one :class:`ControlClient` per
tmux server (docs/design.md §9). The badge writer and the pane watcher both send their
commands through it; the reader task routes every ``%begin``/``%end`` reply block to the batch
that is waiting for it and every ``%`` notification to the ``on_notification`` callback.

Why control mode: spawning ``tmux set-option`` costs ~2.4 ms and a fork+exec per update; one
control-mode client takes a batch of 50 commands in one write for ~1.1 ms.

The protocol and its parser are sans-IO in :mod:`actors.core.tmux.protocol`; this is the thin
I/O shell around them.
"""

from __future__ import annotations

import os
import shutil
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

import anyio
import anyio.abc
import msgspec
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.core.tmux.health import TmuxClosedAtOnce, TmuxNoAnswer, closed_at_once
from actors.core.tmux.protocol import (
    CLIENT_FLAGS,
    ControlParser,
    Event,
    Exit,
    Reply,
    TmuxConnectionLost,
    TmuxError,
    TmuxNotification,
    TmuxTarget,
    TmuxUnavailable,
)

__all__ = ["ControlClient", "ControlClientStatistics", "DIES_WITH_US", "control_argv"]

#: ``setpriv --pdeathsig KILL --`` (util-linux), or ``None`` where there is no ``setpriv``: our
#: ``tmux -C`` clients run under it, so the kernel kills each the moment the process that
#: started it dies (``kill -9``, a crash). tmux 3.3a keeps a control client whose reader died
#: with a notification still queued for it: the write fails, the client waits for its queue
#: to drain and never exits, so no ``client-detached`` hook runs (the summary never says
#: ``paneward: down``: the dead daemon's badges look live), and at the server's exit its
#: subscription timer dereferences the session tmux took from it and the server crashes
#: (docs/tmux.md, "A killed daemon's control clients"). A client process that dies is lost at
#: once instead: tmux frees it and runs the hook.
DIES_WITH_US: Final = (
    None if (setpriv := shutil.which("setpriv")) is None
    else (setpriv, "--pdeathsig", "KILL", "--")
)


def control_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` (a ``tmux -C`` client's) run so that it dies with this process
    (:data:`DIES_WITH_US`); as it is where there is no ``setpriv``. Pure but for the lookup
    made once at import."""
    return [*(DIES_WITH_US or ()), *argv]


class ControlClientStatistics(msgspec.Struct, kw_only=True):
    """Counters of one :class:`ControlClient` (monotonic over its life): one record it keeps,
    copied by ``statistics()``."""

    batches: int = 0
    commands: int = 0
    replies: int = 0
    errors: int = 0
    notifications: int = 0
    unexpected_replies: int = 0
    last_error: str | None = None


@dataclass(eq=False)
class _Batch:
    expected: int
    replies: list[Reply] = field(default_factory=list)
    done: anyio.Event = field(default_factory=anyio.Event)
    lost: str | None = None


class ControlClient:
    """One control-mode client attached to a tmux server.

    Use as an async context manager (``async with ControlClient(target, ...) as client``); it
    spawns ``tmux -C attach-session``, waits until the attach succeeded (else raises
    :class:`TmuxUnavailable`: :class:`~actors.core.tmux.health.TmuxClosedAtOnce` when the
    server took the connection and closed it at once; or
    :class:`~actors.core.tmux.health.TmuxNoAnswer` when tmux did not answer within
    ``reply_timeout``) and runs its reader in its own task. :meth:`run_batch` is the only way
    to send commands: the whole batch goes out in one write.

    ``on_notification`` is called synchronously from the reader task for every notification;
    it must not block.
    """

    def __init__(
        self,
        target: TmuxTarget,
        *,
        on_notification: Callable[[TmuxNotification], None] | None = None,
        session: str | None = None,
        reply_timeout: float = 10.0,
    ) -> None:
        self._target = target
        self._on_notification = on_notification
        self._session = session
        self._reply_timeout = reply_timeout
        self._parser = ControlParser()
        self._pending: deque[_Batch] = deque()
        self._lock = anyio.Lock()
        self._attached = anyio.Event()
        self._closed = anyio.Event()
        self._close_reason: str | None = None
        self._unanswered = False  # closed because tmux did not answer in time
        self._attach_error: str | None = None
        self._process: anyio.abc.Process | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._reader_scope = anyio.CancelScope(shield=True)
        self._stats = ControlClientStatistics()

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> ControlClient:
        # Both guards keep a reconnecting client (backoff after the server went away) from
        # breaking the user's next `tmux new`, which then fails with "server exited
        # unexpectedly" (both reproduced against tmux 3.3a, 7 in 40 restarts without them):
        # -N: attach-session otherwise starts a server when there is none; that server loads
        #     the user's config, finds no session and exits under the user's new client.
        # has-session first: a *failed* attach to a server that is still starting (its
        #     creator's new-session not yet run) makes that server exit; has-session fails
        #     harmlessly then, and the attach is only tried once a session exists.
        target = self._target.argv()
        session = ["-t", self._session] if self._session is not None else []
        env = dict(os.environ)
        # The target is explicit in argv; $TMUX would make tmux refuse or pick another server.
        env.pop("TMUX", None)
        try:
            # Bounded: a stopped or hung server leaves it waiting (killed on cancellation).
            with anyio.fail_after(self._reply_timeout):
                probe = await anyio.run_process(
                    [*target, "-N", "has-session", *session], env=env, check=False
                )
        except TimeoutError:  # (an OSError too: first)
            raise TmuxNoAnswer(
                f"{self._target.describe()} did not answer within {self._reply_timeout:g} s"
            ) from None
        except OSError as exc:
            raise TmuxUnavailable(f"cannot run tmux: {exc}") from None
        if probe.returncode != 0:
            reason = probe.stderr.decode("utf-8", "replace").strip() or "no session"
            error = TmuxClosedAtOnce if closed_at_once(reason) else TmuxUnavailable
            raise error(f"{self._target.describe()}: {reason}")
        # -u: tmux writes to our client in UTF-8 whatever the locale (a daemon started by a
        # service manager often has no LANG); without it every non-ASCII character it sends us
        # (a pane's title, an option read back) arrives as "_".
        argv = [*target, "-u", "-N", "-C", "attach-session", "-f", CLIENT_FLAGS, *session]
        try:
            self._process = await anyio.open_process(control_argv(argv), env=env)
        except OSError as exc:
            raise TmuxUnavailable(f"cannot run tmux: {exc}") from None
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._read_loop)
        try:
            with anyio.fail_after(self._reply_timeout):
                await self._attached.wait()
            if self._attach_error is not None:
                # The server answered has-session just now: it closed this client at once.
                raise TmuxClosedAtOnce(
                    f"{self._target.describe()}: cannot attach: {self._attach_error}"
                )
        except BaseException as exc:
            await self._shutdown(exc)
            if isinstance(exc, TimeoutError):
                raise TmuxNoAnswer(
                    f"{self._target.describe()}: attach did not complete within"
                    f" {self._reply_timeout:g} s"
                ) from None
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        await self._shutdown(exc)
        return None

    async def _shutdown(self, exc: BaseException | None) -> None:
        assert self._tg is not None and self._process is not None
        process, tg = self._process, self._tg
        with anyio.CancelScope(shield=True):
            # Closing stdin makes tmux detach the control client and exit on its own.
            if process.stdin is not None:
                await process.stdin.aclose()
            with anyio.move_on_after(2):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            # The process's aclose, not its streams': the server holds our client's stdout
            # and lets go only after the client exits, and closing a receive stream leaves
            # its pipe open until that EOF arrives (on asyncio), which can be after the loop
            # is gone (then reported unclosed). aclose closes all three pipes now.
            await process.aclose()
        # The task group must be exited outside the shielded scope it was not entered in.
        self._reader_scope.cancel()
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)
        self._mark_closed("client closed")

    # -- I/O ---------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        # Shielded: when the owner is cancelled it still needs replies for its shielded
        # cleanup batch (removing the badges); _shutdown ends the reader explicitly.
        with self._reader_scope:
            await self._read()

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            while True:
                try:
                    data = await stdout.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
                for event in self._parser.feed(data):
                    self._dispatch(event)
                    if isinstance(event, Exit):
                        self._mark_closed(f"%exit {event.reason}".strip())
        finally:
            reason = "tmux control client ended"
            if not self._attached.is_set():
                self._attach_error = self._attach_error or await self._stderr_text()
                self._attached.set()
            self._mark_closed(reason)

    async def _stderr_text(self) -> str:
        assert self._process is not None
        stderr = self._process.stderr
        if stderr is None:
            return "tmux exited"
        chunks = BufferedByteReceiveStream(stderr)
        text = b""
        with anyio.move_on_after(1):
            try:
                while len(text) < 4096:
                    text += await chunks.receive(4096)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        return text.decode("utf-8", "replace").strip() or "tmux exited"

    def _dispatch(self, event: Event) -> None:
        if isinstance(event, Reply):
            if not event.from_client:
                # The attach-session command from our argv: its result decides the connection.
                if not self._attached.is_set():
                    if not event.ok:
                        self._attach_error = " ".join(event.lines) or "attach failed"
                    self._attached.set()
                else:
                    self._stats.unexpected_replies += 1
                return
            self._stats.replies += 1
            if not event.ok:
                self._stats.errors += 1
                self._stats.last_error = " ".join(event.lines)
            if not self._pending:
                self._stats.unexpected_replies += 1
                return
            batch = self._pending[0]
            batch.replies.append(event)
            if len(batch.replies) == batch.expected:
                self._pending.popleft()
                batch.done.set()
        elif isinstance(event, TmuxNotification):
            self._stats.notifications += 1
            if self._on_notification is not None:
                self._on_notification(event)

    def _mark_closed(self, reason: str) -> None:
        if self._closed.is_set():
            return
        self._close_reason = reason
        self._closed.set()
        while self._pending:
            batch = self._pending.popleft()
            batch.lost = reason
            batch.done.set()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    @property
    def unanswered(self) -> bool:
        """Whether the client was closed because tmux did not answer a batch in time."""
        return self._unanswered

    async def wait_closed(self) -> str:
        """Wait until the connection ends; returns why."""
        await self._closed.wait()
        return self._close_reason or "closed"

    async def run_batch(
        self, commands: Sequence[str], *, answer_within: float | None = None
    ) -> list[Reply]:
        """Send ``commands`` (one per line) in a single write and return their replies in order.

        :raises TmuxConnectionLost: if the client ended before every reply arrived;
            :class:`~actors.core.tmux.health.TmuxNoAnswer` if tmux did not answer within
            ``answer_within`` seconds (default: ``reply_timeout``) -- the client is then closed, and
            every other batch waiting on it raises the same.
        """
        if not commands:
            return []
        if any("\n" in command for command in commands):
            raise TmuxError("a tmux command line cannot contain a newline")
        if self._closed.is_set():
            raise self._lost(self._close_reason or "closed")
        assert self._process is not None and self._process.stdin is not None
        batch = _Batch(expected=len(commands))
        payload = ("\n".join(commands) + "\n").encode()
        async with self._lock:
            # Taking the lock lets the reader run: a close it saw meanwhile resolved only the
            # batches registered before it.
            if self._closed.is_set():
                raise self._lost(self._close_reason or "closed")
            # Register before writing: replies are matched to batches in write order.
            self._pending.append(batch)
            self._stats.batches += 1
            self._stats.commands += len(commands)
            try:
                await self._process.stdin.send(payload)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                self._mark_closed(f"write failed: {exc}")
        deadline = self._reply_timeout if answer_within is None else answer_within
        with anyio.move_on_after(deadline) as scope:
            await batch.done.wait()
        if scope.cancelled_caught and not self._closed.is_set():
            self._unanswered = True
            self._mark_closed(f"{self._target.describe()} did not answer within {deadline:g} s")
            self._process.kill()
        if batch.lost is not None:
            raise self._lost(batch.lost)
        return batch.replies

    def _lost(self, reason: str) -> TmuxConnectionLost:
        return (TmuxNoAnswer if self._unanswered else TmuxConnectionLost)(reason)

    def statistics(self) -> ControlClientStatistics:
        """A point-in-time copy of the counters."""
        return msgspec.structs.replace(self._stats)
