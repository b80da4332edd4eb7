"""One host's link over SSH: runs ``ssh HOST paneward watch --fleet --since SEQ``, for ever.

One of the two implementations of the transport interface (:mod:`actors.core.fleet.transport`,
docs/fleet.md): it owns the host's :class:`~actors.core.fleet.follow.Follower`, calls its
``connecting`` / ``feed`` / ``oversize`` / ``ended`` with the stream's lines, and hands every
list of :data:`~actors.core.fleet.follow.Change` they return, with the host's name, to
``deliver(host, changes)``. :class:`SshLink` is the transport over the user's OpenSSH client
(:func:`actors.core.fleet.hosts.ssh_argv`): one ``ssh`` process per host, a client of the host's
master (``ControlPersist``: the master runs on its own, and every ssh to the host -- the stream,
``fleet check``, a jump's window -- rides on its one connection). The stream's end is this
``ssh``'s: its host is stale at once, whatever other clients the master has, and a restart of
the stream leaves them be.

Lines are split by :class:`~actors.core.ingress.frames.FrameSplitter` at
:data:`~actors.core.fleet.follow.MAX_LINE_BYTES` (a longer one is skipped, never buffered
whole); ssh's stderr is kept to its last 4 KiB, for the reason an ended try gives
(:func:`actors.core.fleet.hosts.unreachable_reason`). After a connection ends the link waits by the
one retry rule (:class:`actors.core.backoff.Backoff`) and connects again with ``--since`` the
last seq applied.

Run by the merged view (:meth:`actors.sources.fleet.FleetView.run`), one per SSH host of the
hosts file; cancelled to stop (the ssh process is terminated, then killed). Never raises out
of :meth:`SshLink.run` for a host's failure: that is the host's health.
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import time
from collections.abc import Hashable, Sequence
from typing import Final

import anyio
import anyio.abc
import msgspec

from actors.core.backoff import Backoff
from actors.core.clock import now_ms
from actors.core.fleet import hosts as fleet
from actors.core.fleet.follow import MAX_LINE_BYTES, Change, Follower
from actors.core.fleet.transport import Deliver, HostRow, host_row
from actors.core.ingress.frames import FrameSplitter, Oversize
from messages.activity import Activity

__all__ = ["SshLink", "SshLinkStatistics"]
_STDERR_KEPT: Final = 4096
_READ: Final = 256 * 1024
#: Seconds an ended stream's pipes are still read (what its ssh wrote before it exited) and
#: an ssh whose stdout ended is given to exit.
_DRAIN_S: Final = 1.0
#: Seconds ``ssh -O check`` is given to answer (a master answers at once).
_CHECK_S: Final = 5.0


class SshLinkStatistics(msgspec.Struct, kw_only=True):
    """One host's link: its health, the remote daemon, what was applied and refused."""

    host: str
    health: str
    since_ms: int
    reason: str | None
    daemon: str | None
    version: str | None
    last_seq: int
    sessions: int
    applied: int
    duplicates: int
    unexplained: int
    connections: int
    restarts: int
    new_daemons: int
    rejected: dict[str, int]
    gaps: list[tuple[int, int, str]]
    ssh_pid: int | None
    masters_replaced: int


class SshLink:
    """The SSH transport of one host (see the module docstring).

    :param host: the host, from the hosts file.
    :param control_dir: where its ``ControlPath`` socket goes (made private by the caller).
    :param deliver: ``deliver(host_name, changes)``, called in the event loop for every batch.
    :param keepalive_s: ``ServerAliveInterval``.
    :param ssh: the ssh program (:func:`actors.cli.fleet.ssh_program`).
    :param retry: the first and the longest wait between tries (seconds).
    """

    def __init__(
        self, host: fleet.Host, control_dir: str, deliver: Deliver, *,
        keepalive_s: int = fleet.DEFAULT_KEEPALIVE_S, ssh: str = "ssh",
        retry: tuple[float, float] = (0.5, 30.0), extra_options: tuple[str, ...] = (),
    ) -> None:
        self.host = host
        self.follower = Follower(host.name)
        self.control_dir = control_dir
        self.keepalive_s = keepalive_s
        self.ssh = ssh
        self._control_dir = control_dir
        self._deliver = deliver
        self._keepalive_s = keepalive_s
        self._ssh = ssh
        self._extra = extra_options
        self._backoff = Backoff(*retry)
        self._process: anyio.abc.Process | None = None
        self._changed = anyio.Event()
        self._masters_replaced = 0

    @property
    def entry(self) -> Hashable:
        """The host's entry (and the settings its ssh runs with)."""
        return (self.host, self.keepalive_s, self._extra)

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def named(self) -> tuple[str, ...]:
        return (self.host.name,)

    def hosts(self) -> list[HostRow]:
        return [host_row(self.follower)]

    def attach(self, activity: Activity) -> list[str] | None:
        """``ssh -t HOST tmux attach ...`` for a session of this host with a pane
        (:func:`actors.core.fleet.hosts.attach_argv`)."""
        if activity.key.host != self.host.name or activity.pane is None:
            return None
        return fleet.attach_argv(self.host, self.control_dir, activity.pane,
                                 keepalive_s=self.keepalive_s, ssh=self.ssh)

    def statistics(self) -> SshLinkStatistics:
        f = self.follower
        return SshLinkStatistics(
            host=f.host, health=f.health.state, since_ms=f.health.since_ms,
            reason=f.health.reason, daemon=f.daemon_id, version=f.version, last_seq=f.last_seq,
            sessions=len(f.sessions), applied=f.applied, duplicates=f.duplicates,
            unexplained=f.unexplained, connections=f.connections, restarts=f.restarts,
            new_daemons=f.new_daemons, rejected=dict(f.rejected), gaps=list(f.gaps),
            ssh_pid=None if self._process is None else self._process.pid,
            masters_replaced=self._masters_replaced,
        )

    async def wait_changed(self) -> None:
        """Until the next batch of lines (or the end of a connection) was handled."""
        await self._changed.wait()

    def _handled(self, changes: Sequence[Change]) -> None:
        if changes:
            self._deliver(self.host.name, changes)
        self._changed.set()
        self._changed = anyio.Event()

    async def run(self, sink: object = None) -> None:
        """Connect, follow, reconnect, until cancelled (``sink`` unused: changes go to
        ``deliver``)."""
        del sink
        while True:
            worked_at = await self._connect_once()
            now = time.monotonic()
            if worked_at is None:
                delay = self._backoff.failed()
            else:
                self._backoff.connected(worked_at)
                delay = self._backoff.ended(now)
            await anyio.sleep(delay)

    async def _connect_once(self) -> float | None:
        """One connection, until it ends; the monotonic time it started working, if it did."""
        follower = self.follower
        follower.connecting(now_ms())
        argv = fleet.ssh_argv(
            self.host, self._control_dir, fleet.watch_command(self.host, follower.since()),
            keepalive_s=self._keepalive_s, ssh=self._ssh, extra_options=self._extra,
        )
        stderr = bytearray()
        try:
            process = await anyio.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,  # a ^C in the user's terminal is not the link's
            )
        except OSError as exc:
            self._handled(follower.ended(now_ms(), f"cannot run {argv[0]}: {exc}"))
            return None
        self._process = process
        try:
            worked_at, answered = await self._follow(process, stderr)
            code = process.returncode
            reason = None
            if not answered:
                reason = "no answer in time (the host, its paneward, or the connection hangs)"
                await self._check_master()
            elif worked_at is None:
                reason = fleet.unreachable_reason(
                    -1 if code is None else code, stderr.decode("utf-8", "replace"),
                    command=self.host.command,
                )
                if follower.rejected.get("no_daemon_line"):
                    reason = (f"paneward too old there: `{self.host.command} watch --fleet` did "
                              "not answer with its identity (upgrade paneward on that host)")
            self._handled(follower.ended(now_ms(), reason))
            return worked_at
        finally:
            self._process = None
            with anyio.CancelScope(shield=True):
                await _end(process)

    async def _check_master(self) -> None:
        """After a stream that never answered: ``ssh -O check`` asks the host's master whether
        it works; a master that does not answer in time (hung) or fails has its socket
        removed, so the next try starts a new one (the hung one ends with its connection)."""
        argv = fleet.control_argv(self.host, self._control_dir, "check", ssh=self._ssh,
                                  extra_options=self._extra)
        with anyio.move_on_after(_CHECK_S):
            checked = await anyio.run_process(argv, stdin=subprocess.DEVNULL, check=False,
                                              start_new_session=True)
            if checked.returncode == 0:
                return  # the master works: it is the far side that hangs
        path = fleet.control_path(self.host, self._control_dir)
        if await anyio.to_thread.run_sync(_remove_socket, path):
            self._masters_replaced += 1

    async def _follow(
        self, process: anyio.abc.Process, stderr: bytearray
    ) -> tuple[float | None, bool]:
        """Feed the stream's lines to the follower until the stream ends: the monotonic time
        it started working, if it did, and whether anything came within
        :func:`actors.core.fleet.hosts.answer_deadline_s` (else the try is ended then).

        The stream ends when its ``ssh`` exits or its stdout ends, whichever comes first: the
        ``ssh`` is a client of the host's master (``ControlPersist``), and the master holds a
        client's stdout and stderr while its session lasts, so neither pipe need end when the
        client does. Then what is in the pipes is read, and the ssh waited for, until both
        pipes end and it exits, for :data:`_DRAIN_S` at most (then it is ended).
        """
        follower = self.follower
        worked_at: float | None = None
        ended = anyio.Event()
        out_done, err_done, answered = anyio.Event(), anyio.Event(), anyio.Event()

        async def read() -> None:
            nonlocal worked_at
            splitter = FrameSplitter(MAX_LINE_BYTES)
            assert process.stdout is not None
            while True:
                try:
                    data = await process.stdout.receive(_READ)
                except (anyio.EndOfStream, anyio.ClosedResourceError,
                        anyio.BrokenResourceError):
                    out_done.set()
                    answered.set()  # an end is an answer too: its status says why
                    ended.set()
                    return
                answered.set()
                now = now_ms()
                changes: list[Change] = []
                for line in splitter.feed(data):
                    if isinstance(line, Oversize):
                        changes += follower.oversize()
                    else:
                        changes += follower.feed(line, now)
                if worked_at is None and follower.health.state == "connected":
                    worked_at = time.monotonic()
                self._handled(changes)

        async def exited() -> None:
            await process.wait()
            answered.set()
            ended.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._keep_stderr, process, stderr, err_done)
            tg.start_soon(exited)
            tg.start_soon(read)
            with anyio.move_on_after(fleet.answer_deadline_s(self._keepalive_s)):
                await answered.wait()
            if not answered.is_set():
                tg.cancel_scope.cancel()
                return worked_at, False
            await ended.wait()
            with anyio.move_on_after(_DRAIN_S):
                await process.wait()
                await out_done.wait()
                await err_done.wait()
            tg.cancel_scope.cancel()
        return worked_at, True

    async def _keep_stderr(
        self, process: anyio.abc.Process, kept: bytearray, done: anyio.Event
    ) -> None:
        assert process.stderr is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):
            while True:
                kept += await process.stderr.receive(_READ)
                del kept[:-_STDERR_KEPT]
        done.set()


def _remove_socket(path: str) -> bool:
    """Remove the socket at ``path`` (only a socket: the directory is ours alone); whether it
    was there."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return False
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


async def _end(process: anyio.abc.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with anyio.move_on_after(5):
            await process.wait()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    await process.aclose()
