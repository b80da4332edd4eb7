"""The whole path, end to end: `paneward run --tmux` on a private tmux server whose panes run
fake agents — processes renamed to ``claude`` / ``codex`` (``/proc/self/comm``) that write a
Claude registry file or hold a Codex rollout open — and a plain shell.

In the first test nothing is injected: discovery finds the agents from their files and
processes, the pane mapper binds them to the panes tmux reports, the reducer decides, and the
badges appear as pane options. The fake Claude is driven by typing into its pane (``tmux
send-keys``), as a user would; the fake Codex's rollout is appended to as Codex appends it. The
last test injects a hook-only agent's hooks (Gemini's) naming a real process in a pane as their
owner, and kills that process.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import anyio
import pytest

from actors.sources import procfs
from tests import support
from tests.support.daemon import DaemonProcess, daemon_env
from tests.support.tmux import TmuxServer, attached_client, eventually

FAKE_CLAUDE = support.FIXTURES / "claude_registry" / "fake_claude.py"
THREAD = "01a229ab-bacd-7422-95f3-108794d72fbf"

FAKE_CODEX = support.FIXTURES / "codex" / "fake_codex.py"

pytestmark = pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="renaming needs Linux /proc")


def rollout_record(kind: str, turn: str) -> bytes:
    body = {
        "timestamp": "2026-11-30T03:40:00.000Z",
        "type": "event_msg",
        "payload": {"type": kind, "turn_id": turn},
    }
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def session_meta(thread: str) -> bytes:
    payload = {"id": thread, "cli_version": "0.171.0", "source": "cli"}
    body = {"timestamp": "2026-11-30T03:39:59.000Z", "type": "session_meta", "payload": payload}
    return json.dumps(body).encode() + b"\n"


async def test_fake_agents_in_panes_get_badges_through_the_daemon(
    server: TmuxServer, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    env = daemon_env(state)
    claude_home = Path(env["CLAUDE_CONFIG_DIR"])
    (claude_home / "sessions").mkdir(parents=True)
    day = Path(env["CODEX_HOME"]) / "sessions" / "2026" / "11" / "30"
    day.mkdir(parents=True)
    rollout = day / f"rollout-2026-11-30T03-39-59-{THREAD}.jsonl"
    rollout.write_bytes(session_meta(THREAD))
    python = shlex.quote(sys.executable)

    async def option(pane: str, name: str) -> str | None:
        return await server.show(pane, name)

    async def shows(pane: str, badge: str, turn: str, attention: str) -> None:
        async def check() -> bool:
            return (
                await option(pane, "@paneward_badge") == badge
                and await option(pane, "@paneward_turn") == turn
                and await option(pane, "@paneward_attention") == attention
            )

        await eventually(check, interval=0.02)

    with anyio.fail_after(90):
        shell = "%0"
        claude = await server.new_pane(
            f"{python} {shlex.quote(str(FAKE_CLAUDE))} {shlex.quote(str(claude_home))} s-pane"
        )
        codex = await server.new_pane(
            f"{python} {shlex.quote(str(FAKE_CODEX))} codex {shlex.quote(str(rollout))}"
        )
        daemon = DaemonProcess(state, discovery=True, env=env,
                               extra_args=["--tmux", "-L", server.name])
        async with daemon:
            # The fake Claude wrote its first record (no status yet): running, turn unknown.
            await shows(claude, "? unknown", "unknown", "")
            assert await option(claude, "@paneward_harness") == "claude-code"
            assert await option(claude, "@paneward_presence") == "running"

            async def type_into_claude(line: str) -> None:
                await server.arun("send-keys", "-t", claude, "-l", line)
                await server.arun("send-keys", "-t", claude, "Enter")

            await type_into_claude("status idle")
            await shows(claude, "○ idle", "idle", "")
            await type_into_claude("status busy")
            await shows(claude, "● working", "working", "")
            await type_into_claude("waiting permission prompt")
            await shows(claude, "▲ needs you", "needs_input", "needs_input")
            await type_into_claude("status busy")  # approved: working again, attention closed
            await shows(claude, "● working", "working", "")
            await type_into_claude("status idle")  # a hook-less turn ends: done
            await shows(claude, "✔ done", "idle", "turn_done")
            await server.arun("select-pane", "-t", claude)  # looking at it closes done
            await shows(claude, "○ idle", "idle", "")

            # The fake Codex holds its rollout; Codex appends boundaries as turns run.
            await shows(codex, "? unknown", "unknown", "")
            assert await option(codex, "@paneward_harness") == "codex"
            with rollout.open("ab") as f:
                f.write(rollout_record("task_started", "t1"))
            await shows(codex, "● working", "working", "")
            with rollout.open("ab") as f:
                f.write(rollout_record("task_complete", "t1"))
            await shows(codex, "✔ done", "idle", "turn_done")

            # The plain shell pane never carries any paneward option.
            assert await server.pane_option_names(shell) == []

            # An agent that exits with a non-zero code in a pane kept by remain-on-exit: the
            # pane stays, dead, and shows failed. The fake exits 2 on an unknown command; it
            # is idle then, so "failed" comes from the exit status tmux reports, not from a
            # death in the middle of a turn.
            failing = await server.new_pane(
                f"{python} {shlex.quote(str(FAKE_CLAUDE))} {shlex.quote(str(claude_home))} s-fail",
                window=True,
            )
            await server.arun("set-option", "-w", "-t", failing, "remain-on-exit", "on")
            await shows(failing, "? unknown", "unknown", "")
            await server.arun("send-keys", "-t", failing, "-l", "status idle")
            await server.arun("send-keys", "-t", failing, "Enter")
            await shows(failing, "○ idle", "idle", "")
            await server.arun("send-keys", "-t", failing, "-l", "no-such-command")
            await server.arun("send-keys", "-t", failing, "Enter")
            await shows(failing, "✖ failed", "unknown", "failed")
            assert await option(failing, "@paneward_presence") == "persisted"
            dead = await server.arun(
                "display-message", "-p", "-t", failing, "#{pane_dead} #{pane_dead_status}"
            )
            assert dead.split() == ["1", "2"]
            [failed] = [
                a for a in (await daemon.status())["activities"]
                if a["key"]["session_id"] == "s-fail"
            ]
            assert failed["attention"]["reason"] == "exited with code 2"
            assert failed["exit"] == {"code": 2, "signal": None}

            # The agent dies: its pane closes with it, and nothing of paneward is left on
            # the panes that remain; the daemon's summary no longer counts it.
            claude_pid = int(
                (await server.arun("display-message", "-p", "-t", claude, "#{pane_pid}")).strip()
            )
            os.kill(claude_pid, 15)

            async def closed() -> bool:
                panes = (await server.arun("list-panes", "-a", "-F", "#{pane_id}")).split()
                return claude not in panes

            await eventually(closed, interval=0.02)

            async def summary_without_claude() -> bool:
                out = await server.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
                return out.strip() == "1 failed · 1 done"

            await eventually(summary_without_claude, interval=0.02)
            assert await server.pane_option_names(shell) == []
            counters = await daemon.counters()
        assert await daemon.stop() == 0
    # Daemon shutdown left the badges, and tmux's hook marked them stale.
    with anyio.fail_after(20):
        await server.wait_down({codex: "✔ done", failing: "✖ failed"})
    tmux = counters["tmux"]
    assert tmux["command_errors"] == 0 and tmux["rejected"] == 0, tmux
    # The dead agent's pane was gone before its options could be removed: tmux's refusal is
    # counted as a vanished pane, not as an error.
    assert tmux["missing_panes"] >= 1


async def test_no_tmux_server_is_said_on_stderr_and_in_status_until_it_comes(
    tmp_path: Path,
) -> None:
    """`paneward run --tmux -L NAME` before the server exists: the daemon says it is waiting
    (stderr, once per state change) and `status` shows the bridge WAITING with the reason; once
    the server starts, both say connected and the old error is gone."""
    srv = TmuxServer()  # not started yet
    state = tmp_path / "state"
    try:
        with anyio.fail_after(60):
            daemon = DaemonProcess(state, extra_args=["--tmux", "-L", srv.name])
            async with daemon:

                async def said(text: str) -> bool:
                    return text in daemon.stderr()

                async def waiting() -> bool:
                    return await said("waiting")

                await eventually(waiting, interval=0.02)
                assert f"tmux: tmux -L {srv.name}: " in daemon.stderr()
                footer = (await daemon.status())["table"].splitlines()[-1]
                assert f"tmux WAITING: tmux -L {srv.name}: " in footer, footer
                tmux = await daemon.counters()
                assert tmux["tmux"]["state"] == "waiting"
                failures = tmux["tmux"]["connect_failures"]

                async def failed_again() -> bool:
                    stats = (await daemon.counters())["tmux"]
                    return int(stats["connect_failures"]) > int(failures) + 1

                await eventually(failed_again, interval=0.02)
                # Said once, not once per attempt.
                assert daemon.stderr().count("waiting") == 1, daemon.stderr()

                await srv.arun("-f", "/dev/null", "new-session", "-d", "-s", "main")

                async def connected() -> bool:
                    return bool((await daemon.counters())["tmux"]["state"] == "connected")

                await eventually(connected, interval=0.02)
                stats = (await daemon.counters())["tmux"]
                assert stats["connected"] and stats["last_error"] is None, stats
                assert f"tmux: connected to tmux -L {srv.name}" in daemon.stderr()
                footer = (await daemon.status())["table"].splitlines()[-1]
                assert "tmux running" in footer and "WAITING" not in footer, footer

                await srv.arun("kill-server")

                async def lost() -> bool:
                    return bool((await daemon.counters())["tmux"]["state"] == "disconnected")

                await eventually(lost, interval=0.02)
                footer = (await daemon.status())["table"].splitlines()[-1]
                assert "tmux DISCONNECTED: " in footer, footer
                assert f"tmux: connection to tmux -L {srv.name} lost" in daemon.stderr()
            assert await daemon.stop() == 0
    finally:
        srv.kill()


async def test_a_turn_done_in_the_pane_the_user_looks_at_opens_nothing_also_after_a_restart(
    server: TmuxServer, tmp_path: Path
) -> None:
    """A user attached to the session splits a pane (focus moves there) and starts the agent in
    it: a finished turn there opens no `done` (they watched it end). After a daemon restart,
    focus is taken from what the attached client shows, not from a focus change that never
    comes: the next turn opens nothing either."""
    state = tmp_path / "state"
    env = daemon_env(state)
    claude_home = Path(env["CLAUDE_CONFIG_DIR"])
    (claude_home / "sessions").mkdir(parents=True)
    python = shlex.quote(sys.executable)
    command = f"{python} {shlex.quote(str(FAKE_CLAUDE))} {shlex.quote(str(claude_home))} s-seen"

    async def option(pane: str, name: str) -> str | None:
        return await server.show(pane, name)

    async def turn(pane: str, line: str, want: str) -> None:
        await server.arun("send-keys", "-t", pane, "-l", line)
        await server.arun("send-keys", "-t", pane, "Enter")

        async def reached() -> bool:
            return await option(pane, "@paneward_turn") == want

        await eventually(reached, interval=0.02)

    with anyio.fail_after(90):
        async with attached_client(server, "main"):
            args = ["--tmux", "-L", server.name, "--notify", "none"]
            async with DaemonProcess(state, discovery=True, env=env, extra_args=args) as daemon:
                # Split in front of the user (no -d): the new pane is the one they look at.
                out = await server.arun("split-window", "-t", "main", "-P", "-F", "#{pane_id}",
                                        command)
                agent = out.strip()

                async def bound() -> bool:
                    return await option(agent, "@paneward_badge") == "? unknown"

                await eventually(bound, interval=0.02)
                await turn(agent, "status busy", "working")
                await turn(agent, "status idle", "idle")
                # Turn and attention are written together: idle without turn_done.
                assert await option(agent, "@paneward_attention") == ""
                assert await option(agent, "@paneward_badge") == "○ idle"
                assert await daemon.stop() == 0
            # Another session nobody is attached to has an active pane too (a later id): it is
            # not where the user looks.
            await server.arun("new-session", "-d", "-s", "other")
            async with DaemonProcess(state, discovery=True, env=env, extra_args=args) as daemon:
                await turn(agent, "status busy", "working")
                await turn(agent, "status idle", "idle")
                assert await option(agent, "@paneward_attention") == ""
                assert await option(agent, "@paneward_badge") == "○ idle"
                [seen] = [a for a in (await daemon.status())["activities"]
                          if a["key"]["session_id"] == "s-seen"]
                assert seen["attention"] is None, seen
                assert await daemon.stop() == 0


async def _fake_claude_pane(server: TmuxServer, env: dict[str, str], session: str) -> str:
    claude_home = Path(env["CLAUDE_CONFIG_DIR"])
    (claude_home / "sessions").mkdir(parents=True, exist_ok=True)
    python = shlex.quote(sys.executable)
    return await server.new_pane(
        f"{python} {shlex.quote(str(FAKE_CLAUDE))} {shlex.quote(str(claude_home))} {session}"
    )


async def _type(server: TmuxServer, pane: str, line: str) -> None:
    await server.arun("send-keys", "-t", pane, "-l", line)
    await server.arun("send-keys", "-t", pane, "Enter")


async def test_a_second_daemon_on_the_same_tmux_server_touches_nothing(
    server: TmuxServer, tmp_path: Path
) -> None:
    """Two daemons with their own state dirs on one tmux server: the second one refuses the
    server (stderr and `status` name the first's pid) and writes nothing there -- the first's
    badges are not wiped while it runs, nor when it exits -- and takes over once the first is
    gone."""
    first_state, second_state = tmp_path / "a" / "state", tmp_path / "b" / "state"
    env = daemon_env(first_state)
    args = ["--tmux", "-L", server.name, "--notify", "none"]
    with anyio.fail_after(90):
        agent = await _fake_claude_pane(server, env, "s-first")
        first = DaemonProcess(first_state, discovery=True, env=env, extra_args=args)
        async with first:
            await _type(server, agent, "waiting permission prompt")

            async def needs_you() -> bool:
                return await server.show(agent, "@paneward_badge") == "▲ needs you"

            await eventually(needs_you, interval=0.02)
            second = DaemonProcess(second_state, extra_args=args)
            async with second:

                async def refused() -> bool:
                    return bool((await second.counters())["tmux"]["state"] == "refused")

                await eventually(refused, interval=0.02)
                why = (f"tmux -L {server.name} is driven by another paneward daemon "
                       f"(pid {first.pid}, state dir {first_state}); leaving it alone")
                assert f"tmux: {why}; waiting" in second.stderr()
                footer = (await second.status())["table"].splitlines()[-1]
                assert f"tmux REFUSED: {why}" in footer, footer
                tmux = (await second.counters())["tmux"]
                assert tmux["badge_batches"] == 0 and tmux["stale_cleared"] == 0, tmux
                assert await server.show(agent, "@paneward_badge") == "▲ needs you"
                assert await second.stop() == 0
            # The second one's end changed nothing of the first's.
            assert await server.show(agent, "@paneward_badge") == "▲ needs you"
            summary = await server.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
            assert summary.strip() == "1 need you"
            assert "[7501]" in await server.arun("show-hooks", "-g")
            assert (await first.counters())["tmux"]["command_errors"] == 0

            # The first one ends: a second daemon started now takes the server over (and,
            # without that session in its store, removes the badge it cannot prove).
            assert await first.stop() == 0
        await server.wait_down({agent: "▲ needs you"})
        async with DaemonProcess(second_state, extra_args=args) as second:

            async def cleared() -> bool:
                return await server.pane_option_names(agent) == []

            await eventually(cleared, interval=0.02)
            assert (await second.counters())["tmux"]["state"] == "connected"
            assert await second.stop() == 0


async def test_a_killed_daemon_shows_in_tmux_and_a_restart_replaces_the_stale_badges(
    server: TmuxServer, tmp_path: Path
) -> None:
    """kill -9 of the daemon: tmux itself (the hook on the daemon's control client) marks the
    badge stale and the summary `paneward: down`; the next daemon replaces the stale badge
    with the re-proved one, never removing it in between."""
    state = tmp_path / "state"
    env = daemon_env(state)
    args = ["--tmux", "-L", server.name, "--notify", "none"]
    with anyio.fail_after(90):
        agent = await _fake_claude_pane(server, env, "s-killed")
        # The snippet's status line, never redrawn by a timer: what the user's terminal shows.
        await server.arun("set-option", "-g", "status-interval", "0")
        await server.arun("set-option", "-g", "status-right",
                          "#{?@paneward_summary,#{@paneward_summary} | ,}%H:%M ")
        async with DaemonProcess(state, discovery=True, env=env, extra_args=args) as daemon, \
                attached_client(server, "main") as user:
            await _type(server, agent, "waiting permission prompt")

            async def needs_you() -> bool:
                return await server.show(agent, "@paneward_badge") == "▲ needs you"

            await eventually(needs_you, interval=0.02)
            await user.wait_output(lambda out: b"1 need you |" in out, "the summary")

            async def committed() -> bool:
                # Killed once the store holds what the badge shows: a kill -9 inside the
                # store's loss window (one batch, docs/store.md) restarts from an older state.
                store = (await daemon.counters())["store"]
                return bool(store["last_flushed_seq"]) and not (
                    store["pending"] or store["in_flight"])

            await eventually(committed, interval=0.01)
            await daemon.kill()
            await user.wait_output(lambda out: b"paneward: down |" in out, "paneward: down")
        await server.wait_down({agent: "▲ needs you"})
        assert await server.show(agent, "@paneward_attention") == "needs_input"

        seen: list[str | None] = []
        async with DaemonProcess(state, discovery=True, env=env, extra_args=args) as daemon:

            async def replaced() -> bool:
                seen.append(await server.show(agent, "@paneward_badge"))
                return seen[-1] == "▲ needs you"

            await eventually(replaced, interval=0.005)
            tmux = (await daemon.counters())["tmux"]
            assert tmux["stale_cleared"] == 0, (tmux, seen)
            summary = await server.arun("show-options", "-g", "-q", "-v", "@paneward_summary")
            assert summary.strip() == "1 need you"
            assert await daemon.stop() == 0
        assert set(seen) <= {"▲ needs you (stale)", "▲ needs you"}, seen


async def test_a_killed_agents_pane_says_exited_and_is_a_plain_shell_once_seen(
    server: TmuxServer, tmp_path: Path
) -> None:
    """A hook-only agent (Gemini's hooks, injected as its node process would send them, naming
    a real process in the pane as their owner) killed with SIGKILL: its pane says it is gone --
    with the finished turn nobody saw still to see -- and, once the user has looked at it, is a
    plain shell again with no option of paneward's. One that ends in the pane the user looks at
    leaves it when the focus moves on."""
    import signal

    import psutil

    import messages
    from actors.core.clock import now_ms
    from tests.support.daemon import raw_send, start_token

    state = tmp_path / "state"
    daemon = DaemonProcess(state, extra_args=["--tmux", "-L", server.name])

    async def agent_pane() -> tuple[str, int]:
        # The shell stays when its agent dies (a user's shell would print its prompt).
        pane = await server.new_pane("sh -c 'sleep 600; exec sleep 601'")
        root = int(await server.arun("display-message", "-p", "-t", pane, "#{pane_pid}"))
        [agent] = psutil.Process(root).children()
        return pane, agent.pid

    async def hook(session: str, pid: int, event: str) -> None:
        at = now_ms()
        frame = messages.encode(messages.NotifyHook(
            harness="gemini", payload={"hook_event_name": event, "session_id": session},
            at_ms=at, observed_at_ms=at, pid=pid, start_token=start_token(pid)))
        await raw_send(daemon.hook_socket, frame + b"\n")

    async def focus_changes() -> int:
        return int((await daemon.counters())["tmux"]["panes"]["focused"])

    async def badge(pane: str, want: str | None) -> None:
        async def check() -> bool:
            return await server.show(pane, "@paneward_badge") == want

        await eventually(check, interval=0.02)

    with anyio.fail_after(60):
        a, a_agent = await agent_pane()
        b, b_agent = await agent_pane()
        async with daemon:
            await hook("g-a", a_agent, "BeforeAgent")
            await badge(a, "● working")
            await hook("g-a", a_agent, "AfterAgent")
            await badge(a, "✔ done")
            os.kill(a_agent, signal.SIGKILL)
            await badge(a, "■ exited · done")
            assert await server.show(a, "@paneward_presence") == "persisted"
            assert await server.show(a, "@paneward_attention") == "turn_done"
            summary = await server.arun("show-options", "-g", "-v", "@paneward_summary")
            assert summary.strip() == "1 done"  # the done is still to see
            await server.arun("select-pane", "-t", a)  # the user looks: seen

            async def bare(pane: str) -> bool:
                return await server.pane_option_names(pane) == []

            await eventually(lambda: bare(a), interval=0.02)

            # Pane B is the one the user looks at when its agent ends: it says exited while
            # looked at, and is a plain shell once the focus moves on.
            await hook("g-b", b_agent, "BeforeAgent")
            await badge(b, "● working")
            changes = await focus_changes()
            await server.arun("select-pane", "-t", b)

            async def focus_taken() -> bool:
                return await focus_changes() > changes

            await eventually(focus_taken, interval=0.02)
            await hook("g-b", b_agent, "AfterAgent")
            await badge(b, "○ idle")  # looked at: no done opens
            os.kill(b_agent, signal.SIGKILL)
            await badge(b, "■ exited")
            await server.arun("select-pane", "-t", a)
            await eventually(lambda: bare(b), interval=0.02)
            ended = {a["key"]["session_id"]: a for a in (await daemon.status())["activities"]}
            assert {k: (v["presence"], v["pane"]) for k, v in ended.items()} == {
                "g-a": ("persisted", None), "g-b": ("persisted", None)}
