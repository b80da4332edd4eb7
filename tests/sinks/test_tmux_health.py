"""The tmux bridge's health: a stopped or wedged tmux is shown as such, never as stale truth.

The stall decision (:mod:`actors.core.tmux.health`) alone, then the bridge against a real tmux
server on a private socket: stopped with SIGSTOP (nothing answers, nothing can be written) and
resumed; made to close every control client at once by a hook of its own (plain commands
still work there, so the stall is shown in tmux); and with no badge shown (no probe at all).
"""

from __future__ import annotations

import fcntl
import os
import signal
import termios
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from actors.core.backoff import HEALTHY_AFTER_S
from actors.core.tmux.health import (
    PROBE_COMMAND,
    STALLED_SUMMARY,
    BridgeHealth,
    closed_at_once,
)
from actors.core.tmux.protocol import TmuxConnectionLost, TmuxTarget
from actors.core.views.status_table import actor_line
from actors.sinks.tmux import TmuxBridge, TmuxStatistics
from actors.sinks.tmux_client import ControlClient
from messages import Activity
from tests.support.daemon import DaemonProcess
from tests.support.polling import poll_until
from tests.support.sinks import ListSink
from tests.support.tmux import TmuxServer, TransitionSource, activity, eventually

Sources = Callable[..., TransitionSource]

# tmux closes a control client right after the first option it sets (paneward's hold): a
# server whose control mode is wedged, as tmux 3.6a's can be, while plain commands still work.
CLOSE_CONTROL_CLIENTS = ("set-hook", "-g", "after-set-option",
                         "if-shell -F '#{client_control_mode}' detach-client")


@pytest.fixture
def sources() -> Iterator[Sources]:
    made: list[TransitionSource] = []

    def make(*activities: Activity) -> TransitionSource:
        made.append(TransitionSource(*activities))
        return made[-1]

    yield make
    for source in made:
        source.close()


def footer(stats: TmuxStatistics) -> str:
    """`paneward status`'s actor line for a daemon whose bridge has ``stats``."""
    return actor_line({"supervisor": {"actor_states": {"tmux": "running"}},
                       "tmux": {"state": stats.state, "last_error": stats.last_error}})


# -- the decision --------------------------------------------------------------------------


def test_a_probe_left_unanswered_stalls_at_once_until_a_rewrite() -> None:
    health = BridgeHealth()
    health.connected(0.0)
    health.no_answer("tmux -L w did not answer within 2 s")
    assert health.stalled == "tmux -L w did not answer within 2 s" and health.stalls == 1
    # Tries tmux leaves unanswered keep it stalled, counted once.
    health.no_answer("tmux -L w did not answer within 10 s")
    assert health.stalled is not None and health.stalls == 1
    health.connected(30.0)
    assert health.stalled is not None  # attached, but no badge rewritten yet
    assert health.ready() is True
    assert health.stalled is None and health.ready() is False


def test_connections_closed_at_once_stall_from_the_third_in_a_row() -> None:
    health = BridgeHealth()
    health.closed("tmux -L w: server exited unexpectedly")
    health.connected(1.0)
    health.ended(1.5, "%exit")  # attached, gone before it worked: a close at once too
    assert health.stalled is None
    health.closed("tmux -L w: server exited unexpectedly")
    assert health.stalled == (
        "tmux closes every control client at once (3 in a row): "
        "tmux -L w: server exited unexpectedly"
    )
    # A connection that worked for a while resets the count (and a rewrite ended the stall).
    health.connected(2.0)
    health.ready()
    health.ended(2.0 + HEALTHY_AFTER_S, "%exit")
    health.closed("x")
    health.closed("x")
    assert health.stalled is None and health.stalls == 1


def test_no_server_or_another_daemon_ends_a_stall_and_the_count() -> None:
    for end in (BridgeHealth.gone, BridgeHealth.refused):
        health = BridgeHealth()
        for _ in range(3):
            health.closed("x")
        assert health.stalled is not None
        end(health)
        assert health.stalled is None
        health.closed("x")
        health.closed("x")
        assert health.stalled is None


def test_a_server_that_closes_connections_is_told_apart_from_no_server() -> None:
    assert closed_at_once("server exited unexpectedly")
    assert not closed_at_once("no server running on /tmp/tmux-1000/w")
    assert not closed_at_once("error connecting to /tmp/tmux-1000/w (Connection refused)")


def test_status_shows_a_stalled_bridge_and_why() -> None:
    stats = TmuxStatistics(state="stalled", last_error="tmux -L w did not answer within 2 s")
    assert footer(stats) == "actors: tmux STALLED: tmux -L w did not answer within 2 s"


# -- against a real tmux -------------------------------------------------------------------


async def _summary(server: TmuxServer) -> str:
    out = await server.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
    return out.strip()


async def _marker(server: TmuxServer, window: str) -> str:
    out = await server.arun("show-options", "-w", "-q", "-v", "-t", window, "@paneward_window")
    return out.strip()


async def test_a_stopped_tmux_stalls_the_bridge_and_sigcont_brings_the_truth_back(
    server: TmuxServer, sources: Sources
) -> None:
    """SIGSTOP: the probe goes unanswered, the bridge says STALLED (nothing can be written in
    a stopped tmux, and the screen does not change); what changes meanwhile is shown once tmux
    runs again: the bridge reconnects and rewrites every badge from the current truth."""
    with anyio.fail_after(60):
        pane = await server.new_pane()
        window = (await server.arun("display-message", "-p", "-t", pane, "#{window_id}")).strip()
        source = sources(activity("a", pane, turn="needs_input", attention="needs_input"))
        bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.02, backoff_max=0.1,
                            probe_every=0.02, stall_after=0.5, reply_timeout=1.0)
        tmux_pid = int((await server.arun("display-message", "-p", "#{pid}")).strip())
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, ListSink())

            async def shows(badge: str, summary: str) -> bool:
                return (await server.show(pane, "@paneward_badge") == badge
                        and await _summary(server) == summary
                        and await _marker(server, window) == badge)

            await eventually(lambda: shows("▲ needs you", "1 need you"))
            await poll_until(lambda: bridge.statistics().probes >= 2)
            os.kill(tmux_pid, signal.SIGSTOP)
            try:
                # Only the bridge is asked: a tmux command would wait for the stopped server.
                await poll_until(lambda: bridge.statistics().state == "stalled")
                stats = bridge.statistics()
                assert not stats.connected and stats.stalls == 1
                # The probe's deadline, or a reconnect try's (has-session) since.
                assert footer(stats).startswith(
                    f"actors: tmux STALLED: tmux -L {server.name} did not answer within "
                ), footer(stats)
                source.publish(activity("a", pane, turn="working"))
            finally:
                os.kill(tmux_pid, signal.SIGCONT)
            await eventually(lambda: shows("● working", "1 working"))
            await poll_until(lambda: bridge.statistics().state == "connected")
            assert await server.show(pane, "@paneward_turn") == "working"
            stats = bridge.statistics()
            assert stats.stalls == 1 and stats.connections >= 2 and stats.last_error is None
            assert footer(stats) == "actors: tmux running"
            tg.cancel_scope.cancel()


async def test_a_tmux_that_closes_every_control_client_shows_unknown_until_it_recovers(
    server: TmuxServer, sources: Sources
) -> None:
    """Control mode wedged, plain commands working: every badge and window marker becomes
    `? unknown` and the summary `paneward: tmux bridge stalled` (written by a one-shot tmux
    process), status says STALLED with the reason; once control clients stay, the truth."""
    with anyio.fail_after(60):
        pane = await server.new_pane()
        window = (await server.arun("display-message", "-p", "-t", pane, "#{window_id}")).strip()
        source = sources(activity("a", pane, turn="needs_input", attention="needs_input"))
        bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.01, backoff_max=0.05)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, ListSink())

            async def shows(badge: str, summary: str) -> bool:
                return (await server.show(pane, "@paneward_badge") == badge
                        and await _summary(server) == summary
                        and await _marker(server, window) == badge)

            await eventually(lambda: shows("▲ needs you", "1 need you"))
            await server.arun(*CLOSE_CONTROL_CLIENTS)
            # The next write (this one) closes the bridge's client; no client stays after.
            source.publish(activity("a", pane, turn="idle", attention="turn_done"))
            await eventually(lambda: shows("? unknown", STALLED_SUMMARY))
            assert await server.show(pane, "@paneward_turn") == "unknown"
            assert await server.show(pane, "@paneward_attention") == ""
            assert await server.show(pane, "@paneward_reason") == ""
            assert await server.show(pane, "@paneward_harness") == "claude-code"
            stats = bridge.statistics()
            assert stats.state == "stalled" and stats.stalls >= 1 and stats.stall_writes >= 1
            assert footer(stats).startswith(
                "actors: tmux STALLED: tmux closes every control client at once ("
            ), footer(stats)
            await server.arun("set-hook", "-gu", "after-set-option")
            await eventually(lambda: shows("✔ done", "1 done"))
            await poll_until(lambda: bridge.statistics().state == "connected")
            assert await server.show(pane, "@paneward_attention") == "turn_done"
            tg.cancel_scope.cancel()


async def test_a_tmux_that_closes_every_control_client_is_retried_ever_more_slowly(
    server: TmuxServer, sources: Sources
) -> None:
    """Each connection attaches and takes hold of the server, then tmux closes it: none worked for a
    while, so each one doubles the delay (Backoff), never back to the first one."""
    with anyio.fail_after(60):
        source = sources(activity("a", "%0", turn="working"))
        bridge = TmuxBridge(socket_name=server.name, panes=False, backoff_initial=0.01,
                            backoff_max=100)
        await server.arun(*CLOSE_CONTROL_CLIENTS)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)
            await poll_until(lambda: bridge.statistics().connections >= 6)
            stats = bridge.statistics()
            # The delay before connection n was set when connection n-1 ended: 0.01 * 2**(n-2);
            # read while connection n runs or after it ended, it is at least that.
            assert stats.retry_delay >= 0.01 * 2 ** (stats.connections - 2), stats
            assert stats.connect_failures == 0  # every try attached
            tg.cancel_scope.cancel()


async def test_no_probe_while_no_badge_is_shown(server: TmuxServer, sources: Sources) -> None:
    """Probes run only while a badge is shown: none before a session binds (however fast the
    probe), some while it is bound, none again once it unbinds (one may be in flight)."""
    with anyio.fail_after(60):
        source = sources()
        sink = ListSink()
        bridge = TmuxBridge(socket_name=server.name, probe_every=0.001)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, sink)

            async def listings_after(count: int) -> None:
                await server.new_pane(window=True)
                await poll_until(lambda: bridge.statistics().pane_listings > count)

            await poll_until(lambda: bridge.statistics().pane_listings >= 1)
            for _ in range(3):  # round trips that each take longer than a probe period
                await listings_after(bridge.statistics().pane_listings)
            assert bridge.statistics().probes == 0
            source.publish(activity("a", "%0", turn="working"))
            await poll_until(lambda: bridge.statistics().probes >= 3)
            source.publish(activity("a", None))

            async def cleared() -> bool:
                return await server.pane_option_names("%0") == []

            await eventually(cleared)
            after = bridge.statistics().probes
            for _ in range(3):
                await listings_after(bridge.statistics().pane_listings)
            assert bridge.statistics().probes <= after + 1
            tg.cancel_scope.cancel()


async def test_a_batch_begun_as_tmux_closes_the_client_ends_at_once(server: TmuxServer) -> None:
    """tmux closes the client while a batch waits for the write lock (another batch holds it;
    here the test): the batch raises TmuxConnectionLost at once instead of waiting out the
    reply timeout and returning no replies. (The lock is the client's own: no public step
    stops a batch there.)"""
    with anyio.fail_after(20):
        async with ControlClient(TmuxTarget(server.name), reply_timeout=3600) as client:
            outcome: list[object] = []

            async def batch() -> None:
                try:
                    outcome.append(await client.run_batch([PROBE_COMMAND]))
                except TmuxConnectionLost as exc:
                    outcome.append(exc)

            async with anyio.create_task_group() as tg:
                await client._lock.acquire()
                tg.start_soon(batch)
                await anyio.wait_all_tasks_blocked()
                await server.arun("detach-client", "-s", "main")  # its clients: ours only
                await client.wait_closed()
                client._lock.release()
            [lost] = outcome
            assert isinstance(lost, TmuxConnectionLost), lost


async def test_a_tmux_stuck_in_its_exit_is_a_stalled_bridge_until_it_is_gone(
    server: TmuxServer, sources: Sources
) -> None:
    """tmux 3.3a: a control client that stops reading (its stdout a full pipe) keeps a
    kill-server from finishing; the server then closes every connection at once (`server
    exited unexpectedly`), plain commands too, until that client goes. The bridge says STALLED
    with the reason; once the client goes and the server with it, DISCONNECTED."""
    with anyio.fail_after(60):
        await server.new_pane("yes")
        source = sources(activity("a", "%0", turn="working"))
        bridge = TmuxBridge(socket_name=server.name, panes=False, backoff_initial=0.01,
                            backoff_max=0.05)
        read_end, write_end = os.pipe()
        stuck = await anyio.open_process(server.argv("-C", "attach-session"), stdout=write_end)
        os.close(write_end)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, source.receive, None)
                await eventually(lambda: _badge_is(server, "%0", "● working"))
                await poll_until(lambda: _stuck(server, read_end), "the stuck client's pipe full")
                await server.arun("kill-server")
                await poll_until(lambda: bridge.statistics().state == "stalled")
                assert footer(bridge.statistics()) == (
                    "actors: tmux STALLED: tmux closes every control client at once (3 in a"
                    f" row): tmux -L {server.name}: server exited unexpectedly"
                )
                stuck.kill()
                await poll_until(lambda: bridge.statistics().state == "disconnected")
                assert bridge.statistics().stalls == 1
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if stuck.returncode is None:
                    stuck.kill()
                await stuck.wait()
                await stuck.aclose()
                os.close(read_end)


async def _badge_is(server: TmuxServer, pane: str, badge: str) -> bool:
    return await server.show(pane, "@paneward_badge") == badge


async def _stuck(server: TmuxServer, fd: int) -> bool:
    """Whether the pipe ``fd`` reads from is full: ``yes`` prints all the time, so if what it
    holds is the same before and after a round trip through the server, the server could not
    write any of that pane's output into it (and keeps it queued)."""
    before = _queued(fd)
    await server.arun("display-message", "-p", "x")
    return before > 0 and _queued(fd) == before


def _queued(fd: int) -> int:
    """Bytes waiting in the pipe ``fd`` reads from."""
    raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    return int.from_bytes(raw, "little")


async def test_the_daemon_says_a_stalled_bridge_in_tmux_on_stderr_and_in_status(
    server: TmuxServer, tmp_path: Path
) -> None:
    """`paneward run --tmux` end to end: tmux starts closing every control client at once
    (its hook) and the daemon's client is detached: the summary in tmux, the daemon's stderr
    and `paneward status` say the bridge is stalled; once clients stay, it is connected and
    the summary is the daemon's own again (nothing to report: unset)."""
    with anyio.fail_after(60):
        daemon = DaemonProcess(tmp_path / "state", extra_args=["--tmux", "-L", server.name])
        async with daemon:

            async def state() -> str:
                return str((await daemon.counters())["tmux"]["state"])

            await eventually(lambda: _is(state, "connected"))
            await server.arun(*CLOSE_CONTROL_CLIENTS)
            # (the hook may have detached it already, at a write of its own)
            await server.arun("detach-client", "-s", "main", check=False)
            await eventually(lambda: _is(lambda: _summary(server), STALLED_SUMMARY))
            await eventually(lambda: _is(state, "stalled"))
            footer = (await daemon.status())["table"].splitlines()[-1]
            assert "tmux STALLED: tmux closes every control client at once (" in footer, footer
            assert f"tmux: bridge to tmux -L {server.name} stalled (" in daemon.stderr()
            await server.arun("set-hook", "-gu", "after-set-option")
            await eventually(lambda: _is(state, "connected"))
            await eventually(lambda: _is(lambda: _summary(server), ""))
            footer = (await daemon.status())["table"].splitlines()[-1]
            assert "tmux running" in footer and "STALLED" not in footer, footer
        assert await daemon.stop() == 0


async def _is(read: Callable[[], Awaitable[str]], want: str) -> bool:
    return await read() == want


async def test_a_bridge_stopped_while_stalled_leaves_paneward_down(
    server: TmuxServer, sources: Sources
) -> None:
    """Stopped while stalled, the bridge has no client whose hook would say it is gone: it sets
    `paneward: down` itself; the badges keep `? unknown` (no truth, stale or not)."""
    with anyio.fail_after(60):
        pane = await server.new_pane()
        source = sources(activity("a", pane, turn="working"))
        bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.01, backoff_max=0.05)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, ListSink())
            await eventually(lambda: _badge_is(server, pane, "● working"))
            await server.arun(*CLOSE_CONTROL_CLIENTS)
            # (the hook may have detached it already, at a write of its own)
            await server.arun("detach-client", "-s", "main", check=False)
            await eventually(lambda: _is(lambda: _summary(server), STALLED_SUMMARY))
            await poll_until(lambda: bridge.statistics().state == "stalled")
            tg.cancel_scope.cancel()
        assert await _summary(server) == "paneward: down"
        badge = await server.show(pane, "@paneward_badge")
        assert badge is not None and badge.startswith("? unknown"), badge
