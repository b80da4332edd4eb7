"""The SSH transport (:mod:`actors.sources.fleet_link`) and the follower
(:mod:`actors.core.fleet.follow`).

Real everything: private ``sshd`` servers on loopback (:mod:`tests.support.ssh`) in front of real
remote daemons, each with its own state and socket directory, fed real frames through their
hook sockets; the link runs the user's ``ssh`` against them. The follower's rules on hostile
lines are checked with a remote "paneward" that is a script printing them, behind the same
real sshd.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import messages
from actors.cli.fleet import prepare_control_dir
from actors.core.fleet import hosts as core
from actors.core.fleet.follow import Change, Drop, Follower, Health, HostKey, Upsert, shown
from actors.sources import procfs
from actors.sources.fleet_link import SshLink
from tests.support.daemon import DaemonProcess, raw_send
from tests.support.polling import poll_until
from tests.support.sessions import spawned_frame, status_frame
from tests.support.ssh import Sshd, SshWorld

T0 = 1795995370911


@dataclass
class Remote:
    name: str
    sshd: Sshd
    daemon: DaemonProcess
    host: core.Host


class View:
    """What a merged view would hold: the deliver callback of every link, and each seq seen."""

    def __init__(self) -> None:
        self.shown: dict[HostKey, messages.Activity] = {}
        self.seqs: dict[str, list[int]] = {}

    def deliver(self, host: str, changes: Sequence[Change]) -> None:
        for change in changes:
            if isinstance(change, Upsert):
                self.shown[change.key] = change.activity
                if change.edge:
                    self.seqs.setdefault(host, []).append(change.seq)
            elif isinstance(change, Drop):
                self.shown.pop(change.key, None)

    def of(self, host: str) -> dict[str, messages.Activity]:
        return {k.key.session_id: a for k, a in self.shown.items() if k.host == host}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # ControlPath sockets need a short directory (see tests/cli/test_fleet.py)
    with tempfile.TemporaryDirectory(prefix="pwl", dir="/tmp") as name:
        yield Path(name)


@asynccontextmanager
async def remotes(root: Path, count: int) -> AsyncIterator[tuple[SshWorld, list[Remote]]]:
    world = SshWorld(root / "ssh")
    started: list[Remote] = []
    try:
        for i in range(count):
            name = f"h{i + 1}"
            sshd = await world.add_server(name)
            state = root / f"{name}-state"
            state.mkdir(mode=0o700)
            daemon = DaemonProcess(state)
            await daemon.start()
            host = core.Host(name, world.remote_command(name, state))
            started.append(Remote(name, sshd, daemon, host))
        yield world, started
    finally:
        with anyio.CancelScope(shield=True):
            for remote in started:
                await remote.daemon.__aexit__(None, None, None)
            await world.aclose()


def link(world: SshWorld, root: Path, host: core.Host, view: View, keepalive: int = 10) -> SshLink:
    control = prepare_control_dir(os.fspath(root / "run"))
    return SshLink(host, control, view.deliver, keepalive_s=keepalive, ssh=os.fspath(world.ssh),
                   retry=(0.05, 0.5))


async def test_four_hosts_snapshot_then_live_edges(short_dir: Path) -> None:
    with anyio.fail_after(120):
        async with remotes(short_dir, 4) as (world, hosts):
            for i, remote in enumerate(hosts):
                await raw_send(remote.daemon.hook_socket, b"".join(
                    spawned_frame(f"s{j}") + status_frame(f"s{j}", "working", j)
                    for j in range(i + 1)))
                await poll_until(functools.partial(_count, remote, i + 1), "sessions there")
            view = View()
            links = [link(world, short_dir, r.host, view) for r in hosts]
            async with anyio.create_task_group() as tg:
                for one in links:
                    tg.start_soon(one.run)
                # the snapshot: every host's sessions, keyed by host
                await poll_until(lambda: all(len(view.of(r.name)) == i + 1
                                             for i, r in enumerate(hosts)), "snapshots")
                assert all(one.statistics().health == "connected" for one in links)
                # live: one edge per host, with its remote seq
                for remote in hosts:
                    await raw_send(remote.daemon.hook_socket, status_frame("s0", "blocked", 99))
                await poll_until(lambda: all(view.of(r.name)["s0"].turn == "needs_input"
                                             for r in hosts), "live edges")
                for one, remote in zip(links, hosts, strict=True):
                    status = await remote.daemon.status()
                    assert one.statistics().last_seq == status["seq"]
                    assert view.seqs[remote.name][-1] == status["seq"]
                # one TCP connection per host, counted on the sshd side, and one stream each
                assert [r.sshd.connections() for r in hosts] == [1, 1, 1, 1]
                assert [one.statistics().connections for one in links] == [1, 1, 1, 1]
                tg.cancel_scope.cancel()


async def _count(remote: Remote, n: int) -> bool:
    return len((await remote.daemon.status())["activities"]) >= n


@pytest.mark.parametrize("cut", ["kill_ssh", "stop_sshd"])
async def test_a_link_cut_in_a_burst_of_10000_gives_every_transition_once(
    short_dir: Path, cut: str
) -> None:
    """Kill the ssh process (or stop the remote sshd, its sessions too, and start it again)
    while 10,000 transitions go into the remote daemon: after the reconnect every remote seq
    is there exactly once, in order, and the view equals the remote daemon's."""
    total = 10_000
    with anyio.fail_after(300):
        async with remotes(short_dir, 1) as (world, (remote,)):
            view = View()
            one = link(world, short_dir, remote.host, view)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.run)
                await poll_until(lambda: one.statistics().health == "connected", "connected")
                frames = [status_frame(f"s{n % 50}", "working" if (n // 50) % 2 == 0 else "idle",
                                       n) for n in range(total)]

                async def burst() -> None:
                    for start in range(0, total, 500):
                        await raw_send(remote.daemon.hook_socket, b"".join(frames[start:start
                                                                                  + 500]))

                tg.start_soon(burst)
                await poll_until(lambda: one.statistics().applied >= 2_000, "2,000 applied",
                                 within=120)
                if cut == "kill_ssh":
                    pid = one.statistics().ssh_pid
                    assert pid is not None
                    os.kill(pid, signal.SIGKILL)
                else:
                    listener = remote.sshd.process
                    assert listener is not None
                    sessions = procfs.children(listener.pid)
                    await remote.sshd.stop()
                    for pid in sessions:
                        with _gone():
                            os.kill(pid, signal.SIGKILL)
                await poll_until(lambda: one.statistics().health != "connected", "the cut")
                if cut == "stop_sshd":
                    await poll_until(lambda: one.statistics().reason is not None, "a failed try")
                    assert "connection refused" in (one.statistics().reason or "")
                    await remote.sshd.start()

                async def caught_up() -> bool:
                    status = await remote.daemon.status()
                    return (one.statistics().health == "connected"
                            and status["statistics"]["hook_listener"]["frames_delivered"] >= total
                            and one.statistics().last_seq == status["seq"])

                await poll_until(caught_up, "the link caught up", within=120)
                status = await remote.daemon.status()
                seqs = view.seqs[remote.name]
                assert [s for s, n in Counter(seqs).items() if n > 1] == []
                assert seqs == list(range(seqs[0], status["seq"] + 1))
                stats = one.statistics()
                assert (stats.connections, stats.unexplained, stats.duplicates) == (2, 0, 0)
                remote_view = {a["key"]["session_id"]: a for a in status["activities"]}
                for activity in remote_view.values():
                    activity["key"]["host"] = remote.name  # the view's keys carry the host
                assert {k: msgspec_builtins(a) for k, a in view.of(remote.name).items()} == \
                    remote_view
                tg.cancel_scope.cancel()


class _gone:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *rest: object) -> bool:
        return kind is ProcessLookupError


def msgspec_builtins(activity: messages.Activity) -> object:
    import msgspec

    return msgspec.to_builtins(activity)


async def test_a_remote_restart_resumes_and_a_lost_link_is_stale_never_idle(
    short_dir: Path
) -> None:
    """The remote daemon stops: the host is stale (its session's turn unknown, presence and
    attention kept), the tries say the daemon is not running; it starts again: the same id,
    another run, the seqs go on."""
    with anyio.fail_after(180):
        async with remotes(short_dir, 1) as (world, (remote,)):
            await raw_send(remote.daemon.hook_socket,
                           spawned_frame("s1") + status_frame("s1", "blocked", 1))
            view = View()
            one = link(world, short_dir, remote.host, view)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.run)
                await poll_until(lambda: "s1" in view.of("h1"), "the snapshot")
                before = view.of("h1")["s1"]
                assert (before.turn, before.presence) == ("needs_input", "running")
                first = one.statistics()
                await remote.daemon.stop()
                await poll_until(lambda: one.statistics().health == "stale", "stale")
                stale = view.of("h1")["s1"]
                assert stale.turn == "unknown"
                assert (stale.presence, stale.attention) == (before.presence, before.attention)
                await poll_until(lambda: one.statistics().reason is not None, "a failed try")
                assert "daemon not running there" in (one.statistics().reason or "")
                lost = one.statistics()
                assert lost.health == "stale"  # still: its sessions are kept
                assert view.of("h1")["s1"].turn == "unknown"
                await remote.daemon.start()
                await poll_until(lambda: one.statistics().health == "connected", "reconnected")
                await raw_send(remote.daemon.hook_socket,
                               spawned_frame("s1") + status_frame("s1", "working", 2))

                async def caught_up() -> bool:
                    status = await remote.daemon.status()
                    return bool(one.statistics().last_seq == status["seq"]
                                and view.of("h1")["s1"].turn == "working")

                await poll_until(caught_up, "the new transition")
                stats = one.statistics()
                assert (stats.restarts, stats.new_daemons, stats.daemon) == (1, 0, first.daemon)
                assert (stats.duplicates, stats.unexplained) == (0, 0)
                # the stale time is when the link was lost, whatever the tries said after it
                assert lost.since_ms >= first.since_ms
                tg.cancel_scope.cancel()


def _masters_of(one: SshLink) -> list[int]:
    """The pids of the host's master ssh processes (their title names their ControlPath)."""
    mark = f"ssh: {one.control_dir}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError), open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if cmdline.read().startswith(mark):
                    found.append(int(entry))
    return found


async def test_a_master_that_stops_answering_is_replaced(short_dir: Path) -> None:
    """The host's master ssh hangs (SIGSTOPped): a stream started on it gets no answer. The
    try ends at the answer deadline, ``ssh -O check`` gets no answer either, the master's
    socket is removed, and the next try starts a new master: the host is followed again."""
    with anyio.fail_after(120):
        async with remotes(short_dir, 1) as (world, (remote,)):
            view = View()
            one = link(world, short_dir, remote.host, view, keepalive=1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.run)
                await poll_until(lambda: one.statistics().health == "connected", "connected")
                (master,) = _masters_of(one)
                os.kill(master, signal.SIGSTOP)
                try:
                    pid = one.statistics().ssh_pid
                    assert pid is not None
                    os.kill(pid, signal.SIGKILL)  # the next stream is the stopped master's
                    await poll_until(lambda: one.statistics().masters_replaced == 1,
                                     "the master replaced", within=60)
                    assert "no answer in time" in (one.statistics().reason or "")
                    await poll_until(lambda: one.statistics().health == "connected",
                                     "followed again", within=30)
                    assert [p for p in _masters_of(one) if p != master]  # a new one
                finally:
                    os.kill(master, signal.SIGCONT)
                    os.kill(master, signal.SIGTERM)
                tg.cancel_scope.cancel()


async def test_an_unreachable_host_says_why(short_dir: Path) -> None:
    with anyio.fail_after(60):
        world = SshWorld(short_dir / "ssh")
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        world.alias("closed", port)
        view = View()
        one = link(world, short_dir, core.Host("closed"), view)
        async with anyio.create_task_group() as tg:
            tg.start_soon(one.run)
            await poll_until(lambda: one.statistics().health == "unreachable", "unreachable")
            assert "connection refused" in (one.statistics().reason or "")
            tg.cancel_scope.cancel()


HOSTILE = [
    b'{"type": "Snapshot", "seq": 0, "activities": []}',  # before the Daemon line: refused
    json.dumps({"type": "Daemon", "id": "a" * 32, "run": "b" * 32, "seq": 0,
                "version": "9"}).encode(),
    b"{not json",
    b'{"type": "Transition", "seq": "x"}',
    b'{"type": "Snapshot", "seq": 0, "activities": []}',
    b"x" * (17 << 20),  # oversized
    b'{"type": "Rejected", "reason": "r", "origin": "hook", "at_ms": 1795995370911}',
    "\ufeff{\"type\": \"Gap\"}".encode(),
    b'{"a": ' * 100 + b"1" + b"}" * 100,  # too deep
    b"\xff\xfe",
]


def _transition(seq: int, session: str, reason: str, *, other_key: bool = False) -> bytes:
    key = {"harness": "claude-code", "session_id": session}
    after_key = {"harness": "codex", "session_id": session} if other_key else key
    return json.dumps({
        "type": "Transition", "seq": seq, "key": key, "cause": "HookHint:PermissionRequest",
        "after": {"type": "Activity", "key": after_key, "presence": "running",
                  "turn": "needs_input", "evidence": {"source": "claude_hook"},
                  "attention": {"kind": "needs_input", "reason": reason, "since_ms": T0}},
    }).encode()


async def test_hostile_remote_lines_are_refused_counted_and_touch_nothing_local(
    short_dir: Path,
) -> None:
    """A remote "paneward" that prints garbage behind a real sshd: every bad line is counted
    by reason and changes nothing; a valid line with escape sequences is kept as data (every
    view escapes it); a remote key equal to a local session's is that host's, never local."""
    lines = [*HOSTILE,
             _transition(1, "local-one", "\x1b]52;c;cm0gLXJmIH4=\x07 \x9b31m evil"),
             _transition(2, "x", "r", other_key=True),
             _transition(1, "dup", "r"),  # seq not after the last: a duplicate
             _transition(3, "s3", "r")]
    script = short_dir / "hostile-paneward"
    payload = short_dir / "hostile.jsonl"
    payload.write_bytes(b"\n".join(lines) + b"\n")
    # then blank lines (skipped) until the link is gone: the script ends on its broken pipe
    script.write_text(f"#!/bin/sh\ncat {payload}\nwhile sleep 0.5; do echo; done\n")
    script.chmod(0o755)
    with anyio.fail_after(120):
        world = SshWorld(short_dir / "ssh")
        try:
            await world.add_server("evil")
            view = View()
            one = link(world, short_dir, core.Host("evil", os.fspath(script)), view)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.run)
                await poll_until(lambda: one.statistics().last_seq == 3, "the last line")
                stats = one.statistics()
                assert stats.rejected == {
                    "no_daemon_line": 1, "invalid": 3, "unexpected_type": 1, "oversize": 1,
                    "too_deep": 1, "invalid_utf8": 1, "key_mismatch": 1,
                }, stats.rejected
                assert stats.duplicates == 1
                kept = view.shown[HostKey("evil", messages.SessionKey("claude-code",
                                                                      "local-one"))]
                assert kept.attention is not None and "\x1b]52" in kept.attention.reason
                from actors.core.text import printable

                assert "\x1b" not in printable(kept.attention.reason)
                assert "\x9b" not in printable(kept.attention.reason)
                assert {k.host for k in view.shown} == {"evil"}
                tg.cancel_scope.cancel()
        finally:
            await world.aclose()


async def test_a_stream_that_answered_stays_up_however_long_it_is_quiet(short_dir: Path) -> None:
    """A remote "paneward" answers at once, then says nothing for 3 s (longer than the link's
    drain time, never as long as its answer deadline), then a transition: it comes on the
    same stream, the first connection."""
    hello = json.dumps({"type": "Daemon", "id": "a" * 32, "run": "b" * 32, "seq": 0,
                        "version": "9"}).encode()
    first = short_dir / "first.jsonl"
    first.write_bytes(hello + b"\n" + b'{"type": "Snapshot", "seq": 0, "activities": []}\n')
    later = short_dir / "later.jsonl"
    later.write_bytes(_transition(1, "late", "r") + b"\n")
    script = short_dir / "quiet-paneward"
    script.write_text(f"#!/bin/sh\ncat {first}\nsleep 3\ncat {later}\n"
                      "while sleep 0.5; do echo; done\n")
    script.chmod(0o755)
    with anyio.fail_after(60):
        world = SshWorld(short_dir / "ssh")
        try:
            await world.add_server("quiet")
            view = View()
            one = link(world, short_dir, core.Host("quiet", os.fspath(script)), view)
            async with anyio.create_task_group() as tg:
                tg.start_soon(one.run)
                await poll_until(lambda: one.statistics().last_seq == 1, "the later line")
                assert one.statistics().connections == 1
                tg.cancel_scope.cancel()
        finally:
            await world.aclose()


def test_stale_shows_turn_unknown_and_keeps_the_rest() -> None:
    activity = messages.decode_outbound(_transition(1, "s", "permission")).after  # type: ignore[union-attr]
    stale = shown(activity, Health("stale", T0))
    assert stale.turn == "unknown"
    assert (stale.presence, stale.attention, stale.evidence) == (
        activity.presence, activity.attention, activity.evidence)
    assert shown(activity, Health("connected", T0)) is activity


def test_another_daemon_replaces_the_host_and_skips_its_replay() -> None:
    follower = Follower("h")
    hello = {"type": "Daemon", "id": "a" * 32, "run": "b" * 32, "seq": 0, "version": "1"}
    follower.connecting(T0)
    follower.feed(json.dumps(hello).encode(), T0)
    follower.feed(b'{"type": "Snapshot", "seq": 0, "activities": []}', T0)
    follower.feed(_transition(1, "old", "r"), T0)
    assert follower.since() == 1
    follower.ended(T0 + 1, None)
    assert follower.health.state == "stale"
    follower.connecting(T0 + 2)
    other = {**hello, "id": "c" * 32, "seq": 7}
    follower.feed(json.dumps(other).encode(), T0 + 3)
    assert follower.feed(_transition(5, "replayed", "r"), T0 + 3) == []
    changes = follower.feed(b'{"type": "Snapshot", "seq": 7, "activities": []}', T0 + 3)
    assert changes == [Drop(HostKey("h", messages.SessionKey("claude-code", "old")), "Snapshot", 7)]
    assert (follower.last_seq, follower.new_daemons, follower.unexplained) == (7, 1, 0)
