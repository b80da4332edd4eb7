"""The tmux bridge against a real tmux server on a private socket (tmux -L pw-<random>).

Panes run ``sleep 600`` standing in for agents: what binds a session to a pane is the
``Activity.pane`` the broadcast hub publishes, which the fake transition source supplies from
real messages (the supervisor is not needed for the sink's behaviour).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from actors.core.tmux.badges import BADGES, OPTION_NAMES
from actors.core.tmux.panes import SUBSCRIPTION_NAME
from actors.core.tmux.protocol import TmuxTarget
from actors.core.views.notify import NotifySettings
from actors.sinks.notify import Notifier
from actors.sinks.tmux import TmuxBridge, tmux_config_snippet
from actors.sinks.tmux_client import ControlClient
from actors.sources.procfs import start_token
from messages import (
    Activity,
    Inbound,
    PaneClosed,
    PaneFocused,
    PaneOpened,
    ProgramStatus,
    PtyExit,
    PtySpawned,
    SessionKey,
)
from supervisor import Supervisor
from tests.support.sinks import ListSink
from tests.support.tmux import TmuxServer, TransitionSource, activity, eventually

Sources = Callable[..., TransitionSource]


@pytest.fixture
def sources() -> Iterator[Sources]:
    """Make TransitionSources that are closed at teardown even when the test failed."""
    made: list[TransitionSource] = []

    def make(*activities: Activity) -> TransitionSource:
        made.append(TransitionSource(*activities))
        return made[-1]

    yield make
    for source in made:
        source.close()


class Running:
    def __init__(self, bridge: TmuxBridge, source: TransitionSource, sink: ListSink) -> None:
        self.bridge = bridge
        self.source = source
        self.sink = sink


@pytest.fixture
async def running(server: TmuxServer, sources: Sources) -> AsyncIterator[Running]:
    source = sources()
    sink = ListSink()
    bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.02, backoff_max=0.1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge.serve, source.receive, sink)
        yield Running(bridge, source, sink)
        tg.cancel_scope.cancel()


async def test_badges_follow_each_state_and_plain_shell_has_none(
    server: TmuxServer, running: Running
) -> None:
    with anyio.fail_after(20):
        agent = await server.new_pane()
        shell = "%0"
        states = [
            (activity("a", agent, turn="unknown"), "? unknown"),
            (activity("a", agent, turn="working"), BADGES["working"]),
            (activity("a", agent, turn="needs_input", attention="needs_input"), "▲ needs you"),
            (activity("a", agent, turn="idle", attention="turn_done"), "✔ done"),
            (activity("a", agent, turn="idle"), "○ idle"),
            (activity("a", agent, turn="unknown", attention="failed",
                      presence="persisted"), "✖ failed"),
            (activity("a", agent, turn="unknown", presence="persisted"), "■ exited"),
        ]
        for after, badge in states:
            running.source.publish(after)

            async def shows(badge: str = badge) -> bool:
                return await server.show(agent, "@paneward_badge") == badge

            await eventually(shows)
            assert await server.show(agent, "@paneward_turn") == after.turn
            assert await server.show(agent, "@paneward_presence") == after.presence
            kind = after.attention.kind if after.attention else ""
            assert await server.show(agent, "@paneward_attention") == kind
            assert await server.show(agent, "@paneward_harness") == "claude-code"
            assert await server.pane_option_names(shell) == []
        # Unbinding (pane=None) removes every option from the pane.
        running.source.publish(activity("a", None))

        async def cleared() -> bool:
            return await server.pane_option_names(agent) == []

        await eventually(cleared)
    stats = running.bridge.statistics()
    assert stats.command_errors == 0 and stats.connections == 1


async def test_the_window_marker_follows_the_most_urgent_pane_and_clears(
    server: TmuxServer, sources: Sources
) -> None:
    """``@paneward_window`` on each window is the most urgent badge of its bound panes: it
    follows their changes, a pane moved to another window, and is removed when no pane of the
    window is bound; when the bridge stops it is marked stale, as the badges are."""

    async def marker(window: str) -> str | None:
        out = await server.arun("show-options", "-w", "-q", "-v", "-t", window,
                                "@paneward_window")
        return out.removesuffix("\n") or None

    async def marks(want: dict[str, str | None]) -> None:
        async def check() -> bool:
            return {w: await marker(w) for w in want} == want

        await eventually(check)

    with anyio.fail_after(30):
        a = await server.new_pane()  # beside %0 in window @0
        other = (await server.arun("new-window", "-d", "-P", "-F", "#{pane_id} #{window_id}",
                                   "sleep 600")).split()
        c, w1 = other
        source = sources()
        sink = ListSink()
        bridge = TmuxBridge(socket_name=server.name, backoff_initial=0.02, backoff_max=0.1)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, sink)
            source.publish(activity("a", a, turn="working"))
            source.publish(activity("c", c, turn="idle"))
            await marks({"@0": "● working", w1: "○ idle"})
            source.publish(activity("z", "%0", turn="needs_input", attention="needs_input"))
            await marks({"@0": "▲ needs you", w1: "○ idle"})
            source.publish(activity("a", a, turn="idle", attention="turn_done"))
            source.publish(activity("z", "%0", turn="idle"))
            await marks({"@0": "✔ done", w1: "○ idle"})
            # the done pane moves to the other window: both markers follow
            await server.arun("join-pane", "-d", "-s", a, "-t", w1)
            await marks({"@0": "○ idle", w1: "✔ done"})
            # no bound pane left in a window: its marker goes
            source.publish(activity("z", None))
            await marks({"@0": None, w1: "✔ done"})
            source.publish(activity("a", a, turn="needs_input", attention="needs_input"))
            await marks({"@0": None, w1: "▲ needs you"})
            tg.cancel_scope.cancel()
        await marks({"@0": None, w1: "▲ needs you (stale)"})
    stats = bridge.statistics()
    assert stats.command_errors == 0, stats.last_error


async def test_a_window_marker_left_behind_is_removed_at_start(server: TmuxServer,
                                                               sources: Sources) -> None:
    """A marker a killed paneward left on a window none of whose panes is bound is removed
    when the bridge connects (as pane badges are)."""
    with anyio.fail_after(20):
        await server.arun("set-option", "-w", "-t", "@0", "@paneward_window", "▲ needs you")
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        source = sources()
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def cleared() -> bool:
                out = await server.arun("show-options", "-w", "-t", "@0")
                return "@paneward_window" not in out

            await eventually(cleared)
            tg.cancel_scope.cancel()


async def test_summary_and_shutdown_mark_every_badge_stale(
    server: TmuxServer, sources: Sources
) -> None:
    with anyio.fail_after(20):
        panes = [await server.new_pane() for _ in range(3)]
        source = sources(
            activity("a", panes[0], turn="needs_input", attention="needs_input"),
            activity("b", panes[1], turn="working"),
            activity("c", panes[2], turn="working"),
        )
        bridge = TmuxBridge(socket_name=server.name, panes=False)

        async def summary() -> str:
            out = await server.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
            return out.strip()

        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def summarized() -> bool:
                return await summary() == "1 need you · 2 working"

            await eventually(summarized)
            assert await server.show(panes[2], "@paneward_badge") == "● working"
            tg.cancel_scope.cancel()
        # Nothing is removed: tmux's hook marks what is left, once the client has gone.
        await server.wait_down(
            {panes[0]: "▲ needs you", panes[1]: "● working", panes[2]: "● working"}
        )
        assert await server.show(panes[0], "@paneward_attention") == "needs_input"


async def test_shutdown_while_a_batch_is_in_flight_still_marks_what_it_sets(
    server: TmuxServer, sources: Sources
) -> None:
    """The tmux server is stopped (SIGSTOP) so the batch that first badges a pane cannot be
    answered; the bridge is cancelled with that batch in flight, then tmux is resumed: the
    badge that batch set is marked stale too, although the bridge never saw its reply."""
    with anyio.fail_after(20):
        old, new = await server.new_pane(), await server.new_pane()
        source = sources(activity("a", old, turn="working"))
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        tmux_pid = int((await server.arun("display-message", "-p", "#{pid}")).strip())
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)
            first = await bridge.wait_badge_batch()
            assert first > 0
            before = bridge.statistics().commands
            os.kill(tmux_pid, signal.SIGSTOP)
            try:
                source.publish(activity("b", new, turn="working"))
                # Written (counted at the write) but unanswered: tmux is stopped.
                async def written() -> bool:
                    return bridge.statistics().commands > before

                await eventually(written, interval=0.005)
                assert bridge.statistics().badge_batches == 1
                tg.cancel_scope.cancel()
            finally:
                os.kill(tmux_pid, signal.SIGCONT)
        await server.wait_down({old: "● working", new: "● working"})

async def test_several_sessions_in_one_pane_attention_wins(
    server: TmuxServer, running: Running
) -> None:
    with anyio.fail_after(20):
        pane = await server.new_pane()
        running.source.publish(activity("old", pane, turn="working"))
        running.source.publish(activity("new", pane, turn="idle", attention="turn_done"))

        async def done() -> bool:
            return await server.show(pane, "@paneward_badge") == "✔ done"

        await eventually(done)

        async def badge_is(text: str) -> bool:
            return await server.show(pane, "@paneward_badge") == text

        # No attention left, both running: the newest evidence wins.
        running.source.publish(activity("new", pane, turn="idle"))
        await eventually(lambda: badge_is("○ idle"))
        running.source.publish(activity("old", pane, turn="working"))
        await eventually(lambda: badge_is("● working"))
        # A live owner with a proven turn beats a persisted one even with older evidence.
        running.source.publish(activity("old", pane, turn="unknown", presence="persisted"))
        await eventually(lambda: badge_is("○ idle"))
        # An ended session's failure never hides a live agent that proves a turn ...
        running.source.publish(
            activity("old", pane, turn="unknown", presence="persisted", attention="failed")
        )
        running.source.publish(activity("new", pane, turn="needs_input", attention="needs_input"))
        await eventually(lambda: badge_is("▲ needs you"))
        # ... but where neither proves a turn, attention decides.
        running.source.publish(activity("new", pane, turn="unknown"))
        await eventually(lambda: badge_is("✖ failed"))


async def test_pane_lifecycle_focus_close_and_exit_code(
    server: TmuxServer, running: Running
) -> None:
    with anyio.fail_after(30):
        sink = running.sink
        opened = await sink.wait_one(lambda m: isinstance(m, PaneOpened) and m.pane == "%0")
        assert isinstance(opened, PaneOpened)
        pid = int((await server.arun("display-message", "-p", "-t", "%0", "#{pane_pid}")).strip())
        assert opened.root_pid == pid and opened.focused
        assert opened.cwd

        agent = await server.new_pane()
        running.source.publish(activity("a", agent, turn="working"))
        await sink.wait_one(lambda m: isinstance(m, PaneOpened) and m.pane == agent)

        await server.arun("select-pane", "-t", agent)
        await sink.wait_one(lambda m: isinstance(m, PaneFocused) and m.pane == agent)

        async def badged() -> bool:
            return await server.show(agent, "@paneward_badge") == "● working"

        await eventually(badged)
        await server.arun("kill-pane", "-t", agent)
        await sink.wait_one(lambda m: isinstance(m, PaneClosed) and m.pane == agent)
        panes = await server.arun("list-panes", "-a", "-F", "#{pane_id}")
        assert agent not in panes.split()

        # A window in another session: reported although our client is attached to "main".
        await server.arun("new-session", "-d", "-s", "other")
        await server.arun("set-option", "-g", "remain-on-exit", "on")
        failing = (
            await server.arun("new-window", "-d", "-t", "other", "-P", "-F", "#{pane_id}",
                              "sleep 0.2; exit 3")
        ).strip()
        exit_msg = await sink.wait_one(lambda m: isinstance(m, PtyExit) and m.pane == failing)
        assert isinstance(exit_msg, PtyExit)
        assert exit_msg.code == 3 and exit_msg.signal is None
        opened_idx = sink.items.index(
            next(m for m in sink.items if isinstance(m, PaneOpened) and m.pane == failing)
        )
        assert opened_idx < sink.items.index(exit_msg)
        # Each exit is reported once.
        assert sum(isinstance(m, PtyExit) and m.pane == failing for m in sink.items) == 1
    assert running.bridge.statistics().rejected == 0


async def test_focus_in_a_session_the_client_is_not_attached_to(
    server: TmuxServer, running: Running
) -> None:
    # The pane subscription carries no focus field (each field costs tmux a lookup per pane
    # every second): focus comes from %window-pane-changed and %session-window-changed, which
    # tmux sends for every session. The split is seen through the subscription (there is no
    # %layout-change for another session); then the test removes the bridge's subscription, so
    # the focus changes can only come through those notifications.
    with anyio.fail_after(30):
        sink = running.sink
        await sink.wait_one(lambda m: isinstance(m, PaneOpened) and m.pane == "%0")
        first = (
            await server.arun("new-session", "-d", "-s", "away", "-P", "-F", "#{pane_id}",
                              "sleep 600")
        ).strip()
        split = (
            await server.arun("split-window", "-d", "-t", first, "-P", "-F", "#{pane_id}",
                              "sleep 600")
        ).strip()
        window = (
            await server.arun("new-window", "-d", "-t", "away", "-P", "-F", "#{pane_id}",
                              "sleep 600")
        ).strip()
        for pane in (split, window):

            def opens(m: Inbound, pane: str = pane) -> bool:
                return isinstance(m, PaneOpened) and m.pane == pane

            opened = await sink.wait_one(opens)
            assert isinstance(opened, PaneOpened) and not opened.focused
        clients = await server.arun("list-clients", "-F", "#{client_name}|#{client_control_mode}")
        (bridge_client,) = [
            name for name, _, control in (line.partition("|") for line in clients.splitlines())
            if control == "1"
        ]
        await server.arun("refresh-client", "-t", bridge_client, "-B", SUBSCRIPTION_NAME)

        await server.arun("select-pane", "-t", split)
        await sink.wait_one(lambda m: isinstance(m, PaneFocused) and m.pane == split)
        await server.arun("select-window", "-t", window)
        await sink.wait_one(lambda m: isinstance(m, PaneFocused) and m.pane == window)
    assert running.bridge.statistics().rejected == 0


async def test_fifty_panes_in_one_tick_are_one_batch(
    server: TmuxServer, sources: Sources
) -> None:
    with anyio.fail_after(60):
        panes = [await server.new_pane(window=True) for _ in range(50)]
        source = sources(*(activity(f"s{i}", p) for i, p in enumerate(panes)))
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def listing() -> dict[str, str]:
                out = await server.arun("list-panes", "-a", "-F", "#{pane_id}|#{@paneward_badge}")
                return dict(line.split("|", 1) for line in out.splitlines())

            async def all_idle() -> bool:
                got = await listing()
                return all(got.get(p) == "○ idle" for p in panes)

            await eventually(all_idle)
            before = bridge.statistics()
            for i, pane in enumerate(panes):
                source.publish(activity(f"s{i}", pane, turn="working"))

            async def all_working() -> bool:
                got = await listing()
                return all(got.get(p) == "● working" for p in panes)

            await eventually(all_working)
            after = bridge.statistics()
            tg.cancel_scope.cancel()
    assert after.batches - before.batches == 1
    assert after.badge_batches - before.badge_batches == 1
    # turn + badge per pane, and the summary: only changed options are written.
    assert after.badge_commands - before.badge_commands == 50 * 2 + 1


async def test_reconnects_to_a_restarted_server_and_reapplies(
    server: TmuxServer, sources: Sources
) -> None:
    with anyio.fail_after(30):
        source = sources(activity("a", "%0", turn="needs_input", attention="needs_input"))
        bridge = TmuxBridge(socket_name=server.name, panes=False, backoff_initial=0.01,
                            backoff_max=0.05)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def badged() -> bool:
                return await server.show("%0", "@paneward_badge") == "▲ needs you"

            await eventually(badged)
            await server.arun("kill-server")

            async def retrying() -> bool:
                stats = bridge.statistics()
                return not stats.connected and stats.connect_failures >= 2

            await eventually(retrying)
            assert bridge.statistics().last_error
            await server.arun("-f", "/dev/null", "new-session", "-d", "-s", "main")
            await eventually(badged)
            assert bridge.statistics().connections == 2
            assert await server.show("%0", "@paneward_turn") == "needs_input"
            tg.cancel_scope.cancel()


async def test_stale_options_from_a_killed_run_are_removed(
    server: TmuxServer, sources: Sources
) -> None:
    with anyio.fail_after(20):
        pane = await server.new_pane()
        for name in OPTION_NAMES:
            await server.arun("set-option", "-p", "-t", pane, name, "left over")
        source = sources()
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def cleared() -> bool:
                return await server.pane_option_names(pane) == []

            await eventually(cleared)
            assert bridge.statistics().stale_cleared == 1
            tg.cancel_scope.cancel()


async def test_with_the_real_supervisor(server: TmuxServer) -> None:
    """End to end: the supervisor's reducer decides, the bridge shows it, tmux panes go in."""
    with anyio.fail_after(30):
        agent = await server.new_pane()
        me = os.getpid()
        token = start_token(me)
        assert token is not None
        key = SessionKey("terminal", "t1")
        t = int(time.time() * 1000)
        async with Supervisor() as sup:
            bridge = TmuxBridge(socket_name=server.name)
            sup.start_actor(bridge, name="tmux")
            await sup.inject(PtySpawned(key=key, pid=me, start_token=token, at_ms=t,
                                        observed_at_ms=t, pane=agent))
            await sup.inject(ProgramStatus(state="working", at_ms=t + 1, observed_at_ms=t + 1,
                                           key=key))

            async def working() -> bool:
                return await server.show(agent, "@paneward_badge") == "● working"

            await eventually(working)
            assert await server.pane_option_names("%0") == []
            await sup.inject(ProgramStatus(state="done", at_ms=t + 2, observed_at_ms=t + 2,
                                           key=key))

            async def done() -> bool:
                return await server.show(agent, "@paneward_badge") == "✔ done"

            await eventually(done)
            # Focusing the pane in tmux reaches the reducer, which closes turn_done.
            await server.arun("select-pane", "-t", agent)

            async def idle() -> bool:
                return await server.show(agent, "@paneward_badge") == "○ idle"

            await eventually(idle)
            stats = bridge.statistics()
            assert stats.injected >= 2 and stats.rejected == 0
        # Supervisor shutdown ended the subscription: the badge is left, marked stale.
        await server.wait_down({agent: "○ idle"})


async def test_config_snippet_sources_and_renders(server: TmuxServer, tmp_path: Path) -> None:
    with anyio.fail_after(20):
        conf = tmp_path / "paneward.conf"
        conf.write_text(tmux_config_snippet(), encoding="utf-8")
        await server.arun("source-file", str(conf))
        agent = await server.new_pane()
        await server.arun("set-option", "-p", "-t", agent, "@paneward_badge", "▲ needs you")
        await server.arun("set-option", "-p", "-t", agent, "@paneward_attention", "needs_input")
        await server.arun("set-option", "-g", "@paneward_summary", "1 need you")
        border = await server.arun("display-message", "-p", "-t", agent, "#{E:pane-border-format}")
        assert "#[reverse bold]▲ needs you#[default]" in border
        plain = await server.arun("display-message", "-p", "-t", "%0", "#{E:pane-border-format}")
        assert "needs you" not in plain and plain.strip().startswith("0:")
        status = await server.arun("display-message", "-p", "#{E:status-right}")
        assert status.startswith("1 need you | ")
        # the agent's pane is named by its harness, a plain pane by its program
        await server.arun("set-option", "-p", "-t", agent, "@paneward_harness", "codex")
        border = await server.arun("display-message", "-p", "-t", agent, "#{E:pane-border-format}")
        assert border.rstrip().endswith(": codex")
        # the window list: the glyph of the window's marker, none without one
        window = (await server.arun("new-window", "-d", "-P", "-F", "#{window_id}")).strip()
        await server.arun("set-option", "-w", "-t", window, "@paneward_window", "▲ needs you")
        for option in ("window-status-format", "window-status-current-format"):
            marked = await server.arun("display-message", "-p", "-t", window, f"#{{E:{option}}}")
            assert marked.startswith("▲ 1:")
            unmarked = await server.arun("display-message", "-p", "-t", "@0", f"#{{E:{option}}}")
            assert unmarked.startswith("0:")
        assert (await server.arun("show-options", "-g", "-v", "focus-events")).strip() == "on"


async def test_pane_killed_by_signal_reports_the_signal(
    server: TmuxServer, running: Running
) -> None:
    with anyio.fail_after(15):
        await server.arun("set-option", "-g", "remain-on-exit", "on")
        killed = (
            await server.arun("new-window", "-d", "-P", "-F", "#{pane_id}",
                              "sleep 0.2; kill -9 $$")
        ).strip()
        msg = await running.sink.wait_one(lambda m: isinstance(m, PtyExit) and m.pane == killed)
        assert isinstance(msg, PtyExit)
        assert msg.signal == 9 and msg.code is None


async def test_a_server_named_by_socket_path(tmp_path: Path, sources: Sources) -> None:
    """``-S PATH`` (``TmuxBridge(socket_path=...)``, ``paneward run --tmux -S PATH``) reaches the
    server listening on that path, not a ``-L`` name."""
    sock = tmp_path / "tmux.sock"

    async def tmux(*args: str) -> str:
        done = await anyio.run_process(["tmux", "-S", str(sock), *args])
        return done.stdout.decode()

    await tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "80", "-y", "24")
    try:
        with anyio.fail_after(20):
            source = sources(activity("a", "%0", turn="working"))
            bridge = TmuxBridge(socket_path=str(sock), panes=False)
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, source.receive, None)

                async def working() -> bool:
                    out = await tmux("show-options", "-p", "-q", "-v", "-t", "%0",
                                     "@paneward_badge")
                    return out.strip() == "● working"

                await eventually(working)
                tg.cancel_scope.cancel()

            async def stale() -> bool:
                out = await tmux("show-options", "-p", "-q", "-v", "-t", "%0", "@paneward_badge")
                return out.strip() == "● working (stale)"

            await eventually(stale)
    finally:
        await anyio.run_process(["tmux", "-S", str(sock), "kill-server"], check=False)


def _pipes() -> set[str]:
    """This process's open pipe ends, as ``pipe:[inode]`` (one per fd)."""
    ends = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # the fd listing's own, closed by now
            continue
        if link.startswith("pipe:"):
            ends.add(f"{fd} {link}")
    return ends


async def test_a_closed_control_client_leaves_no_pipe_open(server: TmuxServer) -> None:
    """Closing the control client closes all three of its pipes, whatever tmux still holds.

    The server holds the control client's stdout too, and lets go of it only after the client
    exits: closing the stream objects alone (anyio's ``aclose`` of a receive stream) left the
    pipe to be closed by an EOF that could come after the event loop was gone, and CI saw the
    transport reported unclosed. A stopped server holds it for as long as the test needs."""
    with anyio.fail_after(20):
        server_pid = int((await server.arun("display-message", "-p", "#{pid}")).strip())
        before = _pipes()
        try:
            async with ControlClient(TmuxTarget(socket_name=server.name)):
                os.kill(server_pid, signal.SIGSTOP)
            assert _pipes() - before == set()
        finally:
            os.kill(server_pid, signal.SIGCONT)


_OWNER = """
import sys
import anyio
from actors.core.tmux.protocol import TmuxTarget
from actors.sinks.tmux_client import ControlClient

async def main() -> None:
    async with ControlClient(TmuxTarget(socket_name=sys.argv[1])):
        print("attached", flush=True)
        await anyio.sleep_forever()

anyio.run(main)
"""


async def test_a_control_client_dies_with_its_killed_owner_whatever_tmux_queued(
    server: TmuxServer,
) -> None:
    """``kill -9`` of the process that owns a control client while tmux holds notifications
    for it that it can no longer write: the client is gone from tmux at once, the
    ``client-detached`` hook runs, and the server lives on.

    tmux 3.3a keeps such a client forever otherwise: the client's stdin ends, tmux waits for
    its queue to drain into a pipe nobody reads, so no hook runs (paneward would never show
    ``down``) and the server crashes at exit (docs/tmux.md). The owner is stopped first, so
    the queue is certain to be full when it dies."""
    import contextlib
    import subprocess
    import sys

    import psutil

    from actors.sinks.tmux_client import DIES_WITH_US

    assert DIES_WITH_US is not None, "setpriv (util-linux) is part of the test environment"
    with anyio.fail_after(60):
        await server.arun("set-hook", "-g", "client-detached[9]", "set -g @gone yes")
        owner = await anyio.open_process([sys.executable, "-c", _OWNER, server.name],
                                         stdout=subprocess.PIPE)
        try:
            assert owner.stdout is not None
            assert b"attached" in await owner.stdout.receive()

            async def control_clients() -> list[str]:
                out = await server.arun("list-clients", "-F",
                                        "#{client_pid} #{client_control_mode}")
                return [line.split()[0] for line in out.splitlines() if line.endswith(" 1")]

            [client_pid] = await control_clients()
            owner.send_signal(signal.SIGSTOP)
            # Each rename is a %window-renamed for the client: far more than a pipe holds
            # (in runs of 50: tmux takes at most 16 KiB of arguments per command).
            for run in range(8):
                renames: list[str] = []
                for i in range(50):
                    renames += [";", "rename-window", "-t", "main:0", f"w{run}{i:02d}" + "x" * 200]
                await server.arun(*renames[1:])
            owner.kill()
            await owner.wait()

            async def gone() -> bool:
                return await control_clients() == []

            await eventually(gone)
            assert (await server.arun("show-options", "-gv", "@gone")).strip() == "yes"
            # The client process is dead (a zombie until its new parent reaps it).
            with contextlib.suppress(psutil.NoSuchProcess):
                assert psutil.Process(int(client_pid)).status() == psutil.STATUS_ZOMBIE
        finally:
            if owner.returncode is None:
                owner.send_signal(signal.SIGCONT)
                owner.kill()
                await owner.wait()
            await owner.aclose()


async def test_a_bridge_without_setpriv_says_what_it_cannot_guard(
    server: TmuxServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No ``setpriv`` on the machine: the clients run as they are, and the log says what that
    leaves (a killed daemon's client may stay in tmux 3.3a)."""
    import logging

    from actors.sinks import tmux_client

    monkeypatch.setattr(tmux_client, "DIES_WITH_US", None)
    assert tmux_client.control_argv(["tmux", "-C"]) == ["tmux", "-C"]
    bridge = TmuxBridge(socket_name=server.name, badges=False, panes=False)
    with anyio.fail_after(20), caplog.at_level(logging.WARNING, logger="paneward.tmux"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, None, None)

            async def connected() -> bool:
                return bridge.statistics().connected

            await eventually(connected)
            tg.cancel_scope.cancel()
    assert [r.getMessage() for r in caplog.records if "setpriv" in r.getMessage()] == [
        "tmux: no setpriv (util-linux): if this daemon is killed, tmux 3.3a can keep its control"
        " clients (no 'paneward: down') and crash at exit (docs/tmux.md)"
    ]


async def test_a_rate_limited_alert_asks_tmux_nothing(server: TmuxServer, sources: Sources) -> None:
    """The notifier asks tmux where the user looks before it tells them (one batch per alert).
    A session asking again within the rate-limit window is not told, and is not asked about
    either: under a burst (200 sessions finishing turns 25 times a second each) every alert
    cost a round trip to tmux that was then thrown away."""
    with anyio.fail_after(60):
        pane = await server.new_pane(window=True)
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        alerts = sources()
        notifier = Notifier(NotifySettings(channels=("tmux",), min_interval_ms=600_000),
                            tmux=bridge)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, sources().receive, None)
            tg.start_soon(notifier.serve, alerts.receive)

            async def connected() -> bool:
                return bridge.statistics().connected

            await eventually(connected)
            alerts.publish(activity("s", pane, attention="needs_input"))
            await notifier.wait_handled(1)
            asked = bridge.statistics().lent_batches
            told = notifier.statistics()
            alerts.publish(activity("s", pane))  # answered
            alerts.publish(activity("s", pane, attention="needs_input"))  # and asks again
            await notifier.wait_handled(2)
            again = notifier.statistics()
            assert bridge.statistics().lent_batches == asked == 1
            tg.cancel_scope.cancel()
    assert (told.opened, told.alerts, told.rate_limited, told.tmux_errors) == (1, 1, 0, 0)
    assert (again.opened, again.alerts, again.rate_limited) == (2, 1, 1)


async def test_a_server_claimed_by_another_live_process_is_left_alone_until_it_goes(
    server: TmuxServer, sources: Sources, tmp_path: Path
) -> None:
    """`@paneward_daemon` names a live process (a `sleep` standing in for another daemon): the
    bridge writes nothing to the server, not even the removal of the badges it finds there,
    and says who holds it; once that process is gone it takes the server over."""
    with anyio.fail_after(30):
        pane = await server.new_pane()
        await server.arun("set-option", "-p", "-t", pane, "@paneward_badge", "● working")
        async with await anyio.open_process(["sleep", "600"]) as other:
            token = start_token(other.pid)
            assert token is not None
            await server.arun("set-option", "-s", "@paneward_daemon", f"{other.pid} {token}")
            await server.arun("set-option", "-s", "@paneward_daemon_state", str(tmp_path / "a"))
            source = sources()
            bridge = TmuxBridge(socket_name=server.name, panes=False, backoff_initial=0.01,
                                backoff_max=0.05)
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.serve, source.receive, None)

                async def refused_twice() -> bool:
                    return bridge.statistics().refusals >= 2

                await eventually(refused_twice)
                stats = bridge.statistics()
                assert stats.state == "refused" and not stats.connected
                assert stats.last_error == (
                    f"tmux -L {server.name} is driven by another paneward daemon "
                    f"(pid {other.pid}, state dir {tmp_path / 'a'}); leaving it alone"
                )
                assert stats.badge_batches == 0 and stats.stale_cleared == 0
                assert await server.show(pane, "@paneward_badge") == "● working"
                assert "[7501]" not in await server.arun("show-hooks", "-g")
                other.kill()
                await other.wait()

                async def taken_over() -> bool:
                    return await server.show(pane, "@paneward_badge") is None

                await eventually(taken_over)  # the badge no session shows is removed
                stats = bridge.statistics()
                assert stats.state == "connected" and stats.takeovers == 1
                claim = await server.arun("show-options", "-s", "-q", "-v", "@paneward_daemon")
                assert claim.split() == [str(os.getpid()), start_token(os.getpid())]
                tg.cancel_scope.cancel()


async def test_a_claim_of_a_reused_pid_is_taken_over(
    server: TmuxServer, sources: Sources
) -> None:
    """The pid in `@paneward_daemon` runs, but as another incarnation (its start token
    differs): the claim is stale and is taken over at once."""
    with anyio.fail_after(20):
        await server.arun("set-option", "-s", "@paneward_daemon", f"{os.getpid()} 1")
        source = sources(activity("a", "%0", turn="working"))
        bridge = TmuxBridge(socket_name=server.name, panes=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(bridge.serve, source.receive, None)

            async def working() -> bool:
                return await server.show("%0", "@paneward_badge") == "● working"

            await eventually(working)
            assert bridge.statistics().takeovers == 1
            assert bridge.statistics().refusals == 0
            tg.cancel_scope.cancel()
