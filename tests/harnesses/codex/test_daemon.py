"""The Codex app-server daemon source: its pure view, the /proc proof, and the connection.

The real Codex 0.171.0 daemon drives it in tests/harnesses/codex/test_real_panes.py. Here the
connection is also exercised against a JSON-RPC-over-WebSocket server written with the same
library (wsproto): only a stand-in can send what the real daemon never sends (a request to the
client, a broken frame, a hang-up at a chosen moment), so that is what it is used for.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
import wsproto
import wsproto.events

import messages
from actors.harnesses import catalog
from actors.harnesses.codex.daemon import (
    MCP_PROOF,
    CodexDaemonSource,
    DaemonView,
    RpcStream,
    control_socket,
    parse_origin,
    socket_state,
)
from actors.sources import fswatch, procfs
from tests import support
from tests.support.daemon import start_token
from tests.support.polling import poll_until
from tests.support.reference_model import SessionTable
from tests.support.sinks import ListSink

# Now: the source takes the daemon's emittedAtMs only within a day of its own clock.
AT = time.time_ns() // 1_000_000


@pytest.mark.parametrize(
    ("origin", "port"),
    [
        ("http://127.0.0.1:35175", 35175),
        ("http://[::1]:8080", 8080),
        ("http://localhost:9", 9),
        ("https://127.0.0.1:443", 443),
        ("http://10.0.0.2:35175", None),  # not loopback: not a TUI's own listener
        ("http://127.0.0.1", None),
        ("ftp://127.0.0.1:21", None),
        ("http://127.0.0.1:99999", None),
        (None, None),
        (35175, None),
        ("http://127.0.0.1:1" + "0" * 300, None),
    ],
)
def test_parse_origin(origin: object, port: int | None) -> None:
    assert parse_origin(origin) == port


TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:8A47 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4711 1
   1: 0100007F:8A47 0100007F:AE1C 01 00000000:00000000 00:00000000 00000000     0        0 4712 1
   2: 00000000:8A47 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4713 1
   3: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4714 1
   4: garbage
   5: 0100007F:8A47 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 x 1
"""


def test_listening_inodes_are_loopback_listeners_of_that_port_only() -> None:
    # 0x8A47 = 35399: LISTEN on 127.0.0.1 (4711); an established one (4712) and one on every
    # address (4713) are not the TUI's loopback listener; another port (4714) neither.
    assert procfs.parse_listening_inodes(TCP, 35399) == {4711}
    assert procfs.parse_listening_inodes(TCP, 8080) == {4714}
    assert procfs.parse_listening_inodes("", 35399) == set()


@pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="needs Linux /proc/net/tcp")
def test_the_process_holding_a_real_loopback_listener_is_found() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        inodes = procfs.listening_inodes(port)
        assert inodes == {os.fstat(listener.fileno()).st_ino}
        assert procfs.socket_holders([1, os.getpid()], inodes) == [os.getpid()]
    assert procfs.listening_inodes(port) == set()


def _thread(thread_id: str, **extra: Any) -> dict[str, Any]:
    return {"id": thread_id, "ephemeral": False, "threadSource": "user", "parentThreadId": None,
            "cliVersion": "0.171.0", "status": {"type": "idle"}, **extra}


def test_the_view_maps_daemon_statuses_to_evidence() -> None:
    view = DaemonView(daemon=(77, "9"))
    assert view.learn(_thread("t1")) is not None
    evidence, attached = view.status("t1", {"type": "active", "activeFlags": ["waitingOnApproval"]},
                                     AT, AT + 1)
    assert evidence == messages.ThreadStatus(
        key=messages.SessionKey("codex", "t1"), status="active", at_ms=AT, observed_at_ms=AT + 1,
        flags=("waitingOnApproval",), pid=77, start_token="9", version="0.171.0", serial=1,
    )
    assert attached is True  # first loaded status of a thread learnt unloaded: an attachment
    assert view.status("t1", {"type": "idle"}, AT, AT)[1] is False
    # a reload (codex resume, a TUI reconnecting) is notLoaded -> loaded
    assert view.status("t1", {"type": "notLoaded"}, AT, AT)[1] is False
    assert view.status("t1", {"type": "idle"}, AT, AT)[1] is True
    # unknown words, malformed statuses and unknown threads are no evidence
    assert view.status("t1", {"type": "exploded"}, AT, AT) == (None, False)
    assert view.status("t1", {"activeFlags": []}, AT, AT) == (None, False)
    assert view.status("nope", {"type": "idle"}, AT, AT) == (None, False)
    closed = view.closed("t1", AT, AT)
    assert closed is not None and closed.status == "closed"
    assert view.closed("t1", AT, AT) is None and "t1" not in view.threads


def test_a_thread_that_goes_active_idle_active_in_one_millisecond_shows_all_three() -> None:
    # The daemon stamps emittedAtMs in milliseconds; the reducer drops a record identical to one
    # it has seen, so the view's serial keeps the second `active` apart from the first.
    view = DaemonView(daemon=(os.getpid(), start_token(os.getpid())))
    view.learn(_thread("t1"))
    words = ("active", "idle", "active")
    records = [r for word in words if (r := view.status("t1", {"type": word}, AT, AT)[0])]
    assert [r.serial for r in records] == [1, 2, 3]
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    assert [t.after.turn for r in records for t in table.apply(r)] == ["working", "idle", "working"]
    assert table.apply(records[-1]) == []  # the same record twice still counts once
    assert table.ignored == {"duplicate": 1}


def test_the_view_hides_title_threads_and_routes_children_to_their_root() -> None:
    view = DaemonView(daemon=(77, "9"))
    view.learn(_thread("title", ephemeral=True, threadSource="thread_title"))
    assert view.status("title", {"type": "active"}, AT, AT) == (None, False)
    view.learn(_thread("child", parentThreadId="root"))
    evidence, attached = view.status("child", {"type": "active"}, AT, AT)
    assert evidence is not None and evidence.root_key == messages.SessionKey("codex", "root")
    assert attached is False  # a child thread is never what a pane shows
    assert view.learn({"id": ""}) is None and view.learn("not a thread") is None
    # a rollout path is kept only when its name is that thread's (rollout-<time>-<id>.jsonl)
    own = f"/h/sessions/rollout-2026-12-01T13-27-00-{THREAD}.jsonl"
    learnt = view.learn(_thread(THREAD, path=own))
    assert learnt is not None and learnt.path == own
    learnt = view.learn(_thread(THREAD, path=None))
    assert learnt is not None and learnt.path == own  # a later object without one keeps it
    other = view.learn(_thread("01a231c9-0000-78a2-bd0b-c8aa2b92f11e", path=own))
    assert other is not None and other.path is None
    assert view.learn({"id": "x" * 300}) is None


# --------------------------------------------------------------------------- the connection


class FakeDaemon:
    """A JSON-RPC-over-WebSocket server on a unix socket (wsproto), scripted by the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.threads: dict[str, dict[str, Any]] = {"t1": _thread("t1")}
        self.origins: dict[str, str] = {"t1": "http://127.0.0.1:40001"}
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self.peer: Callable[[dict[str, Any]], Any] | None = None
        self._streams: list[tuple[anyio.abc.SocketStream, wsproto.WSConnection]] = []
        self.changed = anyio.Event()

    def _answer(self, body: dict[str, Any]) -> dict[str, Any] | None:
        method, params = body.get("method"), body.get("params") or {}
        if method == "initialize":
            return {"userAgent": "codex-tui/0.171.0"}
        if method == "thread/loaded/list":
            return {"data": list(self.threads), "nextCursor": None}
        if method == "thread/read":
            return {"thread": self.threads[params["threadId"]]}
        if method == "mcpServerStatus/list":
            assert params["serverName"] == "codex_tui"
            return {"data": [{"name": "codex_tui", "runtimeStatus": "connected",
                              "httpOrigin": self.origins.get(params["threadId"])}],
                    "nextCursor": None}
        return None

    async def send(self, body: dict[str, Any] | str) -> None:
        """Send a frame to the latest connection."""
        stream, ws = self._streams[-1]
        data = body if isinstance(body, str) else json.dumps(body)
        await stream.send(ws.send(wsproto.events.Message(data=data)))

    async def hang_up(self) -> None:
        stream, _ = self._streams[-1]
        await stream.aclose()

    async def serve(self, stream: anyio.abc.SocketStream) -> None:
        ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        self.connections += 1
        self._streams.append((stream, ws))
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError,
                                 anyio.ClosedResourceError):
            async with stream:
                while True:
                    ws.receive_data(await stream.receive())
                    for event in ws.events():
                        if isinstance(event, wsproto.events.Request):
                            await stream.send(ws.send(wsproto.events.AcceptConnection()))
                        elif isinstance(event, wsproto.events.TextMessage):
                            body = json.loads(event.data)
                            self.received.append(body)
                            result = self._answer(body)
                            if result is not None and "id" in body:
                                await stream.send(ws.send(wsproto.events.Message(
                                    data=json.dumps({"id": body["id"], "result": result}))))
                            self.changed.set()
                            self.changed = anyio.Event()

    async def wait_received(self, check: Callable[[list[dict[str, Any]]], bool]) -> None:
        while not check(self.received):
            await self.changed.wait()


@asynccontextmanager
async def fake_daemon(
    home: Path,
    *,
    link_first: bool = True,
    before_bind: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[FakeDaemon]:
    """The daemon's socket in a short directory, linked from ``home`` as Codex links it:
    the link first (then ``before_bind``, then the bind), or the bind first."""
    short = Path(tempfile.mkdtemp(prefix="cxd-", dir="/tmp"))
    target = short / "sock"
    link = control_socket(home)
    link.parent.mkdir(parents=True, exist_ok=True)
    if link_first:
        link.symlink_to(target)
        if before_bind is not None:
            await before_bind()
    fake = FakeDaemon(target)
    listener = await anyio.create_unix_listener(target)
    if not link_first:
        link.symlink_to(target)
    try:
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, fake.serve)
            yield fake
            tg.cancel_scope.cancel()
    finally:
        with contextlib.suppress(OSError):
            target.unlink()
        await anyio.Path(short).rmdir()


def _resolver(ports: dict[int, tuple[int, str]]) -> Callable[[int], tuple[int, str] | None]:
    return ports.get


async def test_the_source_reports_loaded_threads_attachments_and_broadcasts(
    tmp_path: Path,
) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    with anyio.fail_after(20):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            source = CodexDaemonSource(home, resolve=_resolver({40001: (4242, "77")}),
                                       retry_max=0.5)
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            init = fake.received[0]
            assert init["method"] == "initialize"
            assert init["params"]["clientInfo"]["name"] == "paneward"
            # what was loaded: its status, and the TUI its codex_tui MCP server is
            (status,) = sink.of(messages.ThreadStatus)
            assert (status.key.session_id, status.status, status.pid) == ("t1", "idle", os.getpid())
            (attached,) = sink.of(messages.ClientAttached)
            assert (attached.key.session_id, attached.pid, attached.start_token,
                    attached.proof) == ("t1", 4242, "77", MCP_PROOF)

            # a broadcast status, stamped with the daemon's own emittedAtMs
            await fake.send({"method": "thread/status/changed", "emittedAtMs": AT,
                             "params": {"threadId": "t1", "status": {
                                 "type": "active", "activeFlags": ["waitingOnApproval"]}}})
            await sink.wait_for(lambda items: len(items) == 3)
            last = sink.of(messages.ThreadStatus)[-1]
            assert (last.status, last.flags, last.at_ms) == ("active", ("waitingOnApproval",), AT)
            # t1 has no rollout path: its call cannot be named, and that is counted
            assert last.summary is None and source.statistics().unnamed_waits == 1

            # a new thread: its status, then its attachment (a second TUI)
            fake.threads["t2"] = _thread("t2")
            fake.origins["t2"] = "http://127.0.0.1:40002"
            source._resolve = _resolver({40001: (4242, "77"), 40002: (4343, "78")})
            await fake.send({"method": "thread/started", "emittedAtMs": AT + 5,
                             "params": {"thread": fake.threads["t2"]}})
            await sink.wait_for(lambda items: len(sink.of(messages.ClientAttached)) == 2)
            second = sink.of(messages.ClientAttached)[-1]
            assert (second.key.session_id, second.pid, second.at_ms) == ("t2", 4343, AT + 5)

            # a thread nothing listens for (its TUI is gone): no attachment, counted
            fake.threads["t3"] = _thread("t3")
            fake.origins["t3"] = "http://127.0.0.1:40003"
            await fake.send({"method": "thread/started", "params": {"thread": fake.threads["t3"]}})
            await sink.wait_for(lambda items: any(
                isinstance(m, messages.ThreadStatus) and m.key.session_id == "t3" for m in items))
            await poll_until(lambda: source.statistics().unresolved_clients == 1, "t3 looked up")
            assert len(sink.of(messages.ClientAttached)) == 2

            # a request to this client is refused; unknown notifications are counted
            await fake.send({"id": 99, "method": "item/commandExecution/requestApproval",
                             "params": {}})
            await fake.wait_received(lambda r: any(b.get("id") == 99 for b in r))
            refusal = next(b for b in fake.received if b.get("id") == 99)
            assert refusal["error"]["code"] == -32601
            await fake.send({"method": "turn/started", "params": {"threadId": "t1"}})
            await fake.send({"method": "thread/closed", "params": {"threadId": "t2"}})
            await sink.wait_for(lambda items: any(
                isinstance(m, messages.ThreadStatus) and m.status == "closed" for m in items))
            assert source.statistics().ignored_notifications >= 1
            tg.cancel_scope.cancel()


async def test_a_notification_in_the_same_read_as_the_handshakes_answer_is_served() -> None:
    """The peer writes its handshake answer and a notification at once (one ``send``, so one
    read here): ``open`` returns at the answer and ``serve`` hands the notification on."""
    notice = {"method": "thread/status/changed", "params": {"threadId": "t1"}}
    got: list[dict[str, Any]] = []
    served = anyio.Event()

    def notify(body: dict[str, Any]) -> None:
        got.append(body)
        served.set()

    ours, theirs = socket.socketpair()
    with anyio.fail_after(10):
        async with (await anyio.abc.SocketStream.from_socket(ours) as stream,
                    await anyio.abc.SocketStream.from_socket(theirs) as peer):
            ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
            rpc = RpcStream(stream)
            async with anyio.create_task_group() as tg:
                tg.start_soon(rpc.open)
                ws.receive_data(await peer.receive())
                assert any(isinstance(e, wsproto.events.Request) for e in ws.events())
                await peer.send(ws.send(wsproto.events.AcceptConnection())
                                + ws.send(wsproto.events.Message(data=json.dumps(notice))))
            async with anyio.create_task_group() as tg:
                tg.start_soon(rpc.serve, notify)
                await served.wait()
                tg.cancel_scope.cancel()
    assert got == [notice]


async def test_the_source_reconnects_after_a_hang_up_or_a_broken_frame(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    with anyio.fail_after(30):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            source = CodexDaemonSource(home, resolve=_resolver({}), retry_max=0.2)
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            await fake.hang_up()  # the daemon stopped (or restarted)
            while fake.connections < 2:
                await fake.changed.wait()
            await source.wait_connected()
            await fake.send("this is not JSON")  # a broken peer: dropped, then reconnected
            while fake.connections < 3:
                await fake.changed.wait()
            await source.wait_connected()
            stats = source.statistics()
            assert (stats.connects, stats.disconnects, stats.protocol_errors) == (3, 2, 1)
            assert stats.connected
            tg.cancel_scope.cancel()


@asynccontextmanager
async def waiting_source(home: Path, sink: ListSink) -> AsyncIterator[CodexDaemonSource]:
    """A source running where no daemon listens yet, once its first try has failed. Its retry
    delay is far longer than any test's deadline: only a change wakes it."""
    (home / "app-server-control").mkdir(parents=True)
    async with anyio.create_task_group() as tg:
        source = CodexDaemonSource(home, resolve=_resolver({}), retry_min=60, retry_max=60)
        tg.start_soon(source.run, sink)
        await poll_until(lambda: source.statistics().connect_failures >= 1, "a first look")
        yield source
        tg.cancel_scope.cancel()


async def test_without_a_daemon_the_source_waits_and_starts_nothing(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    with anyio.fail_after(20):
        async with waiting_source(home, sink) as source:
            assert sink.items == [] and not source.statistics().connected
            # the daemon appears, its link last: the change in its directory wakes the source
            async with fake_daemon(home, link_first=False):
                await source.wait_connected()
                # counted while connected: the fake's exit makes the source try again
                assert source.statistics().connect_failures == 1


async def test_a_daemon_that_links_before_it_binds_is_found_when_it_binds(
    tmp_path: Path,
) -> None:
    """The link wakes the source, which fails to connect to a target not yet bound; it then
    watches the target's directory too, and the bind wakes it (no retry timer here)."""
    home = tmp_path / "codex-home"
    with anyio.fail_after(20):
        async with waiting_source(home, ListSink()) as source:

            async def linked_and_tried() -> None:
                await poll_until(lambda: source.statistics().connect_failures >= 2,
                                 "a try at the link")

            async with fake_daemon(home, before_bind=linked_and_tried):
                await source.wait_connected()
                assert source.statistics().connect_failures == 2


async def test_a_home_that_never_ran_a_daemon_is_followed_from_its_first_daemon(
    tmp_path: Path,
) -> None:
    """Neither the home nor its control directory exist when the source starts: the wait
    watches the nearest existing ancestor, so the first daemon is found when it appears, not
    when the retry delay (far beyond the deadline here) runs out."""
    home = tmp_path / "fresh" / "codex-home"
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            source = CodexDaemonSource(home, resolve=_resolver({}), retry_min=60, retry_max=60)
            tg.start_soon(source.run, ListSink())
            await poll_until(lambda: source.statistics().connect_failures >= 1, "a first look")
            assert not home.exists()
            async with fake_daemon(home, link_first=False):  # makes the directories, then binds
                await source.wait_connected()
            assert source.statistics().watch_errors == 0
            tg.cancel_scope.cancel()


async def test_a_daemon_that_breaks_every_connection_is_retried_ever_more_slowly(
    tmp_path: Path,
) -> None:
    """A socket that answers the handshake and then sends a bad frame: each connection ends
    before it worked for a while, so each one doubles the delay (no reset to the minimum)."""
    home = tmp_path / "codex-home"
    with anyio.fail_after(30):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            source = CodexDaemonSource(home, resolve=_resolver({}), retry_min=0.01,
                                       retry_max=100)
            tg.start_soon(source.run, ListSink())
            delays = []
            for n in range(1, 5):
                await source.wait_connected()
                if n > 1:
                    delays.append(source.statistics().retry_delay)
                await fake.send("this is not JSON")
                while fake.connections <= n:
                    await fake.changed.wait()
            assert delays == [0.01, 0.02, 0.04]
            # Stopped once connected and quiet: a receive cancelled in the loop iteration in
            # which the fake's answer arrives trips a race inside anyio's unix socket stream.
            await source.wait_connected()
            assert source.statistics().protocol_errors == 4
            tg.cancel_scope.cancel()


async def test_a_socket_bound_before_the_wait_watches_ends_the_wait_at_once(
    tmp_path: Path,
) -> None:
    """The window the watches cannot see: the socket changes after the failed try but before
    the wait's watches are in place. The wait compares with what the try saw and returns.
    (The private wait, driven directly: no public step stops the source inside that window.)"""
    home = tmp_path / "codex-home"
    link = control_socket(home)
    link.parent.mkdir(parents=True)
    seen = socket_state(link)
    assert seen == (None, None)
    source = CodexDaemonSource(home, resolve=_resolver({}), retry_min=60, retry_max=60)
    with anyio.fail_after(20):
        async with fake_daemon(home):
            assert socket_state(link) != seen
            # what it returns is the look the next try connects with
            look = await source._wait_for_daemon(60, seen)
            assert look == (socket_state(link), str(await anyio.Path(link).resolve()))
    # That it waits while nothing changed (a stale socket): the test above, where a wait that
    # returned at once would have counted a failure per try.


def test_the_wait_watches_the_homes_ancestor_only_while_the_control_directory_is_missing(
    tmp_path: Path,
) -> None:
    """Codex keeps making files in its home (logs, sqlite journals) as it starts: once the
    control directory exists, the home's watch, set while it did not, is dropped, so those
    files no longer wake the wait. (The private arming step, driven directly: the wake-ups
    it saves change no outcome a public step shows.)"""
    home = tmp_path / "codex-home"
    home.mkdir()
    source = CodexDaemonSource(home, resolve=_resolver({}), retry_min=60, retry_max=60)
    seen = socket_state(control_socket(home))
    with fswatch.Inotify() as inotify:
        source._arm(inotify, seen)
        assert inotify.watched == [str(home)]
        control_socket(home).parent.mkdir()
        source._arm(inotify, seen)
        assert inotify.watched == [str(control_socket(home).parent)]


async def test_a_wait_already_open_when_the_source_connects_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    with anyio.fail_after(20):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            fake.threads["t1"]["status"] = {"type": "active", "activeFlags": ["waitingOnApproval"]}
            source = CodexDaemonSource(home, resolve=_resolver({40001: (4242, "77")}))
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            (status,) = sink.of(messages.ThreadStatus)
            assert (status.status, status.flags) == ("active", ("waitingOnApproval",))
            tg.cancel_scope.cancel()


#: A thread id as Codex makes them (its rollout's name ends with it).
THREAD = "01a231c9-82d1-78a2-bd0b-c8aa2b92f11e"
ROLLOUT = support.FIXTURES / "codex" / "rollout-daemon-approvals.jsonl"


def _rollout(tmp_path: Path, lines: int) -> Path:
    """The real daemon-mode rollout, as its first ``lines`` lines, where Codex puts it."""
    path = tmp_path / "sessions" / f"rollout-2026-12-01T13-27-00-{THREAD}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(ROLLOUT.read_bytes().splitlines(keepends=True)[:lines]))
    return path


async def test_an_approval_wait_names_the_pending_call_from_the_rollout(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    approval = {"type": "active", "activeFlags": ["waitingOnApproval"]}
    with anyio.fail_after(20):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            # a thread learnt before it had a rollout: its path is asked for at the wait
            fake.threads = {THREAD: _thread(THREAD)}
            source = CodexDaemonSource(home, resolve=_resolver({}))
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            # the real rollout as it was when the daemon broadcast the first wait
            rollout = _rollout(tmp_path, 11)
            fake.threads[THREAD]["path"] = str(rollout)
            await fake.send({"method": "thread/status/changed", "emittedAtMs": AT,
                             "params": {"threadId": THREAD, "status": approval}})
            await sink.wait_for(lambda items: len(items) == 2)
            wait = sink.of(messages.ThreadStatus)[-1]
            # the reason Codex's PermissionRequest hook gives for the same dialog
            assert wait.summary == "permission: Bash: echo hi > hi.txt"
            # after Esc (its output "aborted", turn_aborted) nothing is pending: not named
            _rollout(tmp_path, 15)
            await fake.send({"method": "thread/status/changed", "emittedAtMs": AT + 1,
                             "params": {"threadId": THREAD, "status": approval}})
            await sink.wait_for(lambda items: len(items) == 3)
            assert sink.of(messages.ThreadStatus)[-1].summary is None
            # other statuses carry no reason
            await fake.send({"method": "thread/status/changed", "emittedAtMs": AT + 2,
                             "params": {"threadId": THREAD, "status": {"type": "idle"}}})
            await sink.wait_for(lambda items: len(items) == 4)
            assert sink.of(messages.ThreadStatus)[-1].summary is None
            stats = source.statistics()
            assert (stats.named_waits, stats.unnamed_waits) == (1, 1)
            tg.cancel_scope.cancel()


async def test_a_wait_open_at_connect_names_its_call_and_a_link_is_not_followed(
    tmp_path: Path,
) -> None:
    home = tmp_path / "codex-home"
    sink = ListSink()
    rollout = _rollout(tmp_path, 22)  # the second wait
    with anyio.fail_after(20):
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            fake.threads = {THREAD: _thread(THREAD, path=str(rollout), status={
                "type": "active", "activeFlags": ["waitingOnApproval"]})}
            source = CodexDaemonSource(home, resolve=_resolver({}))
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            (status,) = sink.of(messages.ThreadStatus)
            assert status.summary == "permission: Bash: echo hi > hi.txt"
            tg.cancel_scope.cancel()
        # the same rollout behind a symbolic link: never followed, the reason stays bare
        real = rollout.rename(tmp_path / "real.jsonl")
        rollout.symlink_to(real)
        sink = ListSink()
        home = tmp_path / "codex-home-2"
        async with fake_daemon(home) as fake, anyio.create_task_group() as tg:
            fake.threads = {THREAD: _thread(THREAD, path=str(rollout), status={
                "type": "active", "activeFlags": ["waitingOnApproval"]})}
            source = CodexDaemonSource(home, resolve=_resolver({}))
            tg.start_soon(source.run, sink)
            await source.wait_connected()
            (status,) = sink.of(messages.ThreadStatus)
            assert status.summary is None and source.statistics().unnamed_waits == 1
            tg.cancel_scope.cancel()
