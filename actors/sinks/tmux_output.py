"""OSC 7501 read from tmux's own output stream: the I/O shell of the tmux output reader.

Who sends and handles what: :class:`TmuxOutput` belongs to the tmux bridge
(:class:`actors.sinks.tmux.TmuxBridge`), which tells it what each pane shows
(:meth:`TmuxOutput.show`, from its badge book) and hands it its control-mode client while connected
(:meth:`TmuxOutput.serve`). Over that client it subscribes to the panes' foreground programs
and lists them when one changes (:data:`~actors.core.tmux.output.PANE_COMMANDS_COMMAND`); a
changed pane is walked for a transport in a worker thread and announced again to the pane
mapper (``PaneOpened``: it walks the pane at once, so a Codex TUI started in a shell is bound
within a listing, not at the mapper's next rescan).

The badge client keeps ``no-output``: tmux sends no pane output to a client with that flag,
whatever it asks per pane. Output comes through a second control client per tmux session that
holds a pane that needs it (tmux sends a client output only for the panes of its own session),
attached with :data:`~actors.core.tmux.output.OUTPUT_CLIENT_FLAGS`; every other pane of that
session is turned off for it (``refresh-client -A %N:off``: at attach, and at a pane's first
output otherwise), and a client whose session no longer holds a pane that needs output detaches.
A pane tmux paused (``%pause``: the reader fell :data:`~actors.core.tmux.output.PAUSE_AFTER_S`
behind) is continued at once and counted; what it wrote meanwhile is lost, and its next record
is the truth again.

Each pane's bytes go through its own :class:`~actors.core.ingress.osc.OscParser`; a record becomes
``ProgramStatus`` (source ``tmux_output``) through
:func:`actors.sources.pty_status.program_status`, for the session the pane shows, else for the
transport's own session, which the first record binds to the pane (``ProcessSeen`` for the
transport's process, then ``PaneBound`` with proof ``tmux_output``): the decisions are
:mod:`actors.core.tmux.output`'s. Evidence goes to the supervisor (``inject_nowait``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import anyio
import anyio.abc
import msgspec

import messages
from actors.core.clock import now_ms
from actors.core.ingress.osc import OscParser, StatusRecord
from actors.core.tmux.output import (
    COMMANDS_SUBSCRIPTION,
    COMMANDS_SUBSCRIPTION_COMMAND,
    OUTPUT_CLIENT_FLAGS,
    PANE_COMMANDS_COMMAND,
    PROOF,
    OutputParser,
    PaneOutput,
    PanePaused,
    Transport,
    find_transport,
    needs_output,
    output_command,
    pane_sessions,
    record_target,
)
from actors.core.tmux.protocol import (
    Reply,
    TmuxConnectionLost,
    TmuxNotification,
    TmuxTarget,
)
from actors.runtime.mailbox import EvidenceSink
from actors.sinks.tmux_client import ControlClient, control_argv
from actors.sources import procfs
from actors.sources.pty_status import program_status

__all__ = ["TmuxOutput", "TmuxOutputStatistics"]

logger = logging.getLogger("paneward.tmux")

#: Notifications after which the panes' sessions may differ (a pane opened, closed or moved).
_RELIST: frozenset[str] = frozenset(
    {"layout-change", "window-add", "window-close", "unlinked-window-add",
     "unlinked-window-close", "sessions-changed", "session-changed"}
)


class TmuxOutputStatistics(msgspec.Struct, kw_only=True):
    """Counters of a :class:`TmuxOutput` (monotonic but for the sizes ``clients``,
    ``panes_on``, ``transports``): one record it keeps, copied by ``statistics()``."""

    clients: int = 0  # output clients attached now
    panes_on: int = 0  # panes whose output is read now
    transports: int = 0  # panes whose process tree runs a transport now
    client_starts: int = 0
    client_failures: int = 0
    turned_on: int = 0
    turned_off: int = 0
    #: Output of a pane that does not need it (before its ``off`` took effect): dropped.
    unwanted_output: int = 0
    output_lines: int = 0
    output_bytes: int = 0
    records: int = 0
    emitted: int = 0
    #: Records from a pane that shows no live session and runs no transport: dropped.
    unattributed: int = 0
    rejected: int = 0  # evidence the sink refused (MessageError)
    bound: int = 0  # transport sessions bound to their pane by a record
    pauses: int = 0  # %pause from tmux (each continued at once)
    max_age_ms: int = 0  # the longest tmux held output for us (%extended-output)
    listings: int = 0
    walks: int = 0
    command_errors: int = 0
    bad_lines: int = 0
    last_error: str | None = None


class _Client:
    """One output client, attached to ``session``; ``on``: the panes it reads."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.on: set[str] = set()
        self.off: set[str] = set()  # panes told off (so a stray chunk is not told again)
        self.process: anyio.abc.Process | None = None
        self.scope = anyio.CancelScope()
        self.closing = False

    async def send(self, commands: list[str]) -> None:
        process = self.process
        if not commands or process is None or process.stdin is None:
            return
        try:
            await process.stdin.send(("\n".join(commands) + "\n").encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.scope.cancel()


class TmuxOutput:
    """Reads OSC 7501 records from the output of the panes that need it (module docstring).

    ``target`` is the bridge's server, ``sink`` where evidence goes, ``harnesses`` the ids of
    the harnesses that write OSC 7501 (a pane showing a live session of one is read; a record's
    ``app`` names one, else it is the ``terminal`` harness's).
    """

    def __init__(
        self, target: TmuxTarget, sink: EvidenceSink, harnesses: frozenset[str]
    ) -> None:
        self._target = target
        self._sink = sink
        self._harnesses = harnesses
        self._shown: dict[str, messages.SessionKey] = {}  # pane -> live session it shows
        self._panes: Mapping[str, tuple[str, int, str]] = {}  # pane -> (session, pid, command)
        self._transports: dict[str, Transport] = {}
        self._bound: dict[str, messages.SessionKey] = {}  # pane -> transport session bound
        self._feeds: dict[str, OscParser] = {}
        self._clients: dict[str, _Client] = {}
        self._changed = anyio.Event()
        self._relist = anyio.Event()
        self._stats = TmuxOutputStatistics()

    # -- told by the bridge -------------------------------------------------------------------

    def show(self, pane: str, activity: messages.Activity | None) -> None:
        """``pane`` shows ``activity`` now (``None``: nothing): a live session of a harness that
        writes OSC 7501 makes the pane need its output."""
        key = None
        if (
            activity is not None
            and activity.presence != "persisted"
            and activity.key.harness in self._harnesses
        ):
            key = activity.key
        if self._shown.get(pane) != key:
            if key is None:
                self._shown.pop(pane, None)
            else:
                self._shown[pane] = key
            self._changed.set()

    def on_notification(self, notification: TmuxNotification) -> None:
        """A notification of the bridge's client: list the panes again when their programs or
        their sessions may have changed."""
        name = notification.name
        if name == "subscription-changed":
            if notification.args.startswith(COMMANDS_SUBSCRIPTION + " "):
                self._relist.set()
        elif name in _RELIST:
            self._relist.set()

    async def serve(self, client: ControlClient) -> None:
        """Run while the bridge's ``client`` is connected: subscribe, list, walk, and keep the
        output clients as the panes need them; their clients detach when this ends."""
        try:
            await client.run_batch([COMMANDS_SUBSCRIPTION_COMMAND])
        except TmuxConnectionLost:
            return
        self._relist.set()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._list_loop, client)
                await self._reconcile_loop(tg)
        finally:
            for out in list(self._clients.values()):
                out.scope.cancel()
            self._clients.clear()
            self._stats.clients = self._stats.panes_on = 0

    # -- panes and transports -----------------------------------------------------------------

    async def _list_loop(self, client: ControlClient) -> None:
        while True:
            await self._relist.wait()
            self._relist = anyio.Event()
            try:
                [reply] = await client.run_batch([PANE_COMMANDS_COMMAND])
            except TmuxConnectionLost:
                return
            if not reply.ok:
                self._error(" ".join(reply.lines))
                continue
            self._stats.listings += 1
            before, now = self._panes, pane_sessions(reply.lines)
            self._panes = now
            changed = [p for p, row in now.items() if before.get(p) != row]
            for pane in [p for p in self._transports if p not in now]:
                del self._transports[pane]
            for pane in [p for p in self._bound if p not in now]:
                del self._bound[pane]
            if changed:
                found = await anyio.to_thread.run_sync(
                    _walk, {p: now[p][1] for p in changed}
                )
                self._stats.walks += len(changed)
                at = now_ms()
                for pane in changed:
                    transport = found.get(pane)
                    if transport is None:
                        self._transports.pop(pane, None)
                    else:
                        self._transports[pane] = transport
                    if pane in before:
                        # Its program changed: the pane mapper walks it again now.
                        self._inject(messages.PaneOpened(pane=pane, root_pid=now[pane][1],
                                                         at_ms=at))
                self._stats.transports = len(self._transports)
            self._changed.set()

    # -- output clients -----------------------------------------------------------------------

    async def _reconcile_loop(self, tg: anyio.abc.TaskGroup) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            wanted = needs_output(self._shown, self._transports)
            by_session: dict[str, set[str]] = {}
            for pane in wanted:
                row = self._panes.get(pane)
                if row is not None:
                    by_session.setdefault(row[0], set()).add(pane)
            for session, out in list(self._clients.items()):
                if session not in by_session:
                    out.scope.cancel()  # its task turns the panes off and detaches
                    del self._clients[session]
            for session, panes in by_session.items():
                existing = self._clients.get(session)
                if existing is None:
                    out = self._clients[session] = _Client(session)
                    out.on = set(panes)
                    others = {p for p, row in self._panes.items()
                              if row[0] == session and p not in panes}
                    tg.start_soon(self._run_client, out, others)
                    continue
                out = existing
                commands = [output_command(p, "on") for p in sorted(panes - out.on)]
                commands += [output_command(p, "off") for p in sorted(out.on - panes)]
                self._stats.turned_on += len(panes - out.on)
                self._stats.turned_off += len(out.on - panes)
                for pane in out.on - panes:
                    self._feeds.pop(pane, None)
                out.off |= out.on - panes
                out.off -= panes
                out.on = set(panes)
                await out.send(commands)
            self._stats.clients = len(self._clients)
            self._stats.panes_on = sum(len(c.on) for c in self._clients.values())

    async def _run_client(self, out: _Client, others: set[str]) -> None:
        argv = [*self._target.argv(), "-u", "-N", "-C", "attach-session", "-t", out.session,
                "-f", OUTPUT_CLIENT_FLAGS]
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        with out.scope:
            try:
                process = await anyio.open_process(control_argv(argv), env=env)
            except OSError as exc:
                self._stats.client_failures += 1
                self._error(f"cannot run tmux: {exc}")
                return
            out.process = process
            self._stats.client_starts += 1
            self._stats.turned_on += len(out.on)
            try:
                # Output is on for every pane of the session at attach: off for all but ours.
                out.off = set(others)
                await out.send([output_command(p, "off") for p in sorted(others)])
                await self._read(out, process)
            finally:
                with anyio.CancelScope(shield=True):
                    self._stats.turned_off += len(out.on)
                    for pane in out.on:
                        self._feeds.pop(pane, None)
                    out.on = set()
                    if process.stdin is not None:
                        await process.stdin.aclose()  # tmux detaches the client
                    with anyio.move_on_after(2):
                        await process.wait()
                    if process.returncode is None:
                        process.kill()
                        await process.wait()
                    await process.aclose()
        if self._clients.get(out.session) is out:
            # It ended by itself (its session closed): the next change may start another.
            del self._clients[out.session]
            self._stats.clients = len(self._clients)
            self._changed.set()

    async def _read(self, out: _Client, process: anyio.abc.Process) -> None:
        assert process.stdout is not None
        parser = OutputParser()
        stats = self._stats
        try:
            while True:
                try:
                    data = await process.stdout.receive(65536)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    return
                replies: list[str] = []
                for event in parser.feed(data):
                    if isinstance(event, PaneOutput):
                        stats.output_lines += 1
                        stats.output_bytes += len(event.data)
                        if event.age_ms is not None and event.age_ms > stats.max_age_ms:
                            stats.max_age_ms = event.age_ms
                        if event.pane in out.on:
                            self._feed(event.pane, event.data)
                        else:
                            stats.unwanted_output += 1
                            if event.pane not in out.off:
                                out.off.add(event.pane)
                                replies.append(output_command(event.pane, "off"))
                    elif isinstance(event, PanePaused):
                        if not event.continued:
                            stats.pauses += 1
                            if event.pane in out.on:
                                replies.append(output_command(event.pane, "continue"))
                    elif isinstance(event, Reply) and event.from_client and not event.ok:
                        self._stats.command_errors += 1
                        self._error(" ".join(event.lines))
                stats.bad_lines = parser.bad_lines
                await out.send(replies)
        finally:
            stats.bad_lines = parser.bad_lines

    # -- records ------------------------------------------------------------------------------

    def _feed(self, pane: str, data: bytes) -> None:
        feed = self._feeds.get(pane)
        if feed is None:
            feed = self._feeds[pane] = OscParser()
        _, events = feed.feed(data)
        for event in events:
            if isinstance(event, StatusRecord):
                self._record(pane, event)

    def _record(self, pane: str, record: StatusRecord) -> None:
        self._stats.records += 1
        target = record_target(
            record.app,
            shown=self._shown.get(pane),
            transport=self._transports.get(pane),
            bound=self._bound.get(pane),
            harnesses=self._harnesses,
        )
        if target is None:
            self._stats.unattributed += 1
            return
        at = now_ms()
        if target.bind:
            if target.owner is not None:
                pid, token = target.owner
                self._inject(messages.ProcessSeen(pid=pid, start_token=token, at_ms=at,
                                                  observed_at_ms=at, key=target.key))
            self._inject(messages.PaneBound(key=target.key, pane=pane, at_ms=at, proof=PROOF))
            self._bound[pane] = target.key
            self._stats.bound += 1
        if self._inject(program_status(record, key=target.key, pane=pane, at_ms=at,
                                       source="tmux_output")):
            self._stats.emitted += 1

    def _inject(self, message: messages.Inbound) -> bool:
        try:
            self._sink.inject_nowait(message)
        except messages.PanewardError as exc:
            self._stats.rejected += 1
            self._error(str(exc))
            return False
        return True

    def _error(self, text: str) -> None:
        self._stats.last_error = text

    def statistics(self) -> TmuxOutputStatistics:
        """A point-in-time copy of the counters (see :class:`TmuxOutputStatistics`)."""
        return msgspec.structs.replace(self._stats)


def _walk(roots: Mapping[str, int]) -> dict[str, Transport]:
    """Worker thread: the transport each pane's process tree runs (panes without one left out)."""
    found: dict[str, Transport] = {}

    def identity(pid: int) -> tuple[str, str] | None:
        stat = procfs.read_stat(pid)
        return None if stat is None else (stat.comm, stat.start_token)

    children = procfs.children
    if not procfs.HAVE_CHILDREN:
        table = procfs.children_map()
        children = lambda pid: table.get(pid, [])  # noqa: E731
    for pane, root in roots.items():
        transport = find_transport(root, children, identity, procfs.read_cmdline)
        if transport is not None:
            found[pane] = transport
    return found
