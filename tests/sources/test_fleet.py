"""The merged view: a real local daemon following real remote daemons over real sshd.

``status`` (the HOST column, every host's health), ``status --json`` (a remote key carries
``host``, a local one has none), ``--host`` / ``--local``, ``watch --json`` (a remote edge is a
line with its host's seq), stale-not-idle when a remote daemon stops, and a remote session with
the very key of a local one staying the host's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

import messages
from actors.core.fleet import hosts as core
from actors.sources import procfs
from tests.support.daemon import PANEWARD, DaemonProcess, raw_send
from tests.support.polling import poll_until
from tests.support.sessions import pane_bound_frame, spawned_frame, status_frame
from tests.support.ssh import Sshd, ssh_fleet
from tests.support.tmux import TmuxServer


@pytest.fixture
def short_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="pwv", dir="/tmp") as name:
        yield Path(name)


@asynccontextmanager
async def fleet(
    root: Path, count: int, *, tmux: str = "tmux", extra_args: tuple[str, ...] = ()
) -> AsyncIterator[tuple[DaemonProcess, list[DaemonProcess], dict[str, str]]]:
    async with ssh_fleet(root, count, keepalive_s=2, tmux=tmux) as made, DaemonProcess(
        made.local_state, env=made.env, extra_args=extra_args
    ) as local:
        yield local, made.remotes, made.env


def _paneward(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 0, (args, done.returncode, done.stdout, done.stderr)
    return done.stdout


async def cli(env: dict[str, str], *args: str) -> str:
    return await anyio.to_thread.run_sync(lambda: _paneward(env, *args))


async def test_status_and_watch_merge_the_fleet_host_qualified(short_dir: Path) -> None:
    with anyio.fail_after(180):
        async with fleet(short_dir, 2) as (local, (h1, h2), env):
            # the same key on this machine and on h1: two sessions, never one
            for daemon, session, state in ((local, "shared", "working"),
                                           (h1, "shared", "blocked"), (h2, "other", "working")):
                await raw_send(daemon.hook_socket,
                               spawned_frame(session) + status_frame(session, state, 1))

            async def merged() -> bool:
                found = json.loads(await cli(env, "status", "--json"))
                return len(found) == 3

            await poll_until(merged, "three sessions in the merged view", within=60)
            activities = json.loads(await cli(env, "status", "--json"))
            by_host = {a["key"].get("host"): a for a in activities}
            assert set(by_host) == {None, "h1", "h2"}
            assert "host" not in by_host[None]["key"]  # the local contract, unchanged
            assert by_host[None]["turn"] == "working"
            assert by_host["h1"]["turn"] == "needs_input"
            assert by_host["h1"]["key"]["session_id"] == "shared"
            for entry in activities:
                messages.decode_outbound(json.dumps(entry))  # the one codec reads them all
            local_only = json.loads(await cli(env, "status", "--json", "--local"))
            assert [a["key"] for a in local_only] == [{"harness": "terminal",
                                                      "session_id": "shared"}]
            only_h2 = json.loads(await cli(env, "status", "--json", "--host", "h2"))
            assert [a["key"]["host"] for a in only_h2] == ["h2"]
            # wait names a remote session as HOST/harness:id, and prints it with its host
            waited = json.loads(await cli(env, "wait", "--session", "h1/terminal:shared",
                                          "--until", "needs_input", "--timeout", "30"))
            assert waited["key"] == {"harness": "terminal", "session_id": "shared",
                                     "host": "h1"}
            table = await cli(env, "status")
            assert table.splitlines()[0].startswith("HOST")
            assert "hosts: h1 connected" in table and "h2 connected" in table
            # a remote edge: one watch line, the host's seq, the key's host
            async with await anyio.open_process(
                [os.fspath(PANEWARD), "watch", "--json", "--host", "h2"], env=env
            ) as watch:
                assert watch.stdout is not None
                await poll_until(_subscribed(local), "the watcher")
                await raw_send(h2.hook_socket, status_frame("other", "idle", 4))
                data = b""
                while b"\n" not in data:
                    data += await watch.stdout.receive()
                watch.terminate()
            line = messages.decode_outbound(data.splitlines()[0])
            assert isinstance(line, messages.Transition)
            assert line.key == messages.SessionKey("terminal", "other", host="h2")
            assert line.seq == (await h2.status())["seq"]
            # stale, never idle: h1's daemon stops
            await h1.stop()

            async def stale() -> bool:
                shown = json.loads(await cli(env, "status", "--json", "--host", "h1"))
                return bool(shown) and shown[0]["turn"] == "unknown"

            await poll_until(stale, "h1 stale", within=60)
            (kept,) = json.loads(await cli(env, "status", "--json", "--host", "h1"))
            assert kept["presence"] == by_host["h1"]["presence"]
            assert kept["attention"] == by_host["h1"]["attention"]

            async def said() -> bool:
                table = await cli(env, "status")
                return "h1 stale since" in table and "daemon not running there" in table

            await poll_until(said, "the reason in the table", within=60)
            # the local session never moved
            (mine,) = json.loads(await cli(env, "status", "--json", "--local"))
            assert mine == by_host[None]


async def test_an_ssh_host_added_then_another_removed_while_the_daemon_runs(
    short_dir: Path,
) -> None:
    """The hosts file changes under a running daemon (written as ``paneward fleet add``
    writes it): the host added is followed at once and its sessions appear; the host removed
    leaves the view with its sessions (a ``Forget`` line each on ``watch --json``)."""
    with anyio.fail_after(180):
        async with ssh_fleet(short_dir, 2, keepalive_s=2) as made:
            h1, h2 = made.remotes
            path = short_dir / "config" / "paneward" / "fleet.toml"

            def write(*hosts: core.Host) -> None:
                temporary = path.with_suffix(".tmp")
                temporary.write_text(core.render_fleet(core.Fleet(hosts, made.hosts.keepalive_s)))
                temporary.replace(path)

            first, second = made.hosts.hosts
            write(first)
            await raw_send(h1.hook_socket, spawned_frame("one") + status_frame("one", "working", 1))
            await raw_send(h2.hook_socket, spawned_frame("two") + status_frame("two", "blocked", 1))
            async with DaemonProcess(made.local_state, env=made.env) as local:

                async def shown() -> set[tuple[str, str]]:
                    rows = json.loads(await cli(made.env, "status", "--json"))
                    return {(r["key"]["host"], r["key"]["session_id"]) for r in rows}

                async def hosts() -> list[tuple[str, str]]:
                    return [(h["host"], h["health"]) for h in (await local.status())["hosts"]]

                await poll_until(lambda: _equal(shown, {("h1", "one")}), "h1 followed",
                                 within=60)
                await anyio.to_thread.run_sync(write, first, second)
                await poll_until(lambda: _equal(shown, {("h1", "one"), ("h2", "two")}),
                                 "h2's session, once h2 is added", within=60)
                await poll_until(lambda: _equal(hosts, [("h1", "connected"),
                                                        ("h2", "connected")]), "both hosts")
                async with await anyio.open_process(
                    [os.fspath(PANEWARD), "watch", "--json", "--host", "h1"], env=made.env
                ) as watch:
                    assert watch.stdout is not None
                    await poll_until(_subscribed(local), "the watcher")
                    await anyio.to_thread.run_sync(write, second)
                    data = b""
                    while b"\n" not in data:
                        data += await watch.stdout.receive()
                    watch.terminate()
                gone = messages.decode_outbound(data.splitlines()[0])
                assert isinstance(gone, messages.Transition) and gone.cause == "Forget"
                assert gone.key == messages.SessionKey("terminal", "one", host="h1")
                assert await shown() == {("h2", "two")}
                assert await hosts() == [("h2", "connected")]
                stats = (await local.counters())["fleet_file"]
                assert (stats["reloads"], stats["started"], stats["stopped"]) == (2, 1, 1)


async def _equal(read: Callable[[], Awaitable[object]], want: object) -> bool:
    return await read() == want


def _subscribed(daemon: DaemonProcess) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return int((await daemon.counters())["control"]["subscribers"]) >= 1

    return check


def test_an_inbound_message_naming_a_remote_key_is_refused() -> None:
    frame = {"type": "Acknowledge", "at_ms": 1795995370911,
             "key": {"harness": "terminal", "session_id": "x", "host": "h1"}}
    with pytest.raises(messages.MessageError, match=r"\$\.key\.host"):
        messages.decode_inbound(json.dumps(frame))
    del frame["key"]["host"]  # type: ignore[attr-defined]
    assert isinstance(messages.decode_inbound(json.dumps(frame)), messages.Acknowledge)


async def test_summary_and_next_to_a_remote_item_opens_one_local_window_attached_to_that_pane(
    short_dir: Path,
) -> None:
    """A remote session needs you in a pane of the remote host's tmux: the local
    ``@paneward_summary`` counts it (``1 need you (1 on h1)``); ``paneward next`` in a real
    local tmux opens a window running ``ssh -t h1 tmux attach`` on that pane (a client of
    the remote server shows it), and a second ``next`` reuses that window."""
    remote_tmux = TmuxServer()
    local_tmux = TmuxServer()
    remote_tmux.start()
    local_tmux.start()
    try:
        with anyio.fail_after(120):
            remote_pane = (await remote_tmux.arun("display-message", "-p", "-t", "main",
                                                  "#{pane_id}")).strip()
            async with fleet(short_dir, 1, tmux=f"tmux -L {remote_tmux.name}",
                             extra_args=("--tmux", "-L", local_tmux.name)) as (
                _local, (h1,), env
            ):
                await raw_send(h1.hook_socket, spawned_frame("s1")
                               + pane_bound_frame("s1", remote_pane)
                               + status_frame("s1", "blocked", 1))

                async def queued() -> bool:
                    items = json.loads(await cli(env, "status", "--json", "--host", "h1"))
                    return bool(items) and items[0]["pane"] == remote_pane and \
                        items[0]["attention"] is not None

                await poll_until(queued, "the remote item", within=60)

                async def summary() -> bool:
                    said = await local_tmux.arun("show-options", "-g", "-q", "-v",
                                                 "@paneward_summary", check=False)
                    return said.strip() == "1 need you (1 on h1)"

                # the local status line counts the remote session, and says where it is
                await poll_until(summary, "the summary with h1's session", within=60)
                await cli(env, "next", "-L", local_tmux.name)

                async def attached() -> bool:
                    clients = await remote_tmux.arun("list-clients", "-F", "#{pane_id}")
                    return clients.split() == [remote_pane]

                await poll_until(attached, "a client of the remote tmux on that pane",
                                 within=60)
                windows = await local_tmux.arun("list-windows", "-a", "-F",
                                                "#{window_name} #{@paneward_remote}")
                remote_windows = [w for w in windows.splitlines() if "terminal:s1" in w]
                assert remote_windows == [f"h1:{remote_pane} h1/terminal:s1"], windows
                await cli(env, "next", "-L", local_tmux.name)
                again = await local_tmux.arun("list-windows", "-a", "-F", "#{@paneward_remote}")
                assert again.split().count("h1/terminal:s1") == 1  # reused, not another one
    finally:
        local_tmux.kill()
        remote_tmux.kill()


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        kids = procfs.children(todo.pop())
        found += kids
        todo += kids
    return found


def _remote_watches(server: Sshd) -> list[int]:
    """The ``paneward watch --fleet`` processes the host's sshd runs (its sessions' children)."""
    assert server.process is not None
    found = []
    for pid in _descendants(server.process.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"watch" in argv and b"--fleet" in argv:
            found.append(pid)
    return found


async def test_a_jump_window_survives_a_stream_restart_and_never_hides_a_lost_link(
    short_dir: Path,
) -> None:
    """``paneward next`` opens a local window attached to h1's pane over h1's one connection.
    The link's stream is restarted (its ssh killed): the window stays attached. h1's
    ``paneward watch`` is killed while that window is open: the link is lost at once (h1's
    session turns ``unknown`` on ``watch --json``) and followed again."""
    remote_tmux = TmuxServer()
    local_tmux = TmuxServer()
    remote_tmux.start()
    local_tmux.start()
    try:
        with anyio.fail_after(180):
            remote_pane = (await remote_tmux.arun("display-message", "-p", "-t", "main",
                                                  "#{pane_id}")).strip()
            async with ssh_fleet(short_dir, 1, keepalive_s=2,
                                 tmux=f"tmux -L {remote_tmux.name}") as made, DaemonProcess(
                made.local_state, env=made.env, extra_args=("--tmux", "-L", local_tmux.name)
            ) as local:
                (h1,), env, sshd = made.remotes, made.env, made.world.servers["h1"]
                await raw_send(h1.hook_socket, spawned_frame("s1")
                               + pane_bound_frame("s1", remote_pane)
                               + status_frame("s1", "blocked", 1))

                async def link() -> dict[str, Any]:
                    (one,) = (await local.counters())["fleet"]["links"]
                    assert isinstance(one, dict)
                    return one

                async def queued() -> bool:
                    items = json.loads(await cli(env, "status", "--json", "--host", "h1"))
                    return bool(items) and items[0]["attention"] is not None

                await poll_until(queued, "the remote item", within=60)
                await cli(env, "next", "-L", local_tmux.name)

                async def attached() -> bool:
                    clients = await remote_tmux.arun("list-clients", "-F", "#{pane_id}")
                    return clients.split() == [remote_pane]

                async def window_open() -> bool:
                    windows = await local_tmux.arun("list-windows", "-a", "-F",
                                                    "#{@paneward_remote}")
                    return "h1/terminal:s1" in windows.split()

                await poll_until(attached, "the window attached to h1's pane", within=60)
                before = await link()
                os.kill(before["ssh_pid"], signal.SIGKILL)  # the stream restarts

                async def followed_again(after: int) -> bool:
                    now = await link()
                    return bool(now["connections"] > after and now["health"] == "connected")

                await poll_until(lambda: followed_again(before["connections"]),
                                 "the stream followed again", within=60)
                assert await attached() and await window_open()
                assert sshd.connections() == 1  # the window and the stream: one connection
                again = await link()
                async with await anyio.open_process(
                    [os.fspath(PANEWARD), "watch", "--json", "--host", "h1"], env=env
                ) as watch:
                    assert watch.stdout is not None
                    await poll_until(_subscribed(local), "the watcher")
                    # the stream's, and any an earlier stream left (it ends at its next write)
                    for remote_watch in _remote_watches(sshd):
                        os.kill(remote_watch, signal.SIGKILL)
                    data = b""
                    while b'"turn":"unknown"' not in data:
                        data += await watch.stdout.receive()
                    watch.terminate()
                assert await window_open()  # the window stayed; the link was lost all the same
                await poll_until(lambda: followed_again(again["connections"]),
                                 "h1 followed again", within=60)
                assert await attached() and sshd.connections() == 1
    finally:
        local_tmux.kill()
        remote_tmux.kill()


def test_the_summary_counts_the_fleet_and_says_where() -> None:
    from actors.core.tmux.badges import fleet_summary

    def remote(host: str, turn: str, kind: str | None = None) -> messages.Activity:
        attention = None if kind is None else messages.Attention(kind, "r", 1795995370911)  # type: ignore[arg-type]
        return messages.Activity(
            key=messages.SessionKey("codex", f"{host}-{turn}", host=host), presence="running",
            turn=turn, evidence=messages.Evidence(source="codex_daemon"),  # type: ignore[arg-type]
            attention=attention)

    local = {"needs you": 1, "failed": 0, "done": 0, "working": 2}
    fleet_ = [remote("gpu1", "needs_input", "needs_input"), remote("box", "working"),
              remote("gpu1", "unknown")]
    assert fleet_summary(local, fleet_) == "2 need you (1 on gpu1) · 3 working (1 on box)"
    assert fleet_summary({}, []) == ""


def test_top_shows_a_remote_session_live_on_its_host_and_never_as_a_local_pane() -> None:
    from actors.core.views.top import TopModel

    def activity(key: messages.SessionKey, turn: str) -> messages.Activity:
        return messages.Activity(key=key, presence="running", turn=turn,  # type: ignore[arg-type]
                                 evidence=messages.Evidence(source="pty_status"), pane="%3")

    local_key = messages.SessionKey("terminal", "t")
    remote_key = messages.SessionKey("terminal", "t", host="gpu1")
    model = TopModel()
    model.snapshot(messages.Snapshot(seq=500, activities=(activity(local_key, "idle"),
                                                           activity(remote_key, "idle"))))
    # the host's seq (7) is below this machine's snapshot seq (500): still a live change
    model.transition(messages.Transition(seq=7, key=remote_key, cause="ProgramStatus:working",
                                         after=activity(remote_key, "working")), 1795995370911)
    rows = {row.key: row for row in model.rows(1795995370911, locations={"%3": "main:0.0"})}
    assert rows[remote_key].state.startswith("working")
    assert (rows[remote_key].host, rows[remote_key].pane, rows[remote_key].where) == (
        "gpu1", None, "%3")
    assert (rows[local_key].host, rows[local_key].pane, rows[local_key].where) == (
        "local", "%3", "main:0.0 (%3)")


def test_picks_menu_takes_a_remote_item_to_its_host_and_never_to_a_local_pane() -> None:
    """A remote item's menu line says where it is (``gpu1 %3``, never the location of this
    machine's ``%3``) and runs ``next --host gpu1 --pane %3``."""
    from actors.core.views.jump import menu_command

    def item(key: messages.SessionKey) -> messages.Activity:
        return messages.Activity(
            key=key, presence="running", turn="needs_input", pane="%3",
            evidence=messages.Evidence(source="pty_status"),
            attention=messages.Attention("needs_input", "permission", 1795995370911))

    queue = [item(messages.SessionKey("terminal", "t")),
             item(messages.SessionKey("terminal", "t", host="gpu1"))]
    argv = menu_command("c", queue, {"%3": "main:0.0"}, ["paneward", "next"], 1795995370911)
    labels, commands = argv[9::3], argv[11::3]
    assert "main:0.0 (%3)" in labels[0] and "gpu1 %3" in labels[1]
    assert "main:0.0" not in labels[1]
    assert "--pane %3" in commands[0]
    assert "--host" not in commands[0] and "--host gpu1 --pane %3" in commands[1]


def test_the_attention_queue_tells_a_hosts_pane_from_this_machines_of_the_same_id() -> None:
    from actors.core.views.attention import attention_queue

    def asking(key: messages.SessionKey, at_ms: int) -> messages.Activity:
        return messages.Activity(
            key=key, presence="running", turn="needs_input", pane="%0",
            evidence=messages.Evidence(source="pty_status", at_ms=at_ms),
            attention=messages.Attention("needs_input", "permission", at_ms))

    here = asking(messages.SessionKey("terminal", "l1"), 1795995370912)
    there = asking(messages.SessionKey("terminal", "r1", host="h1"), 1795995370911)
    assert attention_queue([here, there]) == [there, here]


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True,
                          text=True, check=False, timeout=60)


async def test_pick_wait_ack_and_top_on_a_fleet_keep_each_host_and_this_machine_apart(
    short_dir: Path,
) -> None:
    """This machine's session needs you in its pane and h1's in h1's pane of the same id (two
    fresh tmux servers: both ``%0``). ``wait --pane`` is this machine's pane unless ``--host``
    names h1; ``--host`` / ``--local`` keep one side for ``wait`` and ``next``; ``ack`` of h1's
    session says it is h1's; ``pick``'s menu lists both, and choosing h1's item opens a local
    window attached to that pane of h1; ``top`` has a HOST column and the hosts' health, keeps
    one side with ``--host``, and Enter on h1's item goes to that same window."""
    from textual.widgets import DataTable  # the `top` extra (the `test` extra has it)

    from actors.cli.common import status_line
    from actors.cli.main import build_parser
    from actors.cli.top import TopApp
    from tests.support.tmux import attached_client, drawn_text

    remote_tmux = TmuxServer()
    local_tmux = TmuxServer()
    remote_tmux.start()
    local_tmux.start()
    try:
        with anyio.fail_after(240):
            remote_pane = (await remote_tmux.arun("display-message", "-p", "-t", "main",
                                                  "#{pane_id}")).strip()
            local_pane = (await local_tmux.arun("display-message", "-p", "-t", "main",
                                                "#{pane_id}")).strip()
            assert local_pane == remote_pane  # the same id, two servers
            async with fleet(short_dir, 1, tmux=f"tmux -L {remote_tmux.name}",
                             extra_args=("--tmux", "-L", local_tmux.name)) as (local, (h1,), env):
                # h1's asked first: the queue's first item
                await raw_send(h1.hook_socket, spawned_frame("r1")
                               + pane_bound_frame("r1", remote_pane)
                               + status_frame("r1", "blocked", 1))
                await raw_send(local.hook_socket, spawned_frame("l1")
                               + pane_bound_frame("l1", local_pane)
                               + status_frame("l1", "blocked", 2))

                async def both() -> bool:
                    found = json.loads(await cli(env, "status", "--json"))
                    return sorted(str(a["key"].get("host")) for a in found
                                  if a["attention"] and a["pane"]) == ["None", "h1"]

                await poll_until(both, "both items in the merged view", within=60)
                mine = {"harness": "terminal", "session_id": "l1"}
                theirs = {"harness": "terminal", "session_id": "r1", "host": "h1"}
                for which, key in (
                    (("--pane", local_pane), mine),
                    (("--host", "h1", "--pane", remote_pane), theirs),
                    (("--any", "--local"), mine),
                    (("--any", "--host", "h1"), theirs),
                ):
                    waited = json.loads(await cli(env, "wait", *which, "--until", "needs_input",
                                                  "--timeout", "30"))
                    assert waited["key"] == key, which
                done = await anyio.to_thread.run_sync(
                    lambda: _run(env, "wait", "--local", "--session", "r1", "--until", "turn=idle"))
                assert done.returncode == 4, done.stderr
                # ack acts on this machine's sessions: h1's is h1's to acknowledge
                done = await anyio.to_thread.run_sync(lambda: _run(env, "ack", "r1"))
                assert done.returncode == 4 and "fleet host h1" in done.stderr, done.stderr
                # next --local: this machine's pane (h1's item is older: next alone goes there)
                said = await cli(env, "next", "--local", "-L", local_tmux.name)
                assert said.startswith(f"{local_pane}: terminal:l1 needs you"), said

                async with attached_client(local_tmux, "main") as user:
                    mark = len(user.output)

                    def menu_text(out: bytes) -> str:
                        drawn = drawn_text(out[mark:])
                        title = drawn.find("paneward:attention")
                        return drawn[title:] if title >= 0 else ""

                    here, there = f"main:0.0({local_pane})", f"h1{remote_pane}"
                    pick = await anyio.open_process(
                        [os.fspath(PANEWARD), "pick", "-L", local_tmux.name, "--client",
                         user.name], env=env)
                    try:
                        await user.wait_output(
                            lambda out: here in menu_text(out) and there in menu_text(out),
                            "the menu with both items")
                        drawn = menu_text(bytes(user.output))
                        assert drawn.index(there) < drawn.index(here)  # the older first
                        await user.type(b"1")
                        assert await pick.wait() == 0
                    finally:
                        if pick.returncode is None:
                            pick.kill()
                        with anyio.CancelScope(shield=True):
                            await pick.aclose()

                    async def attached() -> bool:
                        clients = await remote_tmux.arun("list-clients", "-F", "#{pane_id}")
                        return clients.split() == [remote_pane]

                    await poll_until(attached, "a client of h1's tmux on that pane", within=60)
                    windows = await local_tmux.arun("list-windows", "-a", "-F",
                                                    "#{window_name} #{@paneward_remote}")
                    assert f"h1:{remote_pane} h1/terminal:r1" in windows.splitlines(), windows

                    parser = build_parser("top")
                    socket = os.fspath(local.hook_socket)
                    args = parser.parse_args(["top", "--socket", socket, "-L", local_tmux.name])
                    assert [h["host"] for h in json.loads(status_line(args, b"hosts"))] == ["h1"]
                    app = TopApp(args, fleet=True)
                    async with app.run_test(size=(220, 30)):
                        await poll_until(lambda: {(r.host, r.where) for r in app.rows} >= {
                            ("local", f"main:0.0 ({local_pane})"), ("h1", remote_pane)},
                            "both rows, each on its host")
                        columns = [str(c.label) for c in app.query_one(DataTable).columns.values()]
                        assert columns[:2] == ["HOST", "ATTENTION"]
                        await poll_until(lambda: app.hosts.startswith("hosts: h1 connected"),
                                         "h1's health")
                    only_h1 = parser.parse_args(["top", "--socket", socket, "-L", local_tmux.name,
                                                 "--host", "h1", "--client", user.name])
                    app = TopApp(only_h1, fleet=True)
                    async with app.run_test(size=(220, 30)) as pilot:
                        await poll_until(lambda: [r.host for r in app.rows] == ["h1"],
                                         "h1's row alone")
                        await pilot.press("enter")
                        await poll_until(lambda: app.note.startswith(f"jumped to h1 {remote_pane}"),
                                         "the jump to h1's pane")
                        await pilot.press("a")  # h1's state is h1's daemon's
                        await poll_until(lambda: "acknowledge it there" in app.note, "said so")
                    again = await local_tmux.arun("list-windows", "-a", "-F",
                                                  "#{@paneward_remote}")
                    assert again.split().count("h1/terminal:r1") == 1  # the same window
    finally:
        local_tmux.kill()
        remote_tmux.kill()
