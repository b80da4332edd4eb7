"""NATS as the fleet's second transport: a follower daemon whose hosts file names a NATS server
merges every host publishing there into the same view as the SSH fleet, against a real
``nats-server -js`` (tests/support/nats.py) and real daemons (tests/support/daemon.py).

- several daemons publish, one follower merges them: ``status --json`` and ``watch --json``
  show host-qualified sessions, and the table its hosts;
- a follower that was down catches up from the server (the bucket, then the stream);
- the server restarted in the middle of a burst: every transition reaches the follower's
  ``watch --json`` exactly once (audit by host and seq);
- a publisher whose heartbeat lapses: its host stale, its sessions ``turn: unknown``, never
  idle; back to connected on its next beat;
- refused credentials: the entry ``unreachable`` with the server's reason and the file named;
- the hosts file changed while the follower runs: a server added is followed at once, a bad
  file is counted and changes nothing, the entry removed takes its hosts out of the view.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.fleet import hosts as core
from tests.support.daemon import (
    PANEWARD,
    DaemonProcess,
    daemon_env,
    raw_send,
    start_token,
    watching,
)
from tests.support.nats import NatsServer, nats_server, nkey_pair, published, send_paced
from tests.support.polling import poll_until
from tests.support.sessions import burst, claude_hook, frames
from tests.support.ssh import ssh_fleet

pytestmark = pytest.mark.timeout(300)


def _publisher(root: Path, server: NatsServer, host: str, *extra: str) -> DaemonProcess:
    return DaemonProcess(root / host / "state", extra_args=[
        "--nats", server.url, "--nats-host", host, "--nats-heartbeat", "0.5", *extra])


def _write_fleet(root: Path, fleet: core.Fleet) -> Path:
    config = root / "follower-config" / "paneward"
    config.mkdir(parents=True, exist_ok=True)
    path = config / "fleet.toml"
    temporary = path.with_suffix(".tmp")
    temporary.write_text(core.render_fleet(fleet))
    temporary.replace(path)  # as `paneward fleet add` writes it
    return path


def _follower(root: Path, *extra: str) -> DaemonProcess:
    directory = root / "follower" / "state"
    env = daemon_env(directory, XDG_CONFIG_HOME=os.fspath(root / "follower-config"))
    return DaemonProcess(directory, env=env, extra_args=extra)


@asynccontextmanager
async def _running(*daemons: DaemonProcess) -> AsyncIterator[None]:
    try:
        for daemon in daemons:
            await daemon.start()
        yield
    finally:
        with anyio.CancelScope(shield=True):
            for daemon in daemons:
                if daemon.process is not None and daemon.process.returncode is None:
                    await daemon.stop()


async def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run([os.fspath(PANEWARD), *argv], env=env, capture_output=True,
                               text=True, timeout=60, check=False)
    )


async def _merged(follower: DaemonProcess) -> list[dict[str, Any]]:
    done = await _cli(follower.env, "status", "--json")
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


async def _hosts(follower: DaemonProcess) -> dict[str, dict[str, Any]]:
    return {h["host"]: h for h in (await follower.status())["hosts"]}


def _seen(rows: list[dict[str, Any]]) -> dict[tuple[str | None, str], str]:
    return {(r["key"].get("host"), r["key"]["session_id"]): r["turn"] for r in rows}


async def test_several_publishers_merge_into_one_follower_view(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hosts = ["alpha", "beta.lab"]
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        publishers = [_publisher(tmp_path, server, h) for h in hosts]
        _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
        # the follower publishes there too: its own sessions stay local, never a remote host
        follower = _follower(tmp_path, "--nats", server.url, "--nats-host", "me")
        async with _running(*publishers, follower):
            for i, daemon in enumerate([*publishers, follower]):
                hooks = burst([f"s{i}-a", f"s{i}-b"], 2, me, token)
                await raw_send(daemon.hook_socket, frames(hooks))
                await daemon.wait_delivered(len(hooks))
            want = {(h, f"s{i}-{x}"): "idle" for i, h in enumerate([*hosts, None]) for x in "ab"}

            async def merged() -> bool:
                return _seen(await _merged(follower)) == want

            await poll_until(merged, "every publisher's sessions in the follower's view",
                             within=60)
            await published(follower)
            rows = await _merged(follower)
            assert sorted(str(r["key"].get("host")) for r in rows) == sorted(
                [*hosts, *hosts, "None", "None"])
            assert {h: r["health"] for h, r in (await _hosts(follower)).items()} == {
                "alpha": "connected", "beta.lab": "connected"}
            table = (await _cli(follower.env, "status")).stdout
            assert table.splitlines()[0].startswith("HOST")
            assert "hosts: alpha connected" in table and "beta.lab connected" in table
            # a live edge on one publisher: one host-qualified line on the follower's watch
            async with watching(follower) as watcher:
                hook = claude_hook("s0-a", "UserPromptSubmit", 1000, me, token)  # working
                await raw_send(publishers[0].hook_socket, frames([hook]))
                await watcher.wait_for(
                    lambda items: any(i.get("key", {}).get("host") == "alpha"
                                      and i["after"]["turn"] == "working" for i in items),
                    "the edge from alpha", within=30)
                edge = next(i for i in watcher.items if i.get("key", {}).get("host") == "alpha")
                assert edge["key"] == {"harness": "claude-code", "session_id": "s0-a",
                                       "host": "alpha"}
                assert edge["cause"] != "Snapshot"
            counters = (await follower.counters())["fleet"]
            link = counters["links"][0]
            assert link["server"] == server.url and link["state"] == "connected"
            assert sum(h["rejected"].get("invalid", 0) for h in link["hosts"]) == 0
            assert link["refused"]["own"] >= 4 and "me" not in await _hosts(follower)


async def test_a_follower_that_was_down_catches_up(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        publisher = _publisher(tmp_path, server, "p")
        _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
        follower = _follower(tmp_path)
        async with _running(publisher):
            hooks = burst(["c1", "c2"], 3, me, token)
            await raw_send(publisher.hook_socket, frames(hooks[:2]))  # both SessionStart
            await publisher.wait_delivered(2)
            async with _running(follower):
                await poll_until(lambda: _has(follower, {("p", "c1"), ("p", "c2")}),
                                 "the follower's first view")
            # the follower is down while the publisher goes on
            await raw_send(publisher.hook_socket, frames(hooks[2:]))
            await publisher.wait_delivered(len(hooks))
            await published(publisher)
            async with _running(follower):

                async def caught_up() -> bool:
                    return _seen(await _merged(follower)) == {("p", "c1"): "idle",
                                                              ("p", "c2"): "idle"}

                await poll_until(caught_up, "the follower caught up", within=60)


async def _has(follower: DaemonProcess, keys: set[tuple[str, str]]) -> bool:
    return set(_seen(await _merged(follower))) == keys


async def test_a_server_restart_mid_burst_reaches_the_follower_exactly_once(
    tmp_path: Path,
) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst([f"r{i}" for i in range(4)], 250, me, token)  # 2,004 transitions each
    with anyio.fail_after(240), nats_server(tmp_path / "nats") as server:
        publishers = [_publisher(tmp_path, server, f"host{i}", "--nats-buffer", "20000")
                      for i in range(2)]
        _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
        follower = _follower(tmp_path)
        async with _running(*publishers, follower):
            await poll_until(lambda: _all_connected(follower, 2), "both hosts connected")
            async with watching(follower) as watcher:
                async with anyio.create_task_group() as tg:
                    for daemon in publishers:
                        tg.start_soon(anyio.to_thread.run_sync, send_paced,
                                      daemon.hook_socket, frames(hooks))

                    def some(items: list[dict[str, Any]]) -> bool:
                        return len(_edges(items)) > 500

                    await watcher.wait_for(some, "the burst under way", within=60)
                    await anyio.to_thread.run_sync(server.restart)
                for daemon in publishers:
                    await daemon.wait_delivered(len(hooks), within=120)
                    await published(daemon)
                total = 2 * len(hooks)
                await watcher.wait_for(lambda items: len(set(_edges(items))) >= total,
                                       "every transition on the follower's watch", within=120)
                edges = _edges(watcher.items)
                assert len(edges) == len(set(edges)) == total  # once each
                assert set(edges) == {(f"host{i}", s) for i in range(2)
                                      for s in range(1, len(hooks) + 1)}
            link = (await follower.counters())["fleet"]["links"][0]
            assert link["connections"] >= 2  # the restart was a drop, resumed


def _edges(items: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(host, seq) of every remote edge a watcher printed (not a snapshot or a health
    change's reshow)."""
    return [(i["key"]["host"], int(i["seq"])) for i in items
            if i.get("type") == "Transition" and i["key"].get("host") is not None
            and i["cause"] not in ("Snapshot", "HostHealth")]


async def _all_connected(follower: DaemonProcess, count: int) -> bool:
    hosts = await _hosts(follower)
    return len(hosts) == count and all(h["health"] == "connected" for h in hosts.values())


async def test_a_lapsed_heartbeat_is_stale_never_idle(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        publisher = _publisher(tmp_path, server, "gone")
        _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
        follower = _follower(tmp_path)
        async with _running(publisher, follower):
            hooks = burst(["x"], 1, me, token)
            await raw_send(publisher.hook_socket, frames(hooks[:-1]))  # ends working
            await publisher.wait_delivered(len(hooks) - 1)

            async def working() -> bool:
                return _seen(await _merged(follower)) == {("gone", "x"): "working"}

            await poll_until(working, "the session working in the follower's view")
            await publisher.kill()  # no more heartbeats, nothing said

            async def stale() -> bool:
                return bool((await _hosts(follower))["gone"]["health"] == "stale")

            await poll_until(stale, "the host stale", within=30)
            host = (await _hosts(follower))["gone"]
            assert "no heartbeat for 2 intervals" in host["reason"]
            rows = await _merged(follower)
            assert [(r["turn"], r["presence"]) for r in rows] == [("unknown", "running")]
            table = (await _cli(follower.env, "status")).stdout
            assert "gone stale since" in table and " idle " not in table
            # the same daemon back: connected again, its truth shown
            await publisher.start()
            await poll_until(lambda: _all_connected(follower, 1), "connected again", within=30)


async def test_refused_credentials_show_unreachable_with_the_reason(tmp_path: Path) -> None:
    _good_seed, good_public = nkey_pair()
    bad_seed, _ = nkey_pair()
    bad = tmp_path / "bad.nk"
    bad.write_text(bad_seed + "\n")
    bad.chmod(0o600)
    config = f"authorization {{ users = [ {{ nkey: {good_public} }} ] }}\n"
    with anyio.fail_after(60), nats_server(tmp_path / "nats", config=config) as server:
        entry = core.NatsEntry(server.url, nkey=os.fspath(bad))
        _write_fleet(tmp_path, core.Fleet(nats=(entry,)))
        follower = _follower(tmp_path)
        async with _running(follower):

            async def refused() -> bool:
                row = (await _hosts(follower)).get(server.url, {})
                return row.get("health") == "unreachable" and bool(row.get("reason"))

            await poll_until(refused, "the entry unreachable")
            reason = (await _hosts(follower))[server.url]["reason"]
            assert f"refused the credentials (nkey seed file {bad})" in reason
            assert "authorization" in reason.lower()
            table = (await _cli(follower.env, "status")).stdout
            assert f"{server.url} unreachable" in table
            check = await _cli(follower.env, "fleet", "check")
            assert check.returncode == 1
            assert "unreachable: " in check.stdout and "refused the credentials" in check.stdout


async def test_the_hosts_file_is_followed_while_the_daemon_runs(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        publisher = _publisher(tmp_path, server, "late")
        follower = _follower(tmp_path)  # no hosts file at all
        async with _running(publisher, follower):
            await raw_send(publisher.hook_socket, frames(burst(["f"], 0, me, token)))
            await publisher.wait_delivered(1)
            assert "hosts" not in await follower.status()  # no fleet: the local view only
            path = _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
            await poll_until(lambda: _has(follower, {("late", "f")}), "the server followed")
            stats = (await follower.counters())["fleet_file"]
            assert (stats["errors"], stats["started"]) == (0, 1)
            good = path.read_text()
            path.write_text(good + "[[nats]]\nurl = 'nats://me:secret@127.0.0.1:1'\n")

            async def counted() -> bool:
                return int((await follower.counters())["fleet_file"]["errors"]) == 1

            await poll_until(counted, "the bad file counted")
            stats = (await follower.counters())["fleet_file"]
            assert "never in the URL" in stats["last_error"] and "secret" not in stats["last_error"]
            assert stats["stopped"] == 0 and await _has(follower, {("late", "f")})
            assert "never in the URL" in follower.stderr()
            # and on status's hosts lines, with since when and what is followed meanwhile
            table = (await _cli(follower.env, "status")).stdout
            (line,) = [t for t in table.splitlines() if t.startswith("fleet: ")]
            assert f"{path}: nats 2: " in line and "never in the URL" in line, table
            assert line.endswith("; the last good file is in use)") and "(since " in line
            path.write_text("")  # every entry removed: the hosts leave the view

            async def emptied() -> bool:
                return await _merged(follower) == []

            await poll_until(emptied, "the server's hosts out of the view")
            stats = (await follower.counters())["fleet_file"]
            assert (stats["reloads"], stats["stopped"], stats["last_error"]) == (2, 1, None)
            assert "fleet: " not in (await _cli(follower.env, "status")).stdout


async def test_a_hosts_file_bad_from_the_start_is_on_status_until_fixed(tmp_path: Path) -> None:
    path = _write_fleet(tmp_path, core.Fleet())
    path.write_text("[[host]]\ndestination = 'a b'\n")
    follower = _follower(tmp_path)
    with anyio.fail_after(60):
        async with _running(follower):
            table = (await _cli(follower.env, "status")).stdout
            (line,) = [t for t in table.splitlines() if t.startswith("fleet: ")]
            assert f"{path}: host 1: not an ssh destination" in line, table
            assert line.endswith("; no host is followed until it is fixed)"), line
            path.write_text("")

            async def fixed() -> bool:
                return "fleet: " not in (await _cli(follower.env, "status")).stdout

            await poll_until(fixed, "the line gone once the file is good")


async def test_an_ssh_host_and_a_nats_host_of_the_same_name_never_merge(tmp_path: Path) -> None:
    """h1 is an SSH host of the hosts file, and a daemon publishing to the followed NATS server
    calls itself h1 too: the view shows the SSH host's sessions only; the NATS one is
    ``refused`` with the reason in ``status``, ``status --json`` and ``fleet list``, and its
    batches are counted."""
    me, token = os.getpid(), start_token(os.getpid())
    root = Path(tempfile.mkdtemp(prefix="pwn", dir="/tmp"))  # ControlPath: a short directory
    try:
        with anyio.fail_after(180), nats_server(tmp_path / "nats") as server:
            async with ssh_fleet(root, 1) as made:
                (h1,) = made.remotes
                fleet = core.Fleet(made.hosts.hosts, made.hosts.keepalive_s,
                                   (core.NatsEntry(server.url),))
                (root / "config" / "paneward" / "fleet.toml").write_text(core.render_fleet(fleet))
                impostor = _publisher(tmp_path, server, "h1")
                follower = DaemonProcess(made.local_state, env=made.env)
                async with _running(impostor, follower):
                    await raw_send(h1.hook_socket, frames(burst(["by-ssh"], 0, me, token)))
                    await raw_send(impostor.hook_socket, frames(burst(["by-nats"], 0, me, token)))
                    await impostor.wait_delivered(1)

                    async def refused() -> bool:
                        counted = (await follower.counters())["fleet"]["refused_hosts"]
                        return bool(counted.get(f"h1 via {server.url}"))

                    await poll_until(lambda: _has(follower, {("h1", "by-ssh")}), "h1 over ssh",
                                     within=60)
                    await poll_until(refused, "the NATS h1 refused and counted", within=60)
                    assert {s for h, s in _seen(await _merged(follower))} == {"by-ssh"}
                    rows = (await follower.status())["hosts"]
                    assert [(r["host"], r["health"]) for r in rows] == [
                        ("h1", "connected"), ("h1", "refused")]
                    assert "the SSH host h1 of the hosts file" in rows[1]["reason"]
                    table = await _cli(follower.env, "status")
                    assert "h1 refused" in table.stdout and "--nats-host" in table.stdout
                    listed = await _cli(follower.env, "fleet", "list")
                    assert listed.stdout.splitlines()[2].startswith(
                        f"h1  refused: {server.url} carries a host named h1"), listed.stdout
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_next_and_pick_say_why_a_nats_hosts_item_is_not_reached(tmp_path: Path) -> None:
    """A session on a host followed through NATS needs you in a pane there: the server carries
    its state but no route to its terminal. ``next --host far`` says so (and what to run
    instead), plain ``next`` says that is what needs you, ``pick`` offers no menu item it
    could not take you to, saying why, and so does ``top``'s Enter."""
    from tests.support.sessions import pane_bound_frame, spawned_frame, status_frame
    from tests.support.tmux import TmuxServer

    local_tmux = TmuxServer()
    local_tmux.start()
    try:
        with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
            publisher = _publisher(tmp_path, server, "far")
            _write_fleet(tmp_path, core.Fleet(nats=(core.NatsEntry(server.url),)))
            follower = _follower(tmp_path)
            async with _running(publisher, follower):
                await raw_send(publisher.hook_socket, spawned_frame("s1")
                               + pane_bound_frame("s1", "%3")
                               + status_frame("s1", "blocked", 1))

                async def asks() -> bool:
                    rows = await _merged(follower)
                    return any(r["pane"] == "%3" and r["attention"] for r in rows)

                await poll_until(asks, "far's item in the follower's view", within=60)
                (row,) = (await follower.status())["hosts"]
                assert row["host"] == "far" and "followed through NATS" in row["no_jump"]
                env, tmux = follower.env, ("-L", local_tmux.name)
                for argv in (("next", "--host", "far"), ("next", "--host", "far", "--pane", "%3")):
                    done = await _cli(env, *argv, *tmux)
                    assert done.returncode == 1, done
                    assert f"far is followed through NATS ({server.url})" in done.stderr
                    assert "run `paneward next` on far itself" in done.stderr
                done = await _cli(env, "next", *tmux)
                assert done.returncode == 1 and "1 on far" in done.stderr, done
                assert "followed through NATS" in done.stderr
                done = await _cli(env, "pick", *tmux, "--client", "nobody")
                assert done.returncode == 1, done
                assert "1 on far" in done.stderr and "followed through NATS" in done.stderr
                assert "tmux:" not in done.stderr  # no menu was tried with it
                # top's Enter on it (what it runs): the same reason
                from actors.cli.jump import jump_remote
                from actors.cli.main import build_parser
                from messages import SessionKey

                args = build_parser("top").parse_args(
                    ["top", "--socket", os.fspath(follower.hook_socket), *tmux])
                with pytest.raises(LookupError, match="followed through NATS"):
                    await anyio.to_thread.run_sync(jump_remote, args,
                                                   SessionKey("terminal", "s1", host="far"))
    finally:
        local_tmux.kill()
