"""The notification sink: tell the user when an agent needs them and they are looking elsewhere.

Who sends and handles what:

- :class:`Notifier` is one actor. It holds a ``latest`` subscription of the supervisor's
  broadcast hub and feeds every item to :class:`~actors.core.views.notify.NotifyBook`, which decides
  which attention items opened (kind, per-session rate limit, redaction: all pure, in
  :mod:`actors.core.views.notify`). It never re-decides an :class:`~messages.Activity`.
- For each alert it asks tmux, over the bridge's one control-mode client
  (:meth:`actors.sinks.tmux.TmuxBridge.run_batch`), which pane every attached client shows;
  when one shows the alert's pane the user is looking at it and nothing is sent. Otherwise
  it sends to every channel asked for: ``display-message`` on every attached client (one
  control-mode write), an OSC 9 / OSC 777 notification written to the tty of the pane each
  client shows (tmux passes it to the outer terminal when ``allow-passthrough`` is on), and a
  desktop notification through :class:`DesktopNotifications` (the ``desktop-notifier``
  library: the freedesktop notification service over D-Bus with ``dbus-fast`` on Linux,
  Notification Center on macOS). Before each desktop notification the server's
  capabilities are asked (``GetCapabilities``, on a D-Bus connection of its own): the body
  is escaped where the server reads markup (:func:`~actors.core.views.notify.desktop_body`).
- Deciding runs in its own task, oldest alert first: a slow tmux or D-Bus never blocks the
  subscription. At most one alert per session waits to be decided: a newer edge of the same
  session takes its place (``superseded``: the older one's attention item is no longer the
  open one, so it would not be sent anyway). What waits is bounded by the sessions, so a
  burst (every agent failing at once) loses none.
- Each delivery channel has a task and a queue of its own (:class:`_Channel`): ``tmux``
  (the OSC writes, then the status-line message: one channel, because tmux drops passthrough
  while a message shows, so their order matters) and ``desktop``. A decided alert is handed to
  each channel it goes to, and a channel that hangs (a session bus that accepts calls and
  never answers) delays only its own alerts: every send has a deadline, and a channel that
  keeps timing out is paused with backoff (:class:`~actors.core.views.notify.ChannelHealth`; while
  paused its alerts are skipped, counted, and the pause shows in ``paneward status``). A
  channel's queue holds one alert per session (the newest) and at most :data:`CHANNEL_LIMIT`,
  the oldest dropped first, counted (``channels.<name>.dropped``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Final, Literal, Protocol

import anyio
import msgspec

from actors.core.clock import now_ms
from actors.core.tmux.protocol import Reply, TmuxError
from actors.core.views.notify import (
    LIST_CLIENTS_COMMAND,
    Alert,
    ChannelHealth,
    ChannelStatistics,
    Client,
    NotifyBook,
    NotifySettings,
    NotifyStatistics,
    desktop_body,
    display_commands,
    location_command,
    message_text,
    osc_notification,
    parse_clients,
    watched,
)
from actors.runtime.hub import ready_now
from actors.runtime.mailbox import ActorHost
from messages import SessionKey

__all__ = ["DesktopNotifications", "Notifier", "TmuxChannel"]

logger = logging.getLogger("paneward.notify")

#: Each send (a tmux batch, a D-Bus call, a tty write) gets this long.
SEND_TIMEOUT_S: Final = 5.0
#: Alerts one channel holds at most (one per session: the supervisor's live-session cap, so a
#: burst of every session fits).
CHANNEL_LIMIT: Final = 4096
#: The longest our own status-line message is waited out before an OSC write.
MESSAGE_WAIT_MAX_S: Final = 5.0
DISPLAY_TIME_COMMAND: Final = "show-options -gv display-time"


class TmuxChannel(Protocol):
    """What the notifier needs of tmux: :meth:`actors.sinks.tmux.TmuxBridge.run_batch`."""

    async def run_batch(self, commands: Sequence[str]) -> list[Reply]: ...


class DesktopBackend(Protocol):
    """Sends one desktop notification; ``True`` when the service took it."""

    async def send(self, title: str, body: str) -> bool: ...


class DesktopNotifications:
    """Desktop notifications through ``desktop-notifier`` (never a hand-written D-Bus client).

    On Linux it needs a session bus: :meth:`available` is false without one (then the channel
    is skipped, counted). The library connects lazily, on the running asyncio loop, at the
    first send, and reconnects after a failure. The library does not say whether the server
    reads bodies as markup (``body-markup``), so :meth:`send` asks ``GetCapabilities`` itself,
    with ``dbus-fast`` (the library's own D-Bus client), before every notification: a desktop
    can replace its notification server at any time.
    """

    def __init__(self, app_name: str = "paneward") -> None:
        from desktop_notifier import DesktopNotifier

        # The library logs every failed send with a traceback; the sink counts them instead.
        logging.getLogger("desktop_notifier").setLevel(logging.CRITICAL)
        self._notifier = DesktopNotifier(app_name=app_name, app_icon=None)
        self._bus: Any = None  # dbus_fast.aio.MessageBus for GetCapabilities, made at first use

    @staticmethod
    def available(environ: dict[str, str] | None = None) -> bool:
        """A session bus to talk to (Linux), else whatever the platform offers.

        With no ``DBUS_SESSION_BUS_ADDRESS`` but the user's bus socket in
        ``$XDG_RUNTIME_DIR/bus`` (a daemon started outside the desktop session), the address
        is set to that socket for the library.
        """
        env = os.environ if environ is None else environ
        if not sys.platform.startswith("linux"):
            return True
        if env.get("DBUS_SESSION_BUS_ADDRESS"):
            return True
        runtime = env.get("XDG_RUNTIME_DIR")
        if runtime and os.path.exists(os.path.join(runtime, "bus")):
            env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={os.path.join(runtime, 'bus')}"
            return True
        return False

    async def capabilities(self) -> list[str] | None:
        """The notification server's ``GetCapabilities`` (``[]`` off Linux: Notification
        Center reads no markup; ``None`` when the server answers with an error).

        :raises OSError: (or a ``dbus-fast`` error) when the session bus cannot be reached.
        """
        if not sys.platform.startswith("linux"):
            return []
        from dbus_fast import Message, MessageType
        from dbus_fast.aio import MessageBus

        if self._bus is None or not self._bus.connected:
            self._bus = await MessageBus().connect()
        reply = await self._bus.call(Message(
            destination="org.freedesktop.Notifications",
            path="/org/freedesktop/Notifications",
            interface="org.freedesktop.Notifications",
            member="GetCapabilities",
        ))
        if reply.message_type != MessageType.METHOD_RETURN or reply.signature != "as":
            return None
        return [str(word) for word in reply.body[0]]

    async def send(self, title: str, body: str) -> bool:
        from desktop_notifier import Notification

        dispatched: list[bool] = []
        notification = Notification(
            title,
            desktop_body(body, await self.capabilities()),
            on_dispatched=lambda: dispatched.append(True),
        )
        # The library never raises for a failed send (it logs): dispatch is the proof.
        await self._notifier.send_notification(notification)
        return bool(dispatched)


class _Handoff:
    """One decided alert on its way through the channels it was handed to: handled (for
    :meth:`Notifier.wait_handled`) once every one of them is done with it."""

    __slots__ = ("alert", "done_with", "left")

    def __init__(self, alert: Alert, left: int, done_with: Callable[[], None]) -> None:
        self.alert = alert
        self.left = left
        self.done_with = done_with

    def done(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.done_with()


#: What a channel's send says: it worked, it failed at once (answered), or it timed out.
_Outcome = Literal["ok", "failed", "timeout"]


class _Channel:
    """One delivery channel: its own task (:meth:`run`), its alerts in order of arrival (one
    per session, the newest; at most :data:`CHANNEL_LIMIT`) and its health. Alerts are put by
    the notifier's deciding task (:meth:`put`); each is sent by ``send`` unless the channel is
    paused at that moment (skipped) or the alert's item closed meanwhile."""

    def __init__(
        self,
        send: Callable[[Alert, Any], Awaitable[_Outcome]],
        still_open: Callable[[Alert], bool],
    ) -> None:
        self.health = ChannelHealth()
        self._send = send
        self._still_open = still_open
        self._waiting: dict[SessionKey, tuple[_Handoff, Any]] = {}
        self._arrived: anyio.Event | None = None
        self.ended = False

    def put(self, handoff: _Handoff, work: Any) -> None:
        """Queue ``handoff`` with what ``send`` needs for it (``work``): never blocks."""
        stats = self.health.stats
        if self.health.paused(anyio.current_time()):
            stats.skipped += 1
            handoff.done()
            return
        key = handoff.alert.key
        replaced = self._waiting.pop(key, None)
        if replaced is not None:
            stats.superseded += 1
            replaced[0].done()
        elif len(self._waiting) >= CHANNEL_LIMIT:
            stats.dropped += 1
            self._waiting.pop(next(iter(self._waiting)))[0].done()
        self._waiting[key] = (handoff, work)
        self.wake()

    def wake(self) -> None:
        if self._arrived is not None:
            self._arrived.set()
            self._arrived = None

    async def run(self) -> None:
        """Send what is queued, oldest first, until :attr:`ended` is set and none waits."""
        while True:
            if not self._waiting:
                if self.ended:
                    return
                self._arrived = anyio.Event()
                await self._arrived.wait()
                continue
            handoff, work = self._waiting.pop(next(iter(self._waiting)))
            try:
                await self._deliver(handoff.alert, work)
            finally:
                handoff.done()

    async def _deliver(self, alert: Alert, work: Any) -> None:
        health = self.health
        if health.paused(anyio.current_time()):
            health.stats.skipped += 1
            return
        if not self._still_open(alert):
            health.stats.closed += 1  # answered while it waited for this channel
            return
        outcome = await self._send(alert, work)
        if outcome == "timeout":
            health.timed_out(anyio.current_time())
        else:
            health.answered(outcome == "ok")

    def statistics(self) -> ChannelStatistics:
        stats = self.health.statistics(anyio.current_time())
        stats.waiting = len(self._waiting)
        return stats


class Notifier:
    """The notification actor. ``tmux``: the bridge (``None``: no tmux, so no focus knowledge,
    no tmux messages, no OSC); ``desktop``: the desktop backend (``None``: off);
    ``send_timeout_s``: the deadline of each send."""

    def __init__(
        self,
        settings: NotifySettings,
        *,
        tmux: TmuxChannel | None = None,
        desktop: DesktopBackend | None = None,
        clock: Callable[[], int] = now_ms,
        send_timeout_s: float = SEND_TIMEOUT_S,
    ) -> None:
        self._settings = settings
        self._tmux = tmux
        self._desktop = desktop
        self._clock = clock
        self._send_timeout_s = send_timeout_s
        self._book = NotifyBook(settings)
        self._stats: NotifyStatistics = self._book.stats
        self._handled: anyio.Event | None = None
        self._handled_count = 0
        # Alerts waiting to be decided, at most one per session, oldest first (see the module).
        self._waiting: dict[SessionKey, Alert] = {}
        self._arrived: anyio.Event | None = None  # made by the deciding task when none wait
        self._ended = False
        # client name -> until when (anyio clock) our last display-message shows on it
        self._message_until: dict[str, float] = {}
        still_open = self._book.still_open
        self._channels: dict[str, _Channel] = {}
        if tmux is not None:
            self._channels["tmux"] = _Channel(self._send_terminal, still_open)
        if desktop is not None:
            self._channels["desktop"] = _Channel(self._send_desktop, still_open)

    async def run(self, host: ActorHost) -> None:
        """Run under the supervisor (``Supervisor.start_actor``)."""
        async with host.subscribe(mode="latest", snapshot=True) as items:
            await self.serve(items)

    async def serve(self, items: AsyncIterator[Any]) -> None:
        """Run until ``items`` ends (then what waits is delivered) or cancelled."""
        self._ended = False
        async with anyio.create_task_group() as tg:
            for channel in self._channels.values():
                channel.ended = False
                tg.start_soon(channel.run)
            tg.start_soon(self._decide_all)
            try:
                async for item in items:
                    self._take(item)
                    for ready in ready_now(items):  # the rest of the burst: one wake-up
                        self._take(ready)
            finally:
                self._ended = True
                self._wake_decider()

    def _take(self, item: object) -> None:
        for alert in self._book.opened(item):
            if self._book.rate_limited(alert, self._clock()):
                # Told about just now: not queued (under load, most edges are).
                self._mark_handled()
                continue
            if alert.key in self._waiting:
                self._stats.superseded += 1
                self._mark_handled()  # the one it replaces
            self._waiting[alert.key] = alert  # an existing key keeps its place in line
            self._wake_decider()

    def _wake_decider(self) -> None:
        if self._arrived is not None:
            self._arrived.set()
            self._arrived = None

    async def _decide_all(self) -> None:
        try:
            while True:
                if not self._waiting:
                    if self._ended:
                        return
                    self._arrived = anyio.Event()
                    await self._arrived.wait()
                    continue
                alert = self._waiting.pop(next(iter(self._waiting)))
                handed = False
                try:
                    handed = await self._decide(alert)
                finally:
                    if not handed:
                        self._mark_handled()
        finally:
            for channel in self._channels.values():  # they finish what they hold, then end
                channel.ended = True
                channel.wake()

    def _mark_handled(self) -> None:
        self._handled_count += 1
        if self._handled is not None:  # made by a waiter only: none is made per alert
            self._handled.set()
            self._handled = None

    async def _tmux_batch(self, commands: list[str]) -> tuple[list[Reply] | None, _Outcome]:
        if self._tmux is None or not commands:
            return None, "failed"
        try:
            with anyio.fail_after(self._send_timeout_s):
                return await self._tmux.run_batch(commands), "ok"
        except TimeoutError:
            self._stats.tmux_errors += 1
            self._stats.last_error = "tmux: timed out"
            return None, "timeout"
        except TmuxError as exc:
            self._stats.tmux_errors += 1
            self._stats.last_error = f"tmux: {exc}"
            return None, "failed"

    async def _decide(self, alert: Alert) -> bool:
        """Ask tmux where the user looks, decide, and hand ``alert`` to its channels; whether
        it was handed to any (then they mark it handled)."""
        if self._book.rate_limited(alert, self._clock()):
            return False  # this session was told about just now: not even a question to tmux
        clients: list[Client] = []
        location: str | None = None
        display_s = 0.0
        terminal = self._channels.get("tmux")
        # A paused tmux is not asked (it would cost every channel the deadline): no focus known.
        if terminal is not None and not terminal.health.paused(anyio.current_time()):
            query = [LIST_CLIENTS_COMMAND, DISPLAY_TIME_COMMAND]
            if alert.pane is not None:
                query.append(location_command(alert.pane))
            replies, outcome = await self._tmux_batch(query)
            if outcome == "timeout":
                terminal.health.timed_out(anyio.current_time())
            if replies is not None:
                if replies[0].ok:
                    clients = parse_clients(replies[0].lines)
                if replies[1].ok and replies[1].lines and replies[1].lines[0].isdigit():
                    display_s = int(replies[1].lines[0]) / 1000
                if len(replies) > 2 and replies[2].ok and replies[2].lines:
                    location = replies[2].lines[0]
        if watched(alert.pane, clients):
            self._stats.watched += 1
            return False
        if not self._book.still_open(alert):
            self._stats.closed += 1  # answered (or moved on) while it waited: nothing to tell
            return False
        if not self._book.admit(alert, self._clock()):
            return False
        channels = self._settings.channels
        users = [c for c in clients if not c.control]
        body = alert.body(location)
        work: list[tuple[_Channel, Any]] = []
        if terminal is not None and users and {"tmux", "osc9", "osc777"} & set(channels):
            work.append((terminal, (users, location, body, display_s)))
        desktop = self._channels.get("desktop")
        if desktop is not None and "desktop" in channels:
            work.append((desktop, body))
        if not work:
            return False
        handoff = _Handoff(alert, len(work), self._mark_handled)
        for channel, what in work:
            channel.put(handoff, what)
        return True

    async def _send_terminal(self, alert: Alert, work: Any) -> _Outcome:
        """The ``tmux`` channel: the OSC notifications, then the status-line messages."""
        users, location, body, display_s = work
        channels = self._settings.channels
        outcomes: list[_Outcome] = []
        # OSC before display-message: while a client shows a status-line message tmux
        # freezes its terminal and drops passthrough (tmux 3.3); a message of ours still up
        # from the previous alert is waited out (once, bounded).
        for channel in ("osc9", "osc777"):
            if channel in channels:
                data = osc_notification(channel, alert.title, body)
                for client in users:
                    if client.pane_tty:
                        await self._wait_message_gone(client.name)
                        outcomes.append(await self._write_tty(client.pane_tty, data))
        if "tmux" in channels:
            text = message_text(alert, location)
            answered, outcome = await self._tmux_batch(display_commands(text, users))
            outcomes.append(outcome)
            if answered is not None:
                self._stats.tmux_messages += sum(1 for r in answered if r.ok)
                shown_until = anyio.current_time() + display_s
                for client, reply in zip(users, answered, strict=False):
                    if reply.ok:
                        self._message_until[client.name] = shown_until
        if "timeout" in outcomes:
            return "timeout"
        return "failed" if "failed" in outcomes else "ok"

    async def _wait_message_gone(self, client: str) -> None:
        until = self._message_until.pop(client, None)
        if until is None:
            return
        left = until - anyio.current_time()
        # display-time 0 keeps a message until a key is pressed: not worth waiting for.
        if 0 < left <= MESSAGE_WAIT_MAX_S:
            self._stats.osc_deferred += 1
            await anyio.sleep(left + 0.05)

    async def _write_tty(self, tty: str, data: bytes) -> _Outcome:
        try:
            with anyio.fail_after(self._send_timeout_s):
                await anyio.to_thread.run_sync(_write_tty, tty, data, abandon_on_cancel=True)
        except TimeoutError:
            self._stats.osc_failures += 1
            self._stats.last_error = f"osc: {tty}: timed out"
            return "timeout"
        except OSError as exc:
            self._stats.osc_failures += 1
            self._stats.last_error = f"osc: {tty}: {exc}"
            return "failed"
        self._stats.osc_writes += 1
        return "ok"

    async def _send_desktop(self, alert: Alert, body: Any) -> _Outcome:
        """The ``desktop`` channel."""
        assert self._desktop is not None
        ok = False
        outcome: _Outcome = "failed"
        try:
            with anyio.fail_after(self._send_timeout_s):
                ok = await self._desktop.send(alert.title, body)
        except TimeoutError:
            self._stats.last_error = "desktop: timed out"
            outcome = "timeout"
        except Exception as exc:  # a broken bus or library must never stop the sink
            self._stats.last_error = f"desktop: {exc!r}"
        if ok:
            self._stats.desktop_sent += 1
            return "ok"
        self._stats.desktop_failures += 1
        return outcome

    async def wait_handled(self, count: int) -> None:
        """Until ``count`` alerts were handled in total (sent on every channel it went to,
        skipped, rate limited or superseded)."""
        while self._handled_count < count:
            if self._handled is None:
                self._handled = anyio.Event()
            await self._handled.wait()

    def statistics(self) -> NotifyStatistics:
        """A point-in-time copy of the counters, each channel's included."""
        return msgspec.structs.replace(
            self._stats,
            channels={name: c.statistics() for name, c in self._channels.items()},
        )


def _write_tty(tty: str, data: bytes) -> None:
    """Worker thread: write ``data`` to a pane's tty (non-blocking, never our controlling
    terminal, never through a symlink)."""
    if not tty.startswith("/dev/"):
        raise OSError(f"not a terminal device: {tty!r}")
    fd = os.open(tty, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_NOFOLLOW)
    try:
        if os.write(fd, data) != len(data):
            raise OSError("short write")  # a full tty buffer: the sequence would be cut
    finally:
        os.close(fd)
