"""Desktop notifications on a real session bus: a ``dbus-daemon --session`` the test starts and
a notification server the test provides on it (tests/support/dbus.py); paneward sends through
desktop-notifier (dbus-fast), in process and from the daemon. The sink under load (rate limit
before queueing, one waiting alert per session) is tested with :class:`HeldDesktop`, a
stand-in backend that can hold a send open, which the real service does not do on demand."""

from __future__ import annotations

import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectSendStream

import messages
from actors.core.views.notify import (
    PAUSE_AFTER_TIMEOUTS,
    PAUSE_FIRST_S,
    PAUSE_MAX_S,
    Alert,
    ChannelHealth,
    Client,
    NotifySettings,
    display_commands,
    message_text,
    osc_notification,
)
from actors.sinks.notify import DesktopNotifications, Notifier
from actors.sinks.tmux import TmuxBridge
from messages import Activity, Attention, Evidence, SessionKey, Snapshot, Transition
from tests.support.daemon import PANEWARD, DaemonProcess, daemon_env, poll_until, raw_send
from tests.support.dbus import notification_server, session_bus, silent_notification_server
from tests.support.sessions import C1_COMMAND, blocked, spawned
from tests.support.tmux import TmuxServer, attached_client, eventually

NOW = time.time_ns() // 1_000_000


REASON = "approve Bash: curl -s https://x.test/?t=1"


def needs(sid: str, since: int, reason: str = REASON) -> Activity:
    return Activity(
        key=SessionKey("claude-code", sid), presence="running", turn="needs_input",
        evidence=Evidence(source="claude_hook", at_ms=since),
        attention=Attention("needs_input", reason, since), pane="%3",
    )


def test_c1_controls_never_reach_the_outer_terminal() -> None:
    """A one-word command ``x ST OSC 52;c;… ST`` (C1 U+009C, U+009D) survives redaction; the
    OSC 9 / 777 notification (passed to the outer terminal byte for byte) and the tmux
    status-line message carry it escaped, so it cannot end the notification and write the
    clipboard."""

    client = Client(False, "/dev/pts/5", "%1", "/dev/pts/7")
    for full_text in (False, True):
        alert = Alert(SessionKey("claude-code", "s"), "%3", "needs_input",
                      f"approve Bash: {C1_COMMAND}", NOW, full_text)
        sent = [osc_notification(channel, alert.title, alert.body("m\x9d:1.0"))
                for channel in ("osc9", "osc777")]
        sent += [c.encode() for c in display_commands(message_text(alert, "m\x9d:1.0"), [client])]
        for data in sent:
            # tmux reads the display-message command's quoted word with \\ as one backslash
            text = data.decode().replace("\\\\", "\\")
            assert not any("\x80" <= c <= "\x9f" for c in text), text
            assert "\\x9c\\x9d52;c;" in text and "m\\x9d:1.0" in text


async def test_desktop_notifications_through_a_real_session_bus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with anyio.fail_after(30):
        async with session_bus(tmp_path) as address, notification_server(address) as server:
            monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
            assert DesktopNotifications.available()
            for full_text, body in ((False, "approve Bash: curl … · %3"),
                                    (True, "approve Bash: curl -s https://x.test/?t=1 · %3")):
                before = len(server.received)
                notifier = Notifier(
                    NotifySettings(channels=("desktop",), full_text=full_text,
                                   min_interval_ms=60_000),
                    desktop=DesktopNotifications(),
                )
                send, receive = anyio.create_memory_object_stream[object](10)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(notifier.serve, receive)
                    # The snapshot's open item is not news; the live edge is.
                    send.send_nowait(Snapshot(seq=1, activities=(needs("old", NOW),)))
                    first = needs("s", NOW + 1)
                    send.send_nowait(Transition(seq=2, key=first.key, after=first, cause="t"))
                    await server.wait_for(before + 1)
                    # Asked again within the session's window: not told again.
                    again = needs("s", NOW + 2)
                    send.send_nowait(Transition(seq=3, key=again.key, after=again, cause="t"))
                    await notifier.wait_handled(2)
                    send.close()
                receive.close()
                stats = notifier.statistics()
                assert (stats.desktop_sent, stats.rate_limited, stats.desktop_failures) == (1, 1, 0)
                [got] = server.received[before:]
                assert (got.app_name, got.summary, got.body) == (
                    "paneward", "claude-code needs you", body,
                )


@pytest.mark.parametrize("markup", [True, False], ids=["body-markup", "plain"])
async def test_desktop_bodies_are_never_markup(
    markup: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that advertises ``body-markup`` reads the body as markup: an agent's one-word
    command ``<b><u>…`` (it survives redaction) and, with full text, a link are sent with
    ``&``, ``<``, ``>`` escaped, so they show as written; a server without it gets the text
    as it is."""
    capabilities = ("body", "body-markup") if markup else ("body",)
    reasons = {False: "approve Bash: <b><u>PWNED&amp;", True: 'see <a href="https://x.test/">it</a>'}
    with anyio.fail_after(30):
        async with session_bus(tmp_path) as address, \
                notification_server(address, capabilities) as server:
            monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
            for full_text, reason in reasons.items():
                before = len(server.received)
                notifier = Notifier(
                    NotifySettings(channels=("desktop",), full_text=full_text),
                    desktop=DesktopNotifications(),
                )
                send, receive = anyio.create_memory_object_stream[object](10)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(notifier.serve, receive)
                    send.send_nowait(Snapshot(seq=1, activities=()))
                    item = needs("s", NOW, reason=reason)
                    send.send_nowait(Transition(seq=2, key=item.key, after=item, cause="t"))
                    await server.wait_for(before + 1)
                    send.close()
                receive.close()
                [got] = server.received[before:]
                shown = f"{reason} · %3"
                if markup:
                    shown = shown.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                assert got.body == shown


def test_no_session_bus_no_desktop_channel() -> None:
    assert not DesktopNotifications.available({"HOME": "/nonexistent"})
    env = {"XDG_RUNTIME_DIR": "/nonexistent-runtime"}
    assert not DesktopNotifications.available(env)


async def test_the_daemon_notifies_the_desktop(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with session_bus(tmp_path) as address, notification_server(address) as server:
            state = tmp_path / "state"
            env = daemon_env(state, DBUS_SESSION_BUS_ADDRESS=address)
            daemon = DaemonProcess(state, env=env, extra_args=["--notify-via", "desktop"])
            async with daemon:
                for message in (spawned("s1"), blocked("s1", "approve Bash: rm -rf /srv/data")):
                    await anyio.run_process(
                        [os.fspath(PANEWARD), "inject", messages.encode(message).decode()],
                        env=env,
                    )
                await server.wait_for(1)

                async def counted() -> bool:
                    return int((await daemon.counters())["notify"]["desktop_sent"]) == 1

                await poll_until(counted, "the daemon's desktop counter")
    [got] = server.received
    # the wrapper's "approve Bash: …" record is the one permission reason (hints.permission_reason)
    assert (got.summary, got.body) == ("terminal needs you", "permission: Bash: rm …")


class HeldDesktop:
    """A desktop backend whose first send is held open until the test releases it. It stands in
    for the notification service (which answers at once) so that a send can be seen in flight."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.sent: list[tuple[str, str]] = []

    async def send(self, title: str, body: str) -> bool:
        self.started.set()
        await self.release.wait()
        self.sent.append((title, body))
        return True


class HeldSink:
    """A notifier serving a memory stream, its :class:`HeldDesktop`, and a :meth:`push` that
    publishes the next transition. Made by :func:`held_sink`."""

    def __init__(
        self, notifier: Notifier, desktop: HeldDesktop, send: MemoryObjectSendStream[object]
    ) -> None:
        self.notifier = notifier
        self.desktop = desktop
        self._send = send
        self._seq = 1

    def push(self, activity: Activity) -> None:
        self._seq += 1
        self._send.send_nowait(
            Transition(seq=self._seq, key=activity.key, after=activity, cause="t")
        )


@asynccontextmanager
async def held_sink(first: str, room: int) -> AsyncIterator[HeldSink]:
    """A desktop-only notifier (60 s window) whose first alert, for session ``first``, is
    being sent and held there when this yields; ``room`` items fit in its stream. On exit the
    stream ends and the notifier delivers what still waits."""
    desktop = HeldDesktop()
    notifier = Notifier(
        NotifySettings(channels=("desktop",), min_interval_ms=60_000), desktop=desktop
    )
    send, receive = anyio.create_memory_object_stream[object](room)
    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(notifier.serve, receive)
            send.send_nowait(Snapshot(seq=1, activities=()))
            sink = HeldSink(notifier, desktop, send)
            sink.push(needs(first, NOW))
            await desktop.started.wait()  # admitted: that session's window runs from now
            yield sink
            send.close()


async def test_edges_of_a_session_told_about_just_now_are_not_queued() -> None:
    """While the first alert of a session is being sent, that session's next edges are rate
    limited as they open: counted, and never queued for delivery."""
    edges = 128
    with anyio.fail_after(10):
        async with held_sink("s", 2 * edges) as sink:
            for i in range(edges):
                sink.push(needs("s", NOW + 2 + i))
            await sink.notifier.wait_handled(edges)  # while the first is still being sent
            assert sink.desktop.sent == []
            sink.desktop.release.set()
            await sink.notifier.wait_handled(1 + edges)
    stats = sink.notifier.statistics()
    assert (stats.opened, stats.rate_limited, stats.superseded) == (1 + edges, edges, 0)
    assert (stats.alerts, stats.desktop_sent) == (1, 1)
    assert sink.desktop.sent == [("claude-code needs you", "approve Bash: curl … · %3")]


async def test_a_burst_of_sessions_is_told_about_in_full() -> None:
    """Every agent failing at once (an API outage): while one send is held, 200 sessions open
    an edge each and one of them a second, newer one. None is lost: every session is told
    about once, oldest first, and the session with two edges about its newer one only (the
    older is no longer the open item)."""
    sessions = 200
    with anyio.fail_after(20):
        async with held_sink("held", 2 * sessions) as sink:
            for n in range(sessions):
                sink.push(needs(f"s{n:03d}", NOW + n, reason=f"approve Bash: cmd{n:03d}"))
            sink.push(needs("s007", NOW + 1000, reason="approve Bash: newer"))
            await sink.notifier.wait_handled(1)  # the superseded one
            sink.desktop.release.set()
            await sink.notifier.wait_handled(2 + sessions)
    stats = sink.notifier.statistics()
    assert (stats.opened, stats.superseded, stats.rate_limited) == (2 + sessions, 1, 0)
    assert (stats.alerts, stats.desktop_sent) == (1 + sessions, 1 + sessions)
    bodies = [body for _, body in sink.desktop.sent]
    want = [f"approve Bash: cmd{n:03d} · %3" for n in range(sessions)]
    want[7] = "approve Bash: newer · %3"
    assert bodies == ["approve Bash: curl … · %3", *want]


async def test_an_item_that_closes_while_its_alert_waits_is_not_told_about() -> None:
    """Session b's alert waits behind a held send; b's attention closes meanwhile (the user
    answered in that pane): b is not told about, and that is counted as ``closed``."""
    with anyio.fail_after(10):
        async with held_sink("a", 8) as sink:
            waiting = needs("b", NOW + 1)
            sink.push(waiting)
            sink.push(Activity(
                key=waiting.key, presence="running", turn="working",
                evidence=Evidence(source="claude_hook", at_ms=NOW + 2), pane="%3",
            ))
            await anyio.wait_all_tasks_blocked()  # both taken from the stream
            sink.desktop.release.set()
            await sink.notifier.wait_handled(2)
    stats = sink.notifier.statistics()
    assert (stats.opened, stats.closed, stats.alerts, stats.desktop_sent) == (2, 1, 1, 1)
    assert [body for _, body in sink.desktop.sent] == ["approve Bash: curl … · %3"]


# ------------------------------------------------------------------------- independent channels


async def test_a_hung_desktop_never_delays_the_tmux_channel(
    server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session bus's notification server takes calls and never answers (a real
    ``dbus-daemon``, tests/support/dbus.py's silent server); 20 agents need the user at once.
    Every one of them is told on the tmux channel -- the status-line message and the OSC 9
    tmux passes to the user's real attached terminal -- while the first desktop send is still
    hanging: the desktop channel waits alone. (The deadline is longer than the test, so no
    timeout can let the tmux channel through: only the channels' independence can.)"""
    agents = 20
    with anyio.fail_after(60):
        async with session_bus(tmp_path) as address, \
                silent_notification_server(address) as bus_server:
            monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
            await server.arun("set-option", "-g", "allow-passthrough", "on")
            await server.arun("set-option", "-g", "display-time", "1")
            bridge = TmuxBridge(socket_name=server.name, badges=False, panes=False)
            notifier = Notifier(
                NotifySettings(channels=("tmux", "osc9", "desktop"), min_interval_ms=0),
                tmux=bridge, desktop=DesktopNotifications(), send_timeout_s=600,
            )
            send, receive = anyio.create_memory_object_stream[object](2 * agents)
            async with attached_client(server, "main") as user, \
                    anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, None, None)

                async def connected() -> bool:
                    return bridge.statistics().connected

                await eventually(connected)
                tg.start_soon(notifier.serve, receive)
                send.send_nowait(Snapshot(seq=1, activities=()))
                for n in range(agents):
                    item = needs(f"s{n:02d}", NOW + n, reason=f"approve Bash: cmd{n:02d}")
                    item = msgspec.structs.replace(item, pane=None)
                    send.send_nowait(Transition(seq=2 + n, key=item.key, after=item, cause="t"))
                osc = [f"\x1b]9;claude-code needs you: approve Bash: cmd{n:02d}\x07".encode()
                       for n in range(agents)]
                await user.wait_output(lambda out: all(o in out for o in osc), "20 OSC 9")

                async def all_messages() -> bool:
                    return notifier.statistics().tmux_messages == agents

                await eventually(all_messages)
                stats = notifier.statistics()
                # The desktop channel is still on its first send, which the server holds.
                assert bus_server.calls == ["GetCapabilities"]
                assert (stats.desktop_sent, stats.desktop_failures) == (0, 0)
                assert (stats.alerts, stats.osc_writes, stats.tmux_errors) == (agents, agents, 0)
                assert stats.channels["desktop"].waiting == agents - 1
                tg.cancel_scope.cancel()
            send.close()
            receive.close()


def test_a_channel_that_keeps_timing_out_is_paused_with_growing_backoff() -> None:
    """Two timeouts in a row pause a channel for 30 s; the probe after a pause that times out
    pauses it again at once, twice as long, up to 10 min; an answer that failed keeps the
    length (the channel answered, but nothing says it works); only a send that worked resets
    it."""
    health = ChannelHealth()
    now = 0.0
    for _ in range(PAUSE_AFTER_TIMEOUTS - 1):
        health.timed_out(now)
    assert not health.paused(now)
    health.timed_out(now)
    pauses = []
    for _ in range(7):
        assert health.paused(now)
        left = health.statistics(now).paused_s
        pauses.append(left)
        now += left
        assert not health.paused(now)  # the probe goes out ...
        health.timed_out(now)  # ... and times out: paused again at once
    assert pauses == [PAUSE_FIRST_S * 2**n for n in range(5)] + [PAUSE_MAX_S] * 2
    now += health.statistics(now).paused_s
    health.answered(ok=False)
    assert not health.paused(now) and health.statistics(now).next_pause_s == PAUSE_MAX_S
    health.timed_out(now)
    assert not health.paused(now)  # a run of one timeout: the refusal ended the last run
    health.answered(ok=True)
    for _ in range(PAUSE_AFTER_TIMEOUTS):
        health.timed_out(now)
    stats = health.statistics(now)
    assert (stats.paused_s, stats.pauses, stats.timeouts) == (PAUSE_FIRST_S, 9, 12)


async def test_a_hung_desktop_is_paused_and_shown_in_status(tmp_path: Path) -> None:
    """The daemon's desktop channel on a bus whose notification server never answers: after
    two sends time out (5 s each) it is paused, the next alert is skipped without a call, and
    ``paneward status`` says so."""
    with anyio.fail_after(90):
        async with session_bus(tmp_path) as address, \
                silent_notification_server(address) as bus_server:
            state = tmp_path / "state"
            env = daemon_env(state, DBUS_SESSION_BUS_ADDRESS=address)
            args = ["--notify-via", "desktop", "--notify-interval", "0"]
            async with DaemonProcess(state, env=env, extra_args=args) as daemon:
                frames = b"".join(
                    messages.encode(message) + b"\n"
                    for n in range(3) for message in (spawned(f"s{n}"), blocked(f"s{n}"))
                )
                await raw_send(daemon.hook_socket, frames)

                async def skipped() -> bool:
                    desktop = (await daemon.counters())["notify"]["channels"]["desktop"]
                    return int(desktop["skipped"]) == 1

                await poll_until(skipped, "the third alert skipped", within=60)
                counters = (await daemon.counters())["notify"]
                code, table, _ = await _cli(env, "status")
    assert code == 0
    desktop = counters["channels"]["desktop"]
    assert (desktop["timeouts"], desktop["pauses"], desktop["timeouts_in_row"]) == (2, 1, 2)
    assert 0 < desktop["paused_s"] <= PAUSE_FIRST_S
    assert (counters["desktop_sent"], counters["desktop_failures"]) == (0, 2)
    assert bus_server.calls == ["GetCapabilities"] * 2  # none for the skipped alert
    [actors] = [line for line in table.splitlines() if line.startswith("actors: ")]
    assert re.search(r"notify running \(desktop PAUSED \d+ s after 2 timeouts\)", actors)


async def _cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([os.fspath(PANEWARD), *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()
