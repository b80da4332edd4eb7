"""tmux integration: per-pane badges and pane lifecycle through one control-mode client.

Who sends and handles what:

- :class:`TmuxBridge` is one actor. It holds a ``latest`` subscription of the supervisor's
  broadcast hub (docs/design.md §7) and feeds each :class:`~messages.Snapshot` /
  :class:`~messages.Transition` to a :class:`~actors.core.tmux.badges.BadgeBook`; the panes whose
  options changed are written to tmux in one pipelined batch per tick through one
  :class:`~actors.sinks.tmux_client.ControlClient` (never a process per pane).
- Over the same client it follows the server's panes (control-mode notifications plus one
  ``refresh-client -B`` subscription, no polling of its own) and injects
  :class:`~messages.PaneOpened` / :class:`~messages.PaneClosed` / :class:`~messages.PaneFocused` /
  :class:`~messages.PtyExit` into the supervisor (``inject_nowait``), which routes them to the
  pane mapper and the sessions.
- One daemon per server: on each attach it takes hold of the server (:mod:`actors.core.tmux.hold`)
  before writing anything; while another live daemon holds it, it writes nothing there and
  retries with the backoff below (state ``refused``).
- A lost connection (server killed, our session closed) is retried with the one retry rule
  (:class:`~actors.core.backoff.Backoff`: a connection resets the delay only once it worked for
  a while, so a server that closes every client at once is retried ever more slowly);
  after each (re)connect the badges are re-applied from the book's current state (once the
  subscription's snapshot is in the book), options we left on panes that are no longer bound
  are removed, and the pane listing is diffed again.
- Window markers: each pane listing says which window each pane is in
  (:class:`~actors.core.tmux.badges.WindowMarks`); ``@paneward_window`` on a window is the most
  urgent badge of its panes, written in the same batch as the pane options that change it.
- On shutdown (cancellation, or the end of the subscription) nothing is removed: the control
  client closes and the tmux hook installed at connect marks every badge and window marker
  stale and the summary ``paneward: down``, as it does when the daemon is killed; the next
  daemon replaces them.
- Health (:mod:`actors.core.tmux.health`): while badges are shown, a probe round trip every
  few seconds; a probe tmux leaves unanswered, or tmux closing every control client at once,
  makes the bridge ``stalled``: every badge shows ``? unknown`` and the summary says so (a
  one-shot ``tmux`` process writes them, where tmux still takes a command), until a connection
  rewrote every badge. No probe while no badge is shown.
- Durations: ``@paneward_age`` of a pane with open attention is rewritten when its text
  changes (``<1m`` -> ``1m`` -> ... -> ``1h``), so at most once a minute per pane; one timer,
  for the next such change over all panes, and none while no attention is open.
- Program status from tmux's own output stream (:mod:`actors.sinks.tmux_output`): with
  ``osc_harnesses``, the panes that show a live session of one of those harnesses, or run
  ``ssh`` / ``docker exec`` / ``kubectl exec``, have their OSC 7501 records read from pane
  output by a second control client per tmux session (this one keeps ``no-output``).
- :meth:`TmuxBridge.run_batch` lends the one control-mode client to the notification sink
  (:mod:`actors.sinks.notify`: where clients look, ``display-message``).

:func:`tmux_config_snippet` is what ``paneward tmux-config`` prints.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel
import msgspec

from actors.core.backoff import Backoff
from actors.core.clock import now_ms
from actors.core.tmux.badges import (
    BADGE_OPTION,
    WINDOW_OPTION,
    BadgeBook,
    BadgeStatistics,
    PaneOptions,
    WindowMarks,
    option_commands,
    summary_command,
    window_command,
)
from actors.core.tmux.health import (
    PROBE_COMMAND,
    PROBE_EVERY_S,
    STALL_AFTER_S,
    BridgeHealth,
    TmuxClosedAtOnce,
    TmuxNoAnswer,
    stalled_commands,
    stopped_commands,
)
from actors.core.tmux.hold import (
    CLIENT_NAME_COMMAND,
    Holder,
    TmuxRefused,
    down_hook_command,
    down_hook_commands,
    hold_commands,
    parse_holder,
    refusal,
)
from actors.core.tmux.panes import (
    LIST_PANES_COMMAND,
    REAP_COMMAND,
    SERVER_ID_COMMAND,
    SUBSCRIPTION_COMMAND,
    SUBSCRIPTION_NAME,
    TRIGGER_NOTIFICATIONS,
    VIEWS_COMMAND,
    PaneTable,
    PaneTableStatistics,
    parse_pane_rows,
    viewed_pane,
)
from actors.core.tmux.protocol import (
    Reply,
    TmuxConnectionLost,
    TmuxError,
    TmuxNotification,
    TmuxTarget,
    commands_argv,
    format_literal,
    quote,
    quote_exact,
)
from actors.runtime.hub import ready_now
from actors.runtime.mailbox import ActorHost, EvidenceSink
from actors.sinks import tmux_client
from actors.sinks.tmux_client import ControlClient, ControlClientStatistics
from actors.sinks.tmux_output import TmuxOutput, TmuxOutputStatistics
from actors.sources import procfs
from messages import Activity, MessageError, Snapshot, Transition

__all__ = [
    "EvidenceSink",
    "TmuxBridge",
    "TmuxStatistics",
    "tmux_config_snippet",
]

logger = logging.getLogger("paneward.tmux")

_LIST_BADGED_COMMAND: Final = f"list-panes -a -F {quote('#{pane_id}|#{' + BADGE_OPTION + '}')}"
_LIST_MARKED_COMMAND: Final = (
    f"list-windows -a -F {quote('#{window_id}|#{' + WINDOW_OPTION + '}')}"
)
# Stands for "tmux may hold anything here": differs from every real value, so the next diff
# rewrites (or removes) every option of that pane.
_UNKNOWN: Final = PaneOptions(*["\x00unknown"] * len(PaneOptions._fields))
# tmux's answers to an option write for a pane that closed meanwhile: "can't find pane: %N"
# from target resolution, "no such pane: %N" from pane-option scoping (`set-option -p`).
_VANISHED_PANE: Final = ("can't find pane", "no such pane")
# The same for a window marker's window (closed, or its last pane moved away).
_VANISHED_WINDOW: Final = ("can't find window", "no such window")
# Tries of the hold's compare-and-swap before giving up for this connection (each try loses
# only to a daemon that took hold in between, which the next try then sees).
_HOLD_TRIES: Final = 3
# A burst of subscription items is drained before writing, but a source that never goes quiet
# must not starve the writer: write after this many scheduler rounds at most.
_MAX_SETTLE_ROUNDS: Final = 1000


class TmuxStatistics(msgspec.Struct, kw_only=True):
    """Counters of a :class:`TmuxBridge` (monotonic over its life, across reconnects): one
    record it keeps, copied by ``statistics()``.

    ``connected``, the control-client totals (``batches``, ``commands``, ``notifications``,
    summed over every connection) and the nested ``badges`` / ``panes`` are filled in then.
    ``state`` is where the connection is: ``connecting`` (the first attempt has not ended),
    ``connected``, ``waiting`` (no connection yet: no server, no session), ``disconnected``
    (a connection ended and none is back yet), ``refused`` (another live daemon drives that
    server: :mod:`actors.core.tmux.hold`), ``stalled`` (tmux left a probe unanswered or closes
    every control client at once: :mod:`actors.core.tmux.health`; until a connection rewrote
    every badge); ``last_error`` says why while it is not ``connected`` and is cleared when a
    connection is made. ``retry_delay`` is the wait before the latest retry.
    """

    connected: bool = False
    state: str = "connecting"
    connections: int = 0
    connect_failures: int = 0
    refusals: int = 0  # connections left alone: another live daemon held the server
    takeovers: int = 0  # holds taken over from a daemon that was gone
    last_error: str | None = None
    retry_delay: float = 0.0
    stalls: int = 0  # times the bridge became stalled
    probes: int = 0  # health round trips answered
    stall_writes: int = 0  # one-shot writes (stalled marks; down at a stop) that tmux ran
    hook_writes: int = 0  # down hooks installed again for a changed set of marked panes
    batches: int = 0  # control-mode writes, all purposes
    commands: int = 0
    badge_batches: int = 0  # writes carrying badge changes (one per tick at most)
    badge_commands: int = 0
    age_ticks: int = 0  # wake-ups of the durations timer (one per due age change, at most)
    lent_batches: int = 0  # batches run for another sink (run_batch)
    command_errors: int = 0  # tmux answered %error (other than a vanished pane)
    missing_panes: int = 0  # option writes for a pane that no longer exists
    missing_windows: int = 0  # window marker writes for a window that no longer exists
    notifications: int = 0
    pane_listings: int = 0
    reap_requests: int = 0  # REAP_COMMAND runs (a dead pane whose exit status tmux had not got)
    bad_pane_rows: int = 0
    injected: int = 0
    rejected: int = 0  # messages the sink refused (MessageError)
    stale_cleared: int = 0  # panes that carried our options without a bound session
    badges: BadgeStatistics = msgspec.field(default_factory=BadgeStatistics)
    panes: PaneTableStatistics = msgspec.field(default_factory=PaneTableStatistics)
    #: The output reader's (:mod:`actors.sinks.tmux_output`); ``None``: pane output is not read.
    output: TmuxOutputStatistics | None = None


class RemoteSessions(Protocol):
    """A fleet's sessions, counted in the summary (:class:`actors.sources.fleet.FleetView`)."""

    def activities(self, host: str | None = None) -> list[Activity]: ...

    async def wait_changed(self) -> None: ...


class TmuxBridge:
    """The tmux actor: badges out, pane lifecycle in, one control-mode client per server.

    ``socket_name`` / ``socket_path`` select the server as ``tmux -L`` / ``-S`` do (neither:
    the server of ``$TMUX``, else tmux's default). ``session`` picks the session the control
    client attaches to (default: tmux's choice); it only matters for which notifications
    arrive first — panes of every session are followed. ``full_text`` shows attention reasons
    unredacted in ``@paneward_reason`` (default: redacted, :mod:`actors.core.views.redact`).
    ``owner`` names this daemon in another one's refusal (its state directory); the hold is
    this process's pid and start token (:mod:`actors.core.tmux.hold`). ``probe_every`` and
    ``stall_after`` are the health probe's period and deadline (:mod:`actors.core.tmux.health`).
    ``osc_harnesses`` are the harnesses whose OSC 7501 records are read from the output of the
    panes that show them (:mod:`actors.sinks.tmux_output`; empty: no pane output is read); it
    needs the pane side (``panes``).
    """

    def __init__(
        self,
        *,
        socket_name: str | None = None,
        socket_path: str | None = None,
        session: str | None = None,
        badges: bool = True,
        panes: bool = True,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        reply_timeout: float = 10.0,
        clock: Callable[[], int] = now_ms,
        full_text: bool = False,
        owner: str = "",
        probe_every: float = PROBE_EVERY_S,
        stall_after: float = STALL_AFTER_S,
        remote: RemoteSessions | None = None,
        osc_harnesses: frozenset[str] = frozenset(),
    ) -> None:
        self._remote = remote
        self._osc_harnesses = osc_harnesses
        self._output: TmuxOutput | None = None
        self._target = TmuxTarget(socket_name, socket_path)
        self._owner = owner
        self._holder = Holder(os.getpid(), procfs.start_token(os.getpid()) or "0")
        self._target.argv()  # reject -L together with -S now, not at the first connect
        self._session = session
        self._badges_on = badges
        self._panes_on = panes
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._reply_timeout = reply_timeout
        self._probe_every = probe_every
        self._stall_after = stall_after
        self._health = BridgeHealth()
        # Set when the book shows a badge: the probe waits for it while none is shown.
        self._badges_shown = anyio.Event()
        self._clock = clock
        self._book = BadgeBook(clock=clock, full_text=full_text)
        # Set once the subscription's first item (its snapshot) is in the book: the first write
        # of a connection waits for it, so that a restart replaces the old badges with what was
        # re-proved instead of removing them first.
        self._book_ready = anyio.Event()
        # Set when the book changed: the durations timer re-reads its deadline.
        self._ages_changed = anyio.Event()
        self._table = PaneTable()
        # What tmux holds, as far as we know, on the current connection.
        self._written: dict[str, PaneOptions] = {}
        self._written_summary: str | None = None
        self._dirty: set[str] = set()
        # Window markers (@paneward_window): where each pane is, from the pane listings, what
        # tmux holds, and the windows whose panes moved since the last write.
        self._windows = WindowMarks()
        self._written_windows: dict[str, str] = {}
        self._dirty_windows: set[str] = set()
        # One writer at a time: the subscription side (one batch per tick) and a new
        # connection's full rewrite both go through it.
        self._flush_lock = anyio.Lock(fast_acquire=True)
        self._ready: ControlClient | None = None  # connected, and its full rewrite is done
        self._answered_at = 0.0
        self._refresh = anyio.Event()
        self._applied = 0
        self._client: ControlClient | None = None
        # The current connection's client name, and the panes and windows its down hook
        # marks stale (:func:`~actors.core.tmux.hold.down_hook_command`).
        self._client_name: str | None = None
        self._hooked: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
        # Set when a write may have changed which panes or windows hold our options: only
        # then is that set compared with the hook's (one write per tick need not look).
        self._hook_dirty = False
        self._old_client_stats: list[ControlClientStatistics] = []
        self._stats = TmuxStatistics()
        self._batch_answered = anyio.Event()

    # -- entry points ------------------------------------------------------------------------

    async def run(self, host: ActorHost) -> None:
        """Run under the supervisor (``Supervisor.start_actor``): subscribe ``latest`` to its
        broadcast and inject pane messages into it."""
        async with host.subscribe(mode="latest", snapshot=True) as items:
            await self.serve(items if self._badges_on else None, host if self._panes_on else None)

    async def serve(self, items: AsyncIterator[Any] | None, sink: EvidenceSink | None) -> None:
        """Run until cancelled, or until ``items`` ends. Options stay (tmux's hook marks them
        stale); a bridge that stops while stalled sets the summary ``paneward: down`` itself.

        ``items`` yields Snapshot/Transition items (``None``: no badges); ``sink`` receives the
        pane messages (``None``: panes are not followed).
        """
        if sink is not None and self._osc_harnesses:
            self._output = TmuxOutput(self._target, sink, self._osc_harnesses)
        if tmux_client.DIES_WITH_US is None:
            logger.warning(
                "tmux: no setpriv (util-linux): if this daemon is killed, tmux 3.3a can keep its"
                " control clients (no 'paneward: down') and crash at exit (docs/tmux.md)"
            )
        try:
            async with anyio.create_task_group() as tg:
                if items is not None:
                    tg.start_soon(self._consume, items, tg.cancel_scope)
                    tg.start_soon(self._age_loop)
                    if self._remote is not None:
                        tg.start_soon(self._remote_loop, self._remote)
                await self._connection_loop(sink)
        finally:
            if self._health.stalled is not None and self._badges_on:
                # No client of ours is left whose hook would say so: say it ourselves.
                with anyio.CancelScope(shield=True):
                    await self._write_outside(stopped_commands(self._holder.value()))

    # -- subscription side -------------------------------------------------------------------

    async def _consume(self, items: AsyncIterator[Any], scope: anyio.CancelScope) -> None:
        # The subscription (supervisor's Subscription, or a memory stream) hands over what is
        # already queued without a scheduler round per item, so a tick's burst is applied in
        # one go and written in one batch by this same task — no hand-over to another task on
        # the hot path.
        drain = hasattr(items, "receive_nowait")
        async for item in items:
            self._take(item)
            if drain:
                await self._settle(items)
            client = self._ready
            if client is not None:
                await self._flush(client)
        # The subscription ended (supervisor shutdown): stop, which clears the badges.
        scope.cancel()

    def _take(self, item: object) -> None:
        book = self._book
        aging = book.aging_changes
        changes = book.apply(item)
        for change in changes:
            self._dirty.add(change.pane)
        output = self._output
        if output is not None:
            # What each touched pane shows, by key: a pane's winner can change session with the
            # same options (a Codex TUI's own session giving way to its thread).
            touched = {change.pane for change in changes}
            if isinstance(item, Transition) and item.after.pane is not None:
                touched.add(item.after.pane)
            elif isinstance(item, Snapshot):
                touched |= {a.pane for a in item.activities if a.pane is not None}
            for pane in touched:
                output.show(pane, book.winner(pane))
        if book.aging_changes != aging:
            self._ages_changed.set()
        self._applied += 1
        self._book_ready.set()
        if book.shown:
            self._badges_shown.set()

    async def _remote_loop(self, remote: RemoteSessions) -> None:
        """Rewrite the summary when the fleet's sessions change (it counts them too)."""
        while True:
            await remote.wait_changed()
            client = self._ready
            if client is not None:
                await self._flush(client)

    async def _age_loop(self) -> None:
        """Rewrite ``@paneward_age`` when a pane's text is due to change: one timer for the
        first due change over all panes; none while no pane has attention open (then it waits
        for the book to change)."""
        while True:
            deadline = self._book.next_tick_ms()
            changed = self._ages_changed = anyio.Event()
            if deadline is None:
                await changed.wait()
                continue
            with anyio.move_on_after(max(0, deadline - self._clock()) / 1000):
                await changed.wait()
                continue
            self._stats.age_ticks += 1
            for change in self._book.tick():
                self._dirty.add(change.pane)
            client = self._ready
            if client is not None and self._dirty:
                await self._flush(client)

    async def _settle(self, items: object) -> None:
        """Take everything the subscription has for this tick: what is queued now, then what
        each scheduler round brings until one brings nothing (producers that publish from
        other tasks in the same tick, e.g. the session actors woken by one burst of evidence).
        A source that never goes quiet must not starve the writer: at most
        ``_MAX_SETTLE_ROUNDS`` rounds."""
        for rounds in range(_MAX_SETTLE_ROUNDS):
            took = False
            for item in ready_now(items):  # the end, if it came, the next __anext__ reports
                self._take(item)
                took = True
            if rounds and not took:
                return
            await anyio.lowlevel.checkpoint()

    # -- connection --------------------------------------------------------------------------

    def _set_state(self, state: str, error: str | None) -> None:
        """Record where the connection is; say it on the log (the daemon's stderr) when that
        changed, so that a daemon that cannot reach tmux is never silent about it."""
        stats = self._stats
        before = stats.state
        stats.state = state
        stats.last_error = error
        if state == before:
            return
        where = self._target.describe()
        if state == "connected":
            # The first connection of a daemon that never had trouble is no news.
            log = logger.info if before == "connecting" else logger.warning
            log("tmux: connected to %s", where)
        elif state == "waiting":
            logger.warning("tmux: %s; waiting", error)
        elif state == "disconnected":
            logger.warning("tmux: connection to %s lost (%s); reconnecting", where, error)
        elif state == "refused":
            logger.warning("tmux: %s; waiting", error)
        elif state == "stalled":
            logger.warning("tmux: bridge to %s stalled (%s); reconnecting", where, error)

    async def _connection_loop(self, sink: EvidenceSink | None) -> None:
        backoff = Backoff(self._backoff_initial, self._backoff_max)
        health = self._health
        while True:
            attached = False
            try:
                async with ControlClient(
                    self._target,
                    on_notification=self._on_notification,
                    session=self._session,
                    reply_timeout=self._reply_timeout,
                ) as client:
                    attached, now = True, time.monotonic()
                    backoff.connected(now)
                    health.connected(now)
                    try:
                        await self._take_hold(client)
                        self._client = client
                        self._stats.connections += 1
                        if health.stalled is None:
                            self._set_state("connected", None)
                        # Cancellation (shutdown) leaves every option as it is: the client
                        # closes, and tmux's hook marks the badges stale (see _serve_client).
                        await self._serve_client(client, sink)
                    finally:
                        self._client = self._ready = None
                        self._old_client_stats.append(client.statistics())
            except TmuxRefused as exc:
                self._stats.refusals += 1
                health.refused()
                state, error = "refused", str(exc)
            except TmuxNoAnswer as exc:
                health.no_answer(str(exc))
                state, error = "stalled", str(exc)
            except TmuxConnectionLost as exc:
                health.ended(time.monotonic(), str(exc))
                state, error = "disconnected", str(exc)
            except TmuxError as exc:
                self._stats.connect_failures += 1
                if isinstance(exc, TmuxClosedAtOnce):
                    health.closed(str(exc))
                else:
                    health.gone()
                connected_before = self._stats.state in ("connected", "disconnected", "stalled")
                state, error = ("disconnected" if connected_before else "waiting"), str(exc)
            # Only a connection that worked for a while resets the delay (Backoff).
            delay = backoff.ended(time.monotonic()) if attached else backoff.failed()
            self._stats.retry_delay = delay
            self._stats.stalls = health.stalls
            if health.stalled is not None:
                state, error = "stalled", health.stalled
            self._set_state(state, error)
            if health.stalled is not None and self._badges_on:
                await self._write_outside(stalled_commands(self._holder.value()))
            await anyio.sleep(delay)

    async def _write_outside(self, command: list[str]) -> None:
        """Run ``command`` (argv words) in tmux where it still takes one, outside the control
        client (which is what does not work): a one-shot ``tmux`` process, given at most
        ``stall_after`` seconds (a stopped server never answers it: it is killed then)."""
        argv = [*self._target.argv(), "-N", *commands_argv([command])]
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}
        with anyio.move_on_after(self._stall_after):
            try:
                done = await anyio.run_process(argv, env=env, check=False)
            except OSError:
                return
            if done.returncode == 0:
                self._stats.stall_writes += 1

    async def _take_hold(self, client: ControlClient) -> None:
        """Make this daemon the one that drives the server (:mod:`actors.core.tmux.hold`).

        :raises TmuxRefused: another live daemon holds it (nothing was written).
        :raises TmuxConnectionLost: the connection ended meanwhile.
        """
        mine = self._holder.value()
        expected = ""
        for _ in range(_HOLD_TRIES):
            *_, held, state = await client.run_batch(hold_commands(self._holder, expected))
            value = held.lines[0] if held.ok and held.lines else ""
            if value == mine:
                if expected:
                    self._stats.takeovers += 1
                return
            other = parse_holder(value)
            if other is not None and await anyio.to_thread.run_sync(_holder_alive, other):
                state_dir = state.lines[0] if state.ok and state.lines else ""
                raise TmuxRefused(refusal(self._target.describe(), other, state_dir))
            expected = value  # gone (or unreadable): the next try replaces it
        raise TmuxRefused(f"{self._target.describe()}: the paneward hold keeps changing")

    async def _serve_client(self, client: ControlClient, sink: EvidenceSink | None) -> None:
        # tmux's own hook shows the daemon's end (this client going, however the daemon ends):
        # installed before anything is written, so no badge is ever left unmarked.
        [name] = await client.run_batch([CLIENT_NAME_COMMAND])
        if not name.ok or not name.lines:
            raise TmuxConnectionLost(f"no client name: {' '.join(name.lines)}")
        self._client_name = name.lines[0]
        # The hook names the badges it marks: first every one tmux holds now (a restart: the
        # last daemon's), then what each write leaves (_flush_locked).
        [marked_reply, badged_reply] = await client.run_batch(
            [_LIST_MARKED_COMMAND, _LIST_BADGED_COMMAND])
        badged: set[str] = set()
        for line in badged_reply.lines:
            pane, _, badge = line.partition("|")
            if badge:
                badged.add(pane)
        # Window markers tmux holds: each is rewritten (or removed) by the first write.
        marked = set()
        for line in marked_reply.lines:
            window, _, marker = line.partition("|")
            if marker:
                marked.add(window)
        self._hooked = (frozenset(badged), frozenset(marked))
        self._hook_dirty = True  # the first write rewrites everything: the set may change
        hook = down_hook_commands(self._client_name, self._owner, badges=self._badges_on,
                                  panes=sorted(badged), windows=sorted(marked))
        for reply in await client.run_batch(hook):
            if not reply.ok:
                self._stats.command_errors += 1
                self._stats.last_error = " ".join(reply.lines)
        if self._badges_on:
            await self._book_ready.wait()
        if sink is not None:
            await client.run_batch([SUBSCRIPTION_COMMAND])
        # Options on panes of this server that we do not (or no longer) want: left by a
        # previous run that was killed, or by a binding that ended while we were disconnected.
        stale = {pane for pane in badged if pane not in self._book.shown}
        self._stats.stale_cleared += len(stale)
        if self._badges_on:
            async with self._flush_lock:
                # The full state is rewritten on every connection: a new server has none of it.
                self._written = dict.fromkeys(stale | set(self._book.shown), _UNKNOWN)
                self._written_summary = None
                self._dirty = set(self._written)
                self._written_windows = dict.fromkeys(marked, "\x00unknown")
                # A window no listing has placed yet keeps the marker it has (a restart: the
                # last daemon's, stale) until the first listing, run right after this write,
                # recomputes every window; without listings it is rewritten now.
                self._dirty_windows = set(self._windows.windows)
                if sink is None:
                    self._dirty_windows |= marked
                self._ready = client  # from now on the subscription side writes to it
                await self._flush_locked(client)
        if self._health.ready():
            self._set_state("connected", None)  # every badge is the truth again
        self._refresh.set()
        async with anyio.create_task_group() as tg:
            if sink is not None:
                tg.start_soon(self._pane_loop, client, sink)
                if self._output is not None:
                    tg.start_soon(self._output.serve, client)
            if self._badges_on:
                tg.start_soon(self._probe_loop, client)
            reason = await client.wait_closed()
            tg.cancel_scope.cancel()
        raise (TmuxNoAnswer if client.unanswered else TmuxConnectionLost)(reason)

    async def _probe_loop(self, client: ControlClient) -> None:
        """A round trip every ``probe_every`` seconds while a badge is shown, none (no timer)
        while none is; one tmux leaves unanswered for ``stall_after`` seconds closes the client
        (:meth:`ControlClient.run_batch`), which stalls the bridge."""
        while True:
            while not self._book.shown:
                shown = self._badges_shown = anyio.Event()
                await shown.wait()
            await anyio.sleep(self._probe_every)
            if not self._book.shown:
                continue
            try:
                await client.run_batch([PROBE_COMMAND], answer_within=self._stall_after)
            except TmuxConnectionLost:
                return
            self._stats.probes += 1

    def _on_notification(self, notification: TmuxNotification) -> None:
        if self._output is not None:
            self._output.on_notification(notification)
        if notification.name in TRIGGER_NOTIFICATIONS:
            if (
                notification.name == "subscription-changed"
                and not notification.args.startswith(SUBSCRIPTION_NAME + " ")
            ):
                return
            self._refresh.set()

    # -- badges ------------------------------------------------------------------------------

    async def _flush(self, client: ControlClient) -> None:
        async with self._flush_lock:
            if self._ready is client:
                await self._flush_locked(client)

    async def _flush_locked(self, client: ControlClient) -> None:
        """Write every dirty pane (and the summary) in one batch; return when tmux answered.

        A lost connection ends it quietly: the next connection rewrites everything.
        """
        commands: list[str] = []
        # The panes that got commands, each with the index of its first command: a %error
        # reply is traced back to its pane by bisection (errors are rare, so the common path
        # keeps no per-command bookkeeping).
        firsts: list[int] = []
        owners: list[str] = []
        shown = self._book.shown
        written = self._written
        # ``written`` is updated before the batch is awaited: if this task is cancelled
        # (shutdown) while tmux runs it, the clean-up must still remove what it sets. A lost
        # connection makes the next one rewrite everything anyway.
        for pane in sorted(self._dirty):
            want = shown.get(pane)
            lines = option_commands(pane, want, written.get(pane))
            if lines:
                firsts.append(len(commands))
                owners.append(pane)
                commands += lines
            if want is None:
                if written.pop(pane, None) is not None:
                    self._hook_dirty = True
            else:
                if pane not in written:
                    self._hook_dirty = True
                written[pane] = want
        windows = self._windows
        dirty_windows = self._dirty_windows | windows.windows_of(self._dirty)
        self._dirty.clear()
        self._dirty_windows = set()
        pane_commands = len(commands)
        written_windows = self._written_windows
        window_owners: list[str] = []
        for window in sorted(dirty_windows):
            marker = windows.marker(window, shown)
            if marker != written_windows.get(window, ""):
                commands.append(window_command(window, marker))
                window_owners.append(window)
            if marker:
                if window not in written_windows:
                    self._hook_dirty = True
                written_windows[window] = marker
            elif written_windows.pop(window, None) is not None:
                self._hook_dirty = True
        window_commands = len(commands)
        summary = self._book.summary(() if self._remote is None else self._remote.activities())
        if summary != self._written_summary:
            commands.append(summary_command(summary))
        if not commands:
            return
        self._written_summary = summary
        # The down hook names every pane and window this batch leaves marked, installed before
        # the batch's writes: no option of ours is ever one the hook would not mark stale.
        hook: list[str] = []
        if self._hook_dirty and self._client_name is not None:
            hooked = (frozenset(written), frozenset(written_windows))
            if hooked != self._hooked:
                hook.append(down_hook_command(self._client_name, badges=True,
                                              panes=sorted(hooked[0]),
                                              windows=sorted(hooked[1])))
            else:
                self._hook_dirty = False
        try:
            replies = await client.run_batch(hook + commands)
        except TmuxConnectionLost:
            return  # the connection loop rewrites everything after reconnecting
        if hook:
            self._hooked = hooked
            self._hook_dirty = False
            self._stats.hook_writes += 1
            answer, *replies = replies
            if not answer.ok:
                self._stats.command_errors += 1
                self._stats.last_error = " ".join(answer.lines)
        self._stats.badge_batches += 1
        self._stats.badge_commands += len(commands)
        self._answered_at = time.perf_counter()
        self._batch_answered.set()
        self._batch_answered = anyio.Event()
        for index, reply in enumerate(replies):
            if reply.ok:
                continue
            text = " ".join(reply.lines)
            if index < pane_commands and text.startswith(_VANISHED_PANE):
                # The pane closed before its unbinding reached us: nothing left to clear.
                self._stats.missing_panes += 1
                written.pop(owners[bisect.bisect_right(firsts, index) - 1], None)
            elif pane_commands <= index < window_commands and text.startswith(_VANISHED_WINDOW):
                self._stats.missing_windows += 1
                written_windows.pop(window_owners[index - pane_commands], None)
            else:
                self._stats.command_errors += 1
                self._stats.last_error = text

    # -- panes -------------------------------------------------------------------------------

    async def _pane_loop(self, client: ControlClient, sink: EvidenceSink) -> None:
        reap = False
        while True:
            if not reap:
                await self._refresh.wait()
            self._refresh = anyio.Event()
            commands = [SERVER_ID_COMMAND, LIST_PANES_COMMAND, VIEWS_COMMAND]
            if reap:
                # A dead pane without exit status: tmux may have lost its SIGCHLD (see
                # actors.core.tmux.panes); make it reap, then list again in the same batch.
                commands.insert(0, REAP_COMMAND)
                self._stats.reap_requests += 1
            reap = False
            try:
                *reaped, server, listing, views = await client.run_batch(commands)
            except TmuxConnectionLost:
                return
            for reply in reaped:
                if not reply.ok:
                    self._stats.command_errors += 1
                    self._stats.last_error = " ".join(reply.lines)
            if not (server.ok and listing.ok and server.lines):
                self._stats.command_errors += 1
                self._stats.last_error = " ".join(server.lines + listing.lines)
                continue
            self._stats.pane_listings += 1
            rows, errors = parse_pane_rows(listing.lines)
            self._stats.bad_pane_rows += len(errors)
            # Without an answer about clients, focus goes by the listing alone.
            viewed = viewed_pane(views.lines) if views.ok else None
            for message in self._table.update(server.lines[0], rows, self._clock(), viewed):
                try:
                    sink.inject_nowait(message)
                except MessageError as exc:
                    self._stats.rejected += 1
                    self._stats.last_error = str(exc)
                else:
                    self._stats.injected += 1
            # A pane opened, closed or moved: the markers of the windows it left and entered.
            moved = self._windows.place({row.pane: row.window for row in rows if row.window})
            if moved and self._badges_on:
                self._dirty_windows |= moved
                await self._flush(client)
            reap = bool(self._table.take_unreaped())

    # -- lent to other sinks -----------------------------------------------------------------

    async def run_batch(self, commands: Sequence[str]) -> list[Reply]:
        """Run ``commands`` over the current control-mode connection (one write) and return
        their replies; for the notification sink, which must not open a client of its own.

        :raises TmuxConnectionLost: not connected now, or the connection ended meanwhile.
        """
        client = self._client
        if client is None:
            raise TmuxConnectionLost("not connected to tmux")
        self._stats.lent_batches += 1
        return await client.run_batch(commands)

    # -- introspection -----------------------------------------------------------------------

    async def wait_badge_batch(self) -> float:
        """Wait until the next badge batch has been answered by tmux; return the
        ``time.perf_counter()`` of that moment (for benchmarks and tests: an event, so the
        waiter costs nothing per scheduler round, and the time excludes waking the waiter)."""
        await self._batch_answered.wait()
        return self._answered_at

    def statistics(self) -> TmuxStatistics:
        """A point-in-time copy of the counters (see :class:`TmuxStatistics`)."""
        clients = list(self._old_client_stats)
        if self._client is not None:
            clients.append(self._client.statistics())
        return msgspec.structs.replace(
            self._stats,
            connected=self._client is not None and self._stats.state == "connected",
            batches=sum(c.batches for c in clients),
            commands=sum(c.commands for c in clients),
            notifications=sum(c.notifications for c in clients),
            badges=self._book.statistics(),
            panes=self._table.statistics(),
            output=None if self._output is None else self._output.statistics(),
        )


def _holder_alive(holder: Holder) -> bool:
    """Worker thread: whether the hold's process still runs (the same incarnation)."""
    return procfs.probe(holder.pid) == holder.token


def tmux_config_snippet(paneward: str | None = None) -> str:
    """The ``~/.tmux.conf`` lines ``paneward tmux-config`` prints (``paneward``: the command
    the key bindings run; default ``paneward`` from ``$PATH``).

    See README.md, Reference > tmux.
    """
    attention = "#{@paneward_attention}"
    alert = f"#{{||:#{{==:{attention},needs_input}},#{{==:{attention},failed}}}}"
    badge = (
        "#{?@paneward_badge,"
        f"#{{?{alert},#[reverse bold],#[bold]}}#{{@paneward_badge}}#[default] ,}}"
    )
    badge_age = (
        "#{?@paneward_badge,"
        f"#{{?{alert},#[reverse bold],#[bold]}}#{{@paneward_badge}}"
        "#{?@paneward_age, #{@paneward_age},}#[default] ,}"
    )
    # An agent's pane is named by its harness (its program is node or python).
    pane_label = "#{pane_index}: #{?@paneward_harness,#{@paneward_harness},#{pane_current_command}}"
    # tmux's default window-status-format, after the glyph of the window's most urgent badge.
    window_status = (
        "#{?@paneward_window,#{=1:@paneward_window} ,}#I:#W#{?window_flags,#{window_flags}, }"
    )
    # The program's path is read by tmux's config parser (quote_exact) and expanded as a
    # format once, by run-shell, when the key is pressed (format_literal); #{client_name} is
    # meant to be expanded then.
    program = format_literal(paneward or "paneward")
    # `|| true`: the command tells the client itself what went wrong (display-message); tmux
    # would otherwise also open a "returned 1" view over the pane.
    next_cmd = f"{program} next -q --client '#{{client_name}}' || true"
    pick_cmd = f"{program} pick -q --client '#{{client_name}}' || true"
    return "\n".join(
        [
            "# paneward: agent badges per pane (run `paneward run --tmux` to maintain them).",
            "# Options paneward sets on every pane that shows an agent session:",
            "#   @paneward_badge      e.g. '● working', '▲ needs you', '✔ done'",
            "#   @paneward_presence   persisted | running | shutting_down",
            "#   @paneward_turn       unknown | idle | working | needs_input",
            "#   @paneward_attention  needs_input | failed | turn_done | (empty)",
            "#   @paneward_harness    the harness id: claude-code, codex, ... or terminal",
            "#   @paneward_reason     why attention is open, e.g. 'permission: Bash' (redacted)",
            "#   @paneward_age        how long it has been open: <1m, 2m, 3h (once a minute)",
            "# and globally @paneward_summary, e.g. '2 need you · 3 working' (empty: nothing),",
            "# and on each window with an agent @paneward_window, the most urgent badge of its",
            "# panes (needs you > failed > done > working > unknown > idle > exited).",
            "# A pane without an agent has none of them, so its border shows no badge.",
            "# When the daemon is gone, tmux itself sets the summary to 'paneward: down' and",
            "# appends ' (stale)' to each badge and window marker, until paneward runs again.",
            "set -g pane-border-status top",
            f'set -g pane-border-format " {badge}{pane_label} "',
            "# For durations on the badge ('▲ needs you 2m'), use instead:",
            f'# set -g pane-border-format " {badge_age}{pane_label} "',
            'set -g status-right "#{?@paneward_summary,#{@paneward_summary} | ,}%H:%M "',
            "set -g status-right-length 80",
            "# The window list shows where: the glyph of each window's most urgent badge.",
            f'set -g window-status-format "{window_status}"',
            f'set -g window-status-current-format "{window_status}"',
            "# tmux tells a pane's program when you move to or away from it only with focus",
            "# events on: Claude Code asks for them, and agents that notify only while you look",
            "# elsewhere (Codex) need them. (paneward learns focus from tmux itself.)",
            "set -g focus-events on",
            "# prefix a: jump to the agent that needs you (oldest needs_input first, then failed,",
            "# then done); prefix A: choose from all of them in a menu.",
            f"bind-key a run-shell -b {quote_exact(next_cmd)}",
            f"bind-key A run-shell -b {quote_exact(pick_cmd)}",
            "# OSC 9 notifications to your terminal (iTerm2, WezTerm, kitty, Ghostty, ...) pass",
            "# through tmux only with passthrough on (it lets any program in a pane do so):",
            "# set -g allow-passthrough on",
            "",
        ]
    )
