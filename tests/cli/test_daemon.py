"""The daemon end to end: a real ``paneward run`` process, real sockets, real
``paneward hook`` / ``inject`` / ``status`` / ``watch`` processes, real owner processes.

Every daemon runs on its own temporary state directory with ``--no-discovery`` and is
stopped at teardown (tests/support/daemon.py).
"""

from __future__ import annotations

import heapq
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import messages
from actors.cli.hook_client import MAX_FRAME_BYTES
from actors.core.ingress.frames import MAX_DEPTH
from actors.harnesses import catalog
from actors.harnesses.catalog import PROOF_TABLE, normalize
from messages import NotifyHook, RegistryRemoved, RegistryStatus, Transition
from tests.support.daemon import (
    PANEWARD,
    AgentStandIn,
    DaemonProcess,
    _raw_send_sync,
    daemon_env,
    owner,
    poll_until,
    raw_send,
    start_token,
    watching,
)
from tests.support.reference_model import SessionTable
from tests.support.replay import FIXTURES, claude_messages, codex_messages
from tests.support.sessions import burst, claude_hook, frames

Row = tuple[Any, ...]


def row(transition: Transition) -> Row:
    """What must match between the daemon and the reference (not observed_at_ms)."""
    a = transition.after
    attention = (a.attention.kind, a.attention.reason) if a.attention else None
    return (
        transition.seq,
        transition.key.harness,
        transition.key.session_id,
        transition.cause,
        a.presence,
        a.turn,
        attention,
        a.pane,
        a.evidence.source,
        a.evidence.native_state,
    )


def transitions_of(items: list[dict[str, Any]]) -> list[Transition]:
    out: list[Transition] = []
    for item in items:
        decoded = messages.decode_outbound(msgspec.json.encode(item))
        if isinstance(decoded, Transition):
            out.append(decoded)
    return out


async def cli(env: dict[str, str], *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = await anyio.run_process(
        [os.fspath(PANEWARD), *args], env=env, input=stdin, check=False
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


# --------------------------------------------------------------------------------------------
# 1. The real captures through real hook/inject processes == the in-process replay


def _rewrite_claude(
    interactive: AgentStandIn, print_mode: AgentStandIn
) -> list[tuple[messages.Inbound, AgentStandIn | None]]:
    """Claude messages with the captured owners replaced by live processes."""
    owners = {26995: interactive, 26912: print_mode}
    out: list[tuple[messages.Inbound, AgentStandIn | None]] = []
    for message in claude_messages():
        if isinstance(message, NotifyHook):
            assert message.pid is not None
            live = owners[message.pid]
            out.append(
                (msgspec.structs.replace(message, pid=live.pid, start_token=live.token), live)
            )
        elif isinstance(message, RegistryStatus):
            live = owners[message.pid]
            out.append(
                (msgspec.structs.replace(message, pid=live.pid, start_token=live.token), None)
            )
        else:
            assert isinstance(message, RegistryRemoved)
            out.append((msgspec.structs.replace(message, pid=owners[message.pid].pid), None))
    return out


def _rewrite_codex(codex: AgentStandIn) -> list[tuple[messages.Inbound, AgentStandIn | None]]:
    out: list[tuple[messages.Inbound, AgentStandIn | None]] = []
    for message in codex_messages(owner_pid=codex.pid, token=codex.token):
        if isinstance(message, NotifyHook):
            # `paneward hook` run by Codex claims its parent: the Codex process
            out.append(
                (msgspec.structs.replace(message, pid=codex.pid, start_token=codex.token), codex)
            )
        else:
            out.append((message, None))
    return out


def _codex_notify_argv() -> dict[int, str]:
    """at_ms -> the exact JSON Codex passed as notify's last argument."""
    rows = [
        json.loads(line)
        for line in (FIXTURES / "codex" / "notify.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return {round(r["ts"] * 1000): r["argv"][-1] for r in rows}


async def test_real_captures_through_hook_processes_match_the_in_process_replay(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with (
            owner() as interactive,
            owner() as print_mode,
            owner() as codex,
            DaemonProcess(tmp_path / "state") as daemon,
        ):
            plan = list(
                heapq.merge(
                    _rewrite_claude(interactive, print_mode),
                    _rewrite_codex(codex),
                    key=lambda pair: pair[0].at_ms,
                )
            )
            table = SessionTable(normalize, PROOF_TABLE)
            reference = [t for message, _ in plan for t in table.apply(message)]
            notify_argv = _codex_notify_argv()
            async with watching(daemon) as watcher:
                for sent, (message, runner) in enumerate(plan, start=1):
                    if isinstance(message, NotifyHook):
                        assert runner is not None
                        env = daemon_env(daemon.state_dir, PANEWARD_HOOK_AT_MS=str(message.at_ms))
                        hook = [os.fspath(PANEWARD), "hook", "--harness", message.harness or ""]
                        if message.harness == "codex":
                            argv = notify_argv[message.at_ms]
                            assert json.loads(argv) == message.payload
                            code = await runner.run([*hook, argv], env)
                        else:
                            env["CLAUDE_PID"] = str(runner.pid)
                            code = await runner.run(hook, env, json.dumps(message.payload))
                    else:
                        code, _, err = await cli(
                            daemon.env, "inject", messages.encode(message).decode()
                        )
                        assert err == ""
                    assert code == 0
                    # separate connections are not ordered: one frame at a time
                    await daemon.wait_delivered(sent)
                await watcher.wait_for(
                    lambda items: len(items) >= len(reference), f"{len(reference)} transitions"
                )
                status = await daemon.status()
            counters = status["statistics"]
    seen = transitions_of(watcher.items)
    assert [row(t) for t in seen] == [row(t) for t in reference]
    assert status["seq"] == len(reference) == len(seen)
    # the replay is not trivial: both harnesses, attention, a death by registry removal
    assert {t.key.harness for t in reference} == {"claude-code", "codex"}
    assert len(reference) >= 30
    assert counters["hook_listener"]["frames_delivered"] == len(plan)
    assert counters["hook_listener"]["rejected"] == {}
    assert counters["supervisor"]["rejected"] == 0
    # the only other messages are the pid watcher's proofs that the three owners live
    assert counters["pid_watcher"]["confirmed_alive"] == 3
    assert counters["pid_watcher"]["gone_sent"] == 0
    assert counters["supervisor"]["messages"] == len(plan) + counters["pid_watcher"]["seen_sent"]


JournalRow = tuple[int, str, str, str]
CatalogRow = tuple[str, str, str, int]


def read_db(db: Path) -> tuple[str, list[JournalRow], list[CatalogRow]]:
    """integrity_check, journal rows and catalog rows, opened READ-ONLY."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        journal = conn.execute(
            "SELECT seq, harness, session_id, transition FROM journal ORDER BY seq"
        ).fetchall()
        catalog = conn.execute(
            "SELECT harness, session_id, activity, seq FROM sessions ORDER BY harness, session_id"
        ).fetchall()
    finally:
        conn.close()
    return integrity, journal, catalog


def committed_seq(db: Path) -> int:
    """The newest journal seq committed so far (read-only; 0 before the first commit)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM journal").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0
    finally:
        conn.close()


def assert_catalog_matches_journal(
    journal: list[tuple[int, str, str, str]], catalog: list[tuple[str, str, str, int]]
) -> None:
    newest: dict[tuple[str, str], tuple[int, str]] = {}
    for seq, harness, session, transition in journal:
        newest[(harness, session)] = (seq, transition)
    assert {(h, s) for h, s, _, _ in catalog} == set(newest)
    for harness, session, activity, seq in catalog:
        last_seq, transition = newest[(harness, session)]
        assert seq == last_seq
        assert json.loads(activity) == json.loads(transition)["after"]


# --------------------------------------------------------------------------------------------
# 2. kill -9 during a burst of 10,000 hook events


def _send_until_broken(path: Path, data: bytes) -> None:
    import socket
    import time

    lines = data.splitlines(keepends=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        try:
            for start in range(0, len(lines), 100):
                sock.sendall(b"".join(lines[start : start + 100]))
                # Hook events arrive over time, not all at once: pacing the burst (>= 1 s
                # for 10,000) keeps the kill inside it however fast the daemon drains its
                # socket; it synchronises nothing.
                time.sleep(0.01)
            sock.shutdown(socket.SHUT_WR)
            sock.recv(1)
        except OSError:
            pass  # the daemon was killed under us: expected


async def test_kill_9_during_a_burst_loses_at_most_one_batch(tmp_path: Path) -> None:
    state = tmp_path / "state"
    sessions = [f"burst-{i}" for i in range(4)]
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst(sessions, 1250, me, token)[:10_000]
    assert len(hooks) == 10_000
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            async with watching(daemon) as watcher, anyio.create_task_group() as tg:
                tg.start_soon(anyio.to_thread.run_sync, _send_until_broken, daemon.hook_socket,
                              frames(hooks))
                # Kill once the store has committed a couple of batches: the burst (paced over
                # >= 1 s) is then still going, whatever the watcher's own lag. Meanwhile the
                # store's own view: no transaction ever holds more than one batch (not
                # everything waiting, thousands of rows under this burst, in one).
                # And what a kill at each instant would lose (published, not committed) stays
                # about one batch: intake waits for the store (backpressure).
                windows: list[tuple[int, int]] = []

                async def two_batches() -> bool:
                    status = await daemon.status()
                    store = status["statistics"]["store"]
                    windows.append((store["in_flight"],
                                    int(status["seq"]) - int(store["last_flushed_seq"])))
                    return int(store["last_flushed_seq"]) >= 1000

                await poll_until(two_batches, "the store's first 1000 rows")
                assert all(in_flight <= 500 for in_flight, _ in windows), windows
                assert all(window <= 2 * 500 for _, window in windows), windows
                os.kill(daemon.pid, signal.SIGKILL)
                await daemon.kill()  # reaps it
                assert await watcher.wait_exit() == 0  # EOF from the dead daemon
            seen = watcher.seqs
        integrity, journal, catalog = await anyio.to_thread.run_sync(read_db, state / "paneward.db")
        assert integrity == "ok"
        last = journal[-1][0]
        assert [r[0] for r in journal] == list(range(1, last + 1))
        assert_catalog_matches_journal(journal, catalog)
        # what the watcher saw is a prefix of the true history, so comparable row by row
        assert seen == list(range(1, len(seen) + 1))
        # The watcher may lag behind the store (negative). The store loses at most what it had
        # not committed: the open batch window and the flush in flight, each at most one
        # window (batch_rows = 500) while the writer keeps up with the burst.
        assert max(seen) - last <= 2 * 500, (max(seen), last)
        assert last < 9_999  # the kill really landed during the burst
        # restart on the same state dir: the seq goes on after every seq the watcher may have
        # seen (the store's seq mark), and what the journal lacks is a gap
        async with DaemonProcess(state) as again:
            status = await again.status()
            restarted = int(status["seq"])
            assert restarted >= max(seen)
            assert status["statistics"]["store"]["not_committed"] == restarted - last
            async with watching(again) as watcher2:
                await raw_send(again.hook_socket, frames([
                    claude_hook("after-restart", "SessionStart", 20_000, me, token)
                ]))
                await watcher2.wait_for(lambda items: len(items) >= 1, "the next transition")
            assert watcher2.seqs == [restarted + 1]


# --------------------------------------------------------------------------------------------
# 5. One daemon per state dir; SIGTERM / SIGINT shut down gracefully with the store flushed


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_second_daemon_refused_and_signals_shut_down_flushed(
    tmp_path: Path, signum: signal.Signals
) -> None:
    state = tmp_path / "state"
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst(["s-a", "s-b"], 30, me, token)
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            code, out, err = await cli(daemon.env, "run", "--state-dir", os.fspath(state),
                                       "--no-discovery")
            assert (code, out) == (1, "")
            assert err == (
                f"paneward run: another paneward daemon (pid {daemon.pid}) is already running "
                f"with state directory {state}\n"
            )
            async with watching(daemon) as watcher:
                await raw_send(daemon.hook_socket, frames(hooks))
                await watcher.wait_for(lambda items: len(items) >= 122, "122 transitions")
                assert await daemon.stop(signum) == 0
                assert await watcher.wait_exit() == 0
        _, journal, catalog = await anyio.to_thread.run_sync(read_db, state / "paneward.db")
    assert watcher.seqs == list(range(1, 123))
    assert [r[0] for r in journal] == watcher.seqs
    assert [json.loads(r[3]) for r in journal] == watcher.items
    assert_catalog_matches_journal(journal, catalog)
    # and the sockets and lock holder are gone: nothing left behind but the database
    assert not (state / "hook.sock").exists()
    assert not (state / "control.sock").exists()


# --------------------------------------------------------------------------------------------
# 6. Restart re-proof


def registry(session: str, who: AgentStandIn, status: str, at: int) -> RegistryStatus:
    return RegistryStatus(
        key=messages.SessionKey("claude-code", session),
        pid=who.pid,
        start_token=who.token,
        status=status,
        at_ms=at,
        observed_at_ms=at,
    )


async def test_restart_reproves_live_owner_silently_and_buries_the_dead_one(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    me, token = os.getpid(), start_token(os.getpid())
    with anyio.fail_after(60):
        async with owner() as alive:
            async with owner() as doomed:
                async with DaemonProcess(state) as daemon, watching(daemon) as watcher:
                    await raw_send(daemon.hook_socket, frames([]) + b"".join(
                        messages.encode(m) + b"\n"
                        for m in (registry("alive", alive, "busy", 1_800_000_000_000),
                                  registry("doomed", doomed, "busy", 1_800_000_000_001))
                    ))
                    await watcher.wait_for(lambda items: len(items) >= 2, "2 transitions")
                    last = (await daemon.status())["seq"]
                    assert await daemon.stop() == 0
                doomed_pid = doomed.pid
            # `doomed` is dead and reaped while no daemon runs
            assert not os.path.exists(f"/proc/{doomed_pid}")  # noqa: ASYNC240 - procfs, instant
            async with DaemonProcess(state) as daemon:
                async with watching(daemon, since=last) as watcher:
                    await watcher.wait_for(lambda items: len(items) >= 1, "the correction")
                    # let the pid watcher prove the live owner, then a barrier transition
                    await poll_until_counter(daemon, "pid_watcher", "confirmed_alive", 1)
                    await raw_send(daemon.hook_socket, frames([
                        claude_hook("barrier", "SessionStart", 1, me, token)
                    ]))
                    await watcher.wait_for(lambda items: len(items) >= 2, "the barrier")
                code, out, _ = await cli(daemon.env, "status", "--json")
            assert code == 0
    sessions = {a["key"]["session_id"]: a for a in json.loads(out)}
    assert sessions["alive"]["presence"] == "running"
    assert sessions["alive"]["turn"] == "working"
    assert sessions["doomed"]["presence"] == "persisted"
    assert sessions["doomed"]["turn"] == "unknown"
    seen = transitions_of(watcher.items)
    assert [(t.seq, t.key.session_id, t.cause) for t in seen] == [
        (last + 1, "doomed", "persisted_store:owner_dead"),
        (last + 2, "barrier", "HookHint:SessionStart"),
    ]


async def poll_until_counter(daemon: DaemonProcess, part: str, name: str, at_least: int) -> None:
    async def done() -> bool:
        return int((await daemon.counters())[part][name]) >= at_least

    await poll_until(done, f"{part}.{name} >= {at_least}")


# --------------------------------------------------------------------------------------------
# 7. status table / --json, watch --since


async def test_status_table_json_and_watch_since_without_gap_or_duplicate(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    me, token = os.getpid(), start_token(os.getpid())
    first = burst(["tbl-a", "tbl-b"], 5, me, token)  # 2 + 20 transitions
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            async with watching(daemon) as watcher:
                await raw_send(daemon.hook_socket, frames(first))
                await watcher.wait_for(lambda items: len(items) >= 22, "22 transitions")
            await raw_send(daemon.hook_socket, frames([
                claude_hook("tbl-a", "UserPromptSubmit", 100, me, token),
                claude_hook("tbl-c", "SessionStart", 101, me, token),
            ]))
            await daemon.wait_delivered(len(first) + 2)
            code, table, _ = await cli(daemon.env, "status")
            assert code == 0
            code, listing, _ = await cli(daemon.env, "status", "--json")
            assert code == 0
            # replay from the journal (seq > 10), then live: no gap, no duplicate
            async with watching(daemon, since=10) as since:
                await since.wait_for(lambda items: len(items) >= 14, "the journal replay")
                await raw_send(daemon.hook_socket, frames([
                    claude_hook("tbl-b", "UserPromptSubmit", 200 + i, me, token) if i % 2 == 0
                    else claude_hook("tbl-b", "Stop", 200 + i, me, token)
                    for i in range(6)
                ]))
                await since.wait_for(lambda items: len(items) >= 20, "the live transitions")
            code, out, err = await cli(daemon.env, "watch", "--since", "-1")
            assert (code == 2 and out == "" and "since" in err) or (code == 0 and "error" in out)
    lines = table.splitlines()
    assert lines[0].split() == [
        "PANE", "HARNESS", "SESSION", "PRESENCE", "TURN", "ATTENTION", "SOURCE", "AGE"
    ]
    rows = {line.split()[2]: line.split() for line in lines[1:4]}
    assert rows["tbl-a"][:5] == ["-", "claude-code", "tbl-a", "running", "working"]
    assert rows["tbl-b"][:7] == ["-", "claude-code", "tbl-b", "running", "idle", "done", "<1m:"]
    assert rows["tbl-c"][:6] == ["-", "claude-code", "tbl-c", "running", "unknown", "-"]
    # the age of evidence stamped in the future (these synthetic hooks) is clamped to 0s
    assert all(r[-2:] == ["claude_hook", "0s"] for r in rows.values())
    assert " · transitions 24 · rejected 0 · unmapped 0 · drops 0 · overflows 0" in lines[4]
    decoded = [messages.decode_outbound(json.dumps(item)) for item in json.loads(listing)]
    activities = [a for a in decoded if isinstance(a, messages.Activity)]
    assert len(activities) == len(decoded) == 3
    assert sorted(a.key.session_id for a in activities) == ["tbl-a", "tbl-b", "tbl-c"]
    assert since.seqs == list(range(11, 31))
    assert [json.loads(messages.encode(t)) for t in transitions_of(since.items)][:12] == (
        watcher.items[10:22]
    )


# --------------------------------------------------------------------------------------------
# 4. Permissions; another user's client is refused

_OTHER_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("connect-error", exc.errno)
    sys.exit(0)
try:
    s.sendall(sys.argv[2].encode() + b"\\n")
    s.shutdown(socket.SHUT_WR)
    print("connected", len(s.recv(65536)))
except OSError as exc:
    print("connected", "error", exc.errno)
"""


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another uid needs root (setpriv)")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="no /usr/bin/python3")
async def test_permissions_and_another_users_client_is_refused() -> None:
    # a base another uid can traverse (pytest's tmp_path is 0700 root's)
    base = Path(tempfile.mkdtemp(prefix="pw-daemon-uid-"))
    os.chmod(base, 0o711)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
              "/usr/bin/python3", "-c", _OTHER_CLIENT]
    frame = messages.encode(claude_hook("nobody", "SessionStart", 1, 1, "1")).decode()
    status = json.dumps({"op": "status"})
    try:
        with anyio.fail_after(60):
            async with DaemonProcess(base / "state") as daemon:
                state = daemon.state_dir
                modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (
                    state, daemon.hook_socket, daemon.control_socket, state / "paneward.db",
                    state / "daemon.lock")}
                assert modes == {"state": 0o700, "hook.sock": 0o600, "control.sock": 0o600,
                                 "paneward.db": 0o600, "daemon.lock": 0o600}
                # Layer 1: the 0700 directory keeps the other user from both sockets.
                for path, line in ((daemon.hook_socket, frame), (daemon.control_socket, status)):
                    done = await anyio.run_process([*nobody, os.fspath(path), line])
                    assert done.stdout.decode().split() == ["connect-error", "13"]  # EACCES
                # Layer 2: opened up by mistake, SO_PEERCRED still refuses the peer.
                state.chmod(0o711)
                daemon.hook_socket.chmod(0o666)
                daemon.control_socket.chmod(0o666)
                hook = await anyio.run_process([*nobody, os.fspath(daemon.hook_socket), frame])
                assert hook.stdout.decode().split()[0] == "connected"
                ctl = await anyio.run_process([*nobody, os.fspath(daemon.control_socket), status])
                # hung up without a byte of status: EOF, or EPIPE/ECONNRESET as the daemon
                # closed before reading our request
                assert ctl.stdout.decode().split() in (
                    ["connected", "0"], ["connected", "error", "32"], ["connected", "error", "104"]
                )
                counters = await daemon.counters()
                listener = counters["hook_listener"]
                assert listener["rejected"] == {"peer_uid": 1}
                assert listener["frames_delivered"] == 0
                assert counters["control"]["refused_peers"] == 1
                assert (await daemon.status())["activities"] == []
    finally:
        shutil.rmtree(base)


# --------------------------------------------------------------------------------------------
# 3. 10,000 hostile frames (hypothesis) interleaved with valid ones for 3 sessions

_ME = os.getpid()


def _valid_frame_json() -> dict[str, Any]:
    value: dict[str, Any] = json.loads(messages.encode(claude_hook("x", "Stop", 0, _ME, "1")))
    return value


_truncated = st.integers(1, 200).map(
    lambda n: (messages.encode(claude_hook("t", "Stop", n, _ME, "1"))[:n], "bad_json")
)
_wrong_types = st.sampled_from(
    [("at_ms", "soon"), ("pid", "x"), ("pid", -5), ("harness", "vim"), ("payload", [1, 2]),
     ("at_ms", 12), ("start_token", 7)]
).map(lambda kv: (json.dumps({**_valid_frame_json(), kv[0]: kv[1]}).encode(), "invalid_message"))
_unknown = (
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", min_size=1, max_size=12)
    .filter(lambda t: t not in {c.__name__ for c in messages.codec.INBOUND_TYPES})
    .map(lambda t: (json.dumps({"type": t}).encode(), "unknown_type"))
)
_nul = st.integers(0, 150).map(
    lambda n: (lambda f: (f[:n] + b"\x00" + f[n:], "nul_byte"))(
        messages.encode(claude_hook("n", "Stop", n, _ME, "1"))
    )
)
_bad_utf8 = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]).map(
    lambda junk: (messages.encode(claude_hook("u", "Stop", 0, _ME, "1")).replace(
        b'"u"', b'"' + junk + b'"'), "invalid_utf8")
)
_deep = st.integers(MAX_DEPTH + 1, 3000).map(
    lambda d: (json.dumps({**_valid_frame_json(), "payload": {"a": 1}}).encode().replace(
        b"1}", b"[" * d + b"]" * d + b"}", 1), "too_deep")
)
_hostile = st.one_of(_truncated, _wrong_types, _unknown, _nul, _bad_utf8, _deep)
_PER_EXAMPLE = 100  # hostile frames per hypothesis example (one of them oversize)


def test_ten_thousand_hostile_frames_leave_the_daemon_exact(tmp_path: Path) -> None:
    """Sync test: hypothesis drives 100 examples against ONE real daemon process."""
    state = tmp_path / "state"
    daemon = subprocess.Popen(
        [os.fspath(PANEWARD), "run", "--state-dir", os.fspath(state), "--no-discovery"],
        env=daemon_env(state), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    control = state / "control.sock"
    sessions = ["valid-0", "valid-1", "valid-2"]
    events = ("UserPromptSubmit", "Stop", "PermissionRequest")
    expected: Counter[str] = Counter()
    valid: list[NotifyHook] = []
    token = start_token(_ME)

    def counters() -> dict[str, Any]:
        stats: dict[str, Any] = _sync_status(control)["statistics"]
        return stats

    def wait_for(check: Any, what: str) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert daemon.poll() is None, "the daemon died"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.01)  # polling another process's counters

    @settings(max_examples=100, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])
    @given(
        hostile=st.lists(_hostile, min_size=_PER_EXAMPLE - 1, max_size=_PER_EXAMPLE - 1),
        oversize_at=st.integers(0, _PER_EXAMPLE - 1),
        oversize_extra=st.integers(1, 70_000),
        picks=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=4, max_size=4),
    )
    def example(
        hostile: list[tuple[bytes, str]], oversize_at: int, oversize_extra: int,
        picks: list[tuple[int, int]],
    ) -> None:
        lines = [*hostile[:oversize_at], (b"o" * (MAX_FRAME_BYTES + oversize_extra), "oversize"),
                 *hostile[oversize_at:]]
        out: list[bytes] = []
        for i, (frame, reason) in enumerate(lines):
            expected[reason] += 1
            out.append(frame)
            if i % 33 == 0:  # a valid frame every 33 hostile ones, for one of the 3 sessions
                session, event = picks[i // 33]
                hook = claude_hook(sessions[session], events[event], len(valid) + 10, _ME, token)
                valid.append(hook)
                out.append(messages.encode(hook))
        before = counters()["hook_listener"]["frames_received"]
        _raw_send_sync(state / "hook.sock", b"".join(f + b"\n" for f in out))
        wait_for(lambda: counters()["hook_listener"]["frames_received"] == before + len(out),
                 f"{len(out)} more frames")

    try:
        wait_for(lambda: control.exists() and _try_status(control), "the daemon")
        example()
        wait_for(lambda: counters()["hook_listener"]["frames_delivered"] == len(valid),
                 "the valid frames")
        stats = counters()
        status = _sync_status(control)
        assert daemon.poll() is None  # still up
    finally:
        daemon.terminate()
        assert daemon.wait(20) == 0
    assert sum(expected.values()) == 10_000
    listener = stats["hook_listener"]
    assert listener["rejected"] == dict(expected)
    assert listener["frames_received"] == 10_000 + len(valid)
    assert stats["supervisor"]["rejected"] == 0
    assert stats["supervisor"]["messages"] == len(valid) + stats["pid_watcher"]["seen_sent"]
    table = SessionTable(normalize, PROOF_TABLE)
    for hook in valid:
        table.apply(hook)
    want = {k.session_id: table.activity(k) for k in table.states}
    got = {a["key"]["session_id"]: a for a in status["activities"]}
    assert set(got) == set(want)
    for session, activity in want.items():
        assert activity is not None
        a = got[session]
        attention = a["attention"] and (a["attention"]["kind"], a["attention"]["reason"])
        assert (a["presence"], a["turn"], attention) == (
            activity.presence, activity.turn,
            activity.attention and (activity.attention.kind, activity.attention.reason),
        )


def _try_status(control: Path) -> bool:
    try:
        _sync_status(control)
    except OSError:
        return False
    return True


def _sync_status(control: Path) -> dict[str, Any]:
    from actors.cli.control_client import request_lines

    value = json.loads(next(iter(request_lines(control, {"op": "status"}))))
    assert isinstance(value, dict)
    return value


# --------------------------------------------------------------------------------------------
# 8. which session each pane shows (status --json --panes, the table's notes)


async def test_status_says_which_session_each_pane_shows_and_why(tmp_path: Path) -> None:
    state = tmp_path / "state"
    me, token = os.getpid(), start_token(os.getpid())
    now = 1_800_000_000_000
    wrapped = messages.SessionKey("codex", "pty-1-1")
    tui = messages.SessionKey("codex", f"tui-{me}-{token}")
    lone = messages.SessionKey("codex", f"tui-{me + 1}-{token}")
    sent = [
        # the wrapper's session proves a turn; the TUI process bound to the same pane proves
        # only that it runs: the pane shows the wrapper's session
        messages.PtySpawned(key=wrapped, pid=me, start_token=token, at_ms=now,
                            observed_at_ms=now, pane="%7"),
        messages.ProgramStatus(state="working", at_ms=now + 1, observed_at_ms=now + 1,
                               key=wrapped),
        messages.ProcessSeen(pid=me, start_token=token, at_ms=now + 2, observed_at_ms=now + 2,
                             key=tui),
        messages.PaneBound(key=tui, pane="%7", at_ms=now + 3, proof="codex_tui_process"),
        # a pane that shows only a TUI process: the status says why it shows no turn
        messages.ProcessSeen(pid=me, start_token=token, at_ms=now + 4, observed_at_ms=now + 4,
                             key=lone),
        messages.PaneBound(key=lone, pane="%8", at_ms=now + 5, proof="codex_tui_process"),
    ]
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            for message in sent:
                code, _, err = await cli(daemon.env, "inject", messages.encode(message).decode())
                assert (code, err) == (0, "")
                await daemon.wait_delivered(sent.index(message) + 1)
            code, listing, _ = await cli(daemon.env, "status", "--json", "--panes")
            assert code == 0
            code, table, _ = await cli(daemon.env, "status")
            assert code == 0
            code, activities, _ = await cli(daemon.env, "status", "--json")
    views = msgspec.convert(json.loads(listing), list[messages.PaneView])
    assert views == [
        messages.PaneView(pane="%7", key=wrapped, turn="working", hidden=(tui,), note=None),
        messages.PaneView(pane="%8", key=lone, turn="unknown", note=catalog.pane_note(
            messages.Activity(key=lone, presence="running", turn="unknown",
                              evidence=messages.Evidence(source="pid_probe")))),
    ]
    assert views[1].note is not None and "paneward wrap -- codex" in views[1].note
    assert f"%8: {views[1].note}" in table.splitlines()
    # the Activity list is what it always was
    shown = msgspec.convert(json.loads(activities), list[messages.Activity])
    assert {a.key for a in shown} == {wrapped, tui, lone}


async def test_a_watch_whose_reader_leaves_ends_while_the_daemon_is_quiet(tmp_path: Path) -> None:
    """The reader of ``paneward watch``'s stdout closes its end while nothing happens (a fleet
    follower's ssh link dropping): the watch ends at once with exit 0 and the daemon's
    subscriber is gone, without waiting for a transition to fail to write."""
    state = tmp_path / "state"
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            read_end, write_end = os.pipe()
            watch = await anyio.open_process([os.fspath(PANEWARD), "watch", "--json"],
                                             env=daemon.env, stdout=write_end)
            os.close(write_end)

            async def subscribed(want: int) -> bool:
                stats = (await daemon.counters())["control"]
                return bool(stats["subscribers"] == want)

            try:
                await poll_until(lambda: subscribed(1), "the watch subscribed")
                os.close(read_end)
                with anyio.fail_after(20):
                    code = await watch.wait()
                await poll_until(lambda: subscribed(0), "the daemon to drop the subscriber")
            finally:
                if watch.returncode is None:
                    watch.kill()
                await watch.aclose()
    assert code == 0
