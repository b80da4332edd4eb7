"""The control socket: the total request parser (fuzzed), then a real server under a real
supervisor: malformed and deeply nested requests, idle connections, the cap, the socket path;
a watcher gets every transition, many per write; the watchers share one subscription (a new one
starts exactly after what it joined at; one that stops reading is cut off alone)."""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.cli.control_client import request_lines
from actors.core.ingress.control_requests import (
    MAX_REQUEST_BYTES,
    BadRequest,
    StatusRequest,
    WatchRequest,
    parse_request,
    take_request,
)
from actors.sources.control_server import WATCH_SNDBUF, ControlServer, ControlServerError
from actors.sources.watch_fanout import Watcher, WatchFanout
from messages import Gap, RegistryStatus, SessionKey, Transition
from supervisor import Supervisor
from tests.support.daemon import PANEWARD
from tests.support.polling import poll_until, settle_until

# ------------------------------------------------------------------------------ the parser


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"op": "status"}', StatusRequest()),
        (b'{"op": "watch"}', WatchRequest()),
        (b'{"op": "watch", "since": null}', WatchRequest()),
        (b'{"op": "watch", "since": 12, "newer_field": [1, {"x": 2}]}', WatchRequest(12)),
        (b'{"op": "watch", "snapshot": true}', WatchRequest(snapshot=True)),
        (b'{"op": "watch", "snapshot": true, "since_ms": 1800000000000}',
         WatchRequest(snapshot=True, since_ms=1_800_000_000_000)),
        (b'{"op": "status", "format": "table", "all": true}', StatusRequest("table", True)),
        (b'{"op": "status", "format": "panes"}', StatusRequest("panes")),
    ],
)
def test_requests_are_parsed(line: bytes, expected: object) -> None:
    assert parse_request(line) == expected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"", "bad_json"),
        (b"{", "bad_json"),
        (b"[]", "not_object"),
        (b'"status"', "not_object"),
        (b"{}", "unknown_op"),
        (b'{"op": "shutdown"}', "unknown_op"),
        (b'{"op": ["status"]}', "unknown_op"),
        (b'{"op": "watch", "since": -1}', "bad_field"),
        (b'{"op": "watch", "since": true}', "bad_field"),
        (b'{"op": "watch", "since": "7"}', "bad_field"),
        (b'{"op": "watch", "snapshot": 1}', "bad_field"),
        (b'{"op": "watch", "since_ms": -1}', "bad_field"),
        (b'{"op": "watch", "since_ms": "1h"}', "bad_field"),
        (b'{"op": "status", "format": "xml"}', "bad_field"),
        (b'{"op": "status", "all": "yes"}', "bad_field"),
        (b'{"op": "st\x00atus"}', "nul_byte"),
        (b'{"op": "\xff"}', "invalid_utf8"),
        # Deep nesting made the old server raise RecursionError (and crash).
        (b'{"op": "status", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "too_long"),
        (b'{"op": "status", "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "too_deep"),
        (b"[" * 65 + b"]" * 65, "too_deep"),
    ],
)
def test_bad_requests_are_refused_with_a_reason(line: bytes, reason: str) -> None:
    result = parse_request(line)
    assert isinstance(result, BadRequest), result
    assert result.reason == reason


def test_take_request_finds_the_line_or_says_why_not() -> None:
    assert take_request(b'{"op": "status"}\n{"rest"', eof=False) == b'{"op": "status"}'
    assert take_request(b'{"op": "sta', eof=False) is None
    assert take_request(b'{"op": "status"}', eof=True) == b'{"op": "status"}'
    assert take_request(b"  ", eof=True) == BadRequest(
        "truncated", "no request before end of stream"
    )
    over = take_request(b"x" * (MAX_REQUEST_BYTES + 1), eof=False)
    assert isinstance(over, BadRequest) and over.reason == "too_long"


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                               max_size=3),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=200),
        _json_values.map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {"op": st.sampled_from(["status", "watch", "x"]) | _json_values},
            optional={"since": _json_values, "since_ms": _json_values},
        ).map(lambda v: json.dumps(v).encode()),
        st.integers(0, 5000).map(lambda d: b'{"op": "status", "x": ' + b"[" * d + b"]" * d
                                 + b"}"),
    ),
    st.integers(0, 200),
    st.booleans(),
)
def test_the_parser_is_total(data: bytes, cut: int, eof: bool) -> None:
    """Fuzz: any bytes, cut anywhere, give a request, a refusal with a reason, or "read on"."""
    for buffer in (data[:cut], data, data + b"\n" + data):
        taken = take_request(buffer, eof=eof)
        if isinstance(taken, bytes):
            result = parse_request(taken)
            assert isinstance(result, StatusRequest | WatchRequest | BadRequest)
            if isinstance(result, WatchRequest):
                assert result.since is None or result.since >= 0
                assert result.since_ms is None or result.since_ms >= 0
        else:
            assert taken is None or isinstance(taken, BadRequest)


# ------------------------------------------------------------------------------ a real server


def _ask(path: Path, line: bytes) -> list[bytes]:
    """Send one raw request line; every line of the answer (blocking)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(20)
        sock.connect(os.fspath(path))
        sock.sendall(line)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(1 << 16):
            data += chunk
    return data.splitlines()


async def _no_journal(since: int, until: int) -> list[Transition | Gap]:
    return []


@asynccontextmanager
async def serving(path: Path, **kwargs: Any) -> AsyncIterator[tuple[Supervisor, ControlServer]]:
    async with Supervisor() as sup:
        server = ControlServer(path, sup, lambda: {"supervisor": {}}, _no_journal, **kwargs)
        sup.start_actor(server, name="control", essential=True)
        await server.wait_listening()
        yield sup, server


@pytest.fixture
def control(tmp_path: Path) -> Path:
    directory = tmp_path / "rt"
    directory.mkdir(mode=0o700)
    return directory / "control.sock"


async def test_malformed_and_deeply_nested_requests_never_stop_the_server(control: Path) -> None:
    """Each is answered with its reason; the old server crashed on deep nesting, and after four
    crashes `paneward status` said "no daemon" while the daemon ran."""
    deep = b'{"op": "status", "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n"
    with anyio.fail_after(30):
        async with serving(control) as (sup, server):
            for _ in range(6):
                [answer] = await anyio.to_thread.run_sync(_ask, control, deep)
                assert json.loads(answer)["error"].startswith("bad request: JSON nested")
            [answer] = await anyio.to_thread.run_sync(_ask, control, b"[1]\n")
            assert json.loads(answer) == {"error": "bad request: request must be a JSON object"}
            [status] = await anyio.to_thread.run_sync(_ask, control, b'{"op": "status"}\n')
            assert json.loads(status)["seq"] == 0
            stats = server.statistics()
            states = sup.statistics().actor_states
    assert stats.bad_requests == 7 and stats.rejected == {"too_deep": 6, "not_object": 1}
    assert stats.status == 1
    assert states == {"control": "running"}


async def test_an_idle_connection_is_closed_at_the_head_deadline(control: Path) -> None:
    with anyio.fail_after(30):
        async with serving(control, head_deadline=0.3) as (_, server):
            async with await anyio.connect_unix(control) as idle:
                with pytest.raises(anyio.EndOfStream):  # hung up on, without a word
                    await idle.receive()
            async with await anyio.connect_unix(control) as partial:
                await partial.send(b'{"op": "sta')
                answer = b""
                with pytest.raises(anyio.EndOfStream):  # told why, then hung up on
                    while True:
                        answer += await partial.receive()
            stats = server.statistics()
    assert json.loads(answer) == {"error": "bad request: no request line within the deadline"}
    assert stats.admission is not None and stats.admission.timeouts == 2
    assert stats.rejected == {"truncated": 1}


async def test_at_the_cap_status_is_still_answered(control: Path) -> None:
    """Idle connections fill the cap: the idlest makes room for a real request."""
    with anyio.fail_after(30):
        async with serving(control, cap=4, head_deadline=60) as (_, server):
            held = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(4)]
            try:
                for sock in held:
                    sock.connect(os.fspath(control))
                await poll_until(
                    lambda: (a := server.statistics().admission) is not None and a.open == 4,
                    "four connections in",
                )
                lines = await anyio.to_thread.run_sync(
                    lambda: list(request_lines(control, {"op": "status"}))
                )
            finally:
                for sock in held:
                    sock.close()
            stats = server.statistics()
    assert json.loads(lines[0])["seq"] == 0
    assert stats.admission is not None
    assert stats.admission.evicted >= 1 and stats.admission.cap == 4


async def test_subscribers_have_their_own_cap_and_a_half_closed_one_still_reads(
    control: Path,
) -> None:
    """Watches leave the request slots (one here) for their own cap (two): status is answered
    with both held, a third watch is refused with the reason (real `paneward watch` and `wait`
    print it and exit 2), and a subscriber that shut its writing side (a client done with its
    request) is no hangup: it gets the transitions."""
    with anyio.fail_after(30):
        async with serving(control, cap=1, watch_cap=2, head_deadline=60) as (sup, server):
            streams = [await anyio.connect_unix(control) for _ in range(2)]
            try:
                for stream in streams:
                    await stream.send(b'{"op": "watch"}\n')
                    await stream.send_eof()
                await poll_until(lambda: server.statistics().subscribers == 2, "two subscribers")
                refused = await anyio.to_thread.run_sync(_ask, control, b'{"op": "watch"}\n')
                hook = os.fspath(control.with_name("hook.sock"))
                clients = [
                    await anyio.run_process(
                        [os.fspath(PANEWARD), *argv, "--socket", hook], check=False
                    )
                    for argv in (["watch"], ["wait", "--session", "x", "--until", "needs_input"])
                ]
                [answer] = await anyio.to_thread.run_sync(_ask, control, b'{"op": "status"}\n')
                sup.inject_nowait(status(1, "busy"))
                lines = [
                    json.loads(await BufferedByteReceiveStream(s).receive_until(b"\n", 1 << 20))
                    for s in streams
                ]
                stats = server.statistics()
            finally:
                for stream in streams:
                    await stream.aclose()
            await poll_until(lambda: server.statistics().subscribers == 0, "both gone")
            gone = server.statistics()
    assert json.loads(refused[0]) == {"error": "too many watchers: 2 (the cap); try again later"}
    # `paneward watch` and `wait` say so and exit 2, as when no daemon answers.
    assert [(c.returncode, c.stdout) for c in clients] == [(2, b""), (2, b"")]
    assert [c.stderr.decode() for c in clients] == [
        f"paneward {word}: too many watchers: 2 (the cap); try again later\n"
        for word in ("watch", "wait")
    ]
    assert stats.watches_refused == 3
    assert json.loads(answer)["seq"] == 0
    assert [line["seq"] for line in lines] == [1, 1]
    assert (stats.watch_cap, stats.hangups) == (2, 0)
    assert stats.admission is not None and stats.admission.open == 0
    assert gone.hangups == 2


async def test_a_file_in_the_sockets_place_is_refused_and_kept(control: Path) -> None:
    path = anyio.Path(control)
    await path.write_text("precious")
    with anyio.fail_after(10), pytest.raises(ControlServerError, match="not a socket"):
        await ControlServer(control, Supervisor(), dict, _no_journal).run(None)
    assert await path.read_text() == "precious"
    assert stat.S_ISREG((await path.lstat()).st_mode)


async def test_a_live_socket_of_another_daemon_is_left_alone(control: Path) -> None:
    with anyio.fail_after(30):
        async with serving(control):
            with pytest.raises(ControlServerError, match="already listening"):
                await ControlServer(control, Supervisor(), dict, _no_journal).run(None)
            [status] = await anyio.to_thread.run_sync(_ask, control, b'{"op": "status"}\n')
            assert json.loads(status)["seq"] == 0


# ------------------------------------------------------------------------------ watch batches

T = 1_800_000_000_000


def status(n: int, word: str, later_ms: int = 0) -> RegistryStatus:
    """Session ``watch-n``'s registry status ``word``, ``later_ms`` after its first."""
    return RegistryStatus(
        key=SessionKey("claude-code", f"watch-{n}"),
        pid=10_000 + n,
        start_token="1",
        status=word,
        at_ms=T + n + later_ms,
        observed_at_ms=T + n + later_ms,
    )


async def test_a_watcher_gets_every_transition_and_a_burst_in_few_writes(tmp_path: Path) -> None:
    """A burst of 100 transitions reaches a watcher in order, in a write or two: one system call
    per wake-up of the server, not one per transition (ten watchers of a busy daemon kept up
    with 10,000 transitions a second this way; bench/bench_watch.py)."""

    async def journal(since: int, until: int) -> list[Transition]:
        return []

    def statistics() -> dict[str, Any]:
        return {}

    path = tmp_path / "control.sock"
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            server = ControlServer(path, sup, statistics, journal)
            sup.start_actor(server, name="control")
            await server.wait_listening()
            async with await anyio.connect_unix(path) as stream:
                await stream.send(b'{"op": "watch"}\n')
                reader = BufferedByteReceiveStream(stream)
                # It subscribes in the step that counts the watch.
                await settle_until(lambda: server.statistics().watches == 1)
                for n in range(100):
                    sup.inject_nowait(status(n, "busy"))  # 100 new sessions, one step
                lines = [json.loads(await reader.receive_until(b"\n", 1 << 20)) for _ in range(100)]
                stats = server.statistics()
    assert [line["seq"] for line in lines] == list(range(1, 101))
    assert {line["key"]["session_id"] for line in lines} == {f"watch-{n}" for n in range(100)}
    assert stats.watch is not None
    assert stats.watch.lines == 100 and stats.watch.writes <= 2


async def _lines_of(watcher: Watcher, count: int) -> list[dict[str, Any]]:
    """The next ``count`` lines queued for ``watcher`` (parsed)."""
    lines: list[dict[str, Any]] = []
    while len(lines) < count:
        write = await watcher.next_write()
        assert write is not None, f"the watcher ended after {len(lines)} of {count} lines"
        lines += [json.loads(line) for line in write[0].splitlines()]
    return lines


async def test_a_watcher_joining_meets_the_stream_exactly_where_it_joined() -> None:
    """Watchers share one hub subscription. One joining while transitions are published and
    not yet pumped to the others starts right after them (its snapshot's seq): each transition
    is encoded once, and no watcher gets one twice or misses one."""
    with anyio.fail_after(20):
        async with Supervisor() as sup, anyio.create_task_group() as tg:
            fanout = WatchFanout(sup, buffer=1000, batch=512)
            tg.start_soon(fanout.run)
            first = fanout.join()
            for n in range(5):
                sup.inject_nowait(status(n, "busy"))  # five new sessions
            assert [line["seq"] for line in await _lines_of(first, 5)] == [1, 2, 3, 4, 5]
            # The five actors now wait on empty mailboxes: what follows is applied inline and
            # published in this very step, before the pump can run.
            for n in range(5):
                sup.inject_nowait(status(n, "idle", later_ms=10))
            assert sup.seq == 10
            second = fanout.join()
            assert second.seq == 10
            for n in range(5):
                sup.inject_nowait(status(n, "busy", later_ms=20))
            assert [line["seq"] for line in await _lines_of(first, 10)] == list(range(6, 16))
            assert [line["seq"] for line in await _lines_of(second, 5)] == list(range(11, 16))
            stats = fanout.statistics()
            assert (stats.watchers, stats.pumped, stats.overflows) == (2, 15, 0)
            fanout.leave(first)
            fanout.leave(second)
            assert fanout.statistics().watchers == 0
            tg.cancel_scope.cancel()


def _pumped(server: ControlServer) -> int:
    watch = server.statistics().watch
    return 0 if watch is None else watch.pumped


async def test_a_watcher_that_stops_reading_is_cut_off_alone(tmp_path: Path) -> None:
    """Two real watch clients; one stops reading. Once the kernel's socket buffers and then its
    queue (``watch_buffer`` transitions) are full, it gets what was queued, one Overflow line
    naming the first transition it missed and how many, and EOF. The other gets all of them."""

    async def journal(since: int, until: int) -> list[Transition]:
        return []

    path = tmp_path / "control.sock"
    # Lines are over 500 bytes: far more than the watcher's socket send buffer holds (the
    # kernel allocates twice WATCH_SNDBUF) plus the client's receive buffer.
    total = 25 * (4 * WATCH_SNDBUF // (500 * 25))  # whole steps of 25 (below)
    with anyio.fail_after(60):
        async with Supervisor() as sup:
            server = ControlServer(path, sup, dict, journal, watch_buffer=100)
            sup.start_actor(server, name="control")
            await server.wait_listening()
            async with await anyio.connect_unix(path) as fast, \
                    await anyio.connect_unix(path) as slow:
                await fast.send(b'{"op": "watch"}\n')
                await slow.send(b'{"op": "watch"}\n')
                await settle_until(lambda: server.statistics().watches == 2)
                fast_reader = BufferedByteReceiveStream(fast)
                seqs: list[int] = []
                for n in range(total):
                    word = "busy" if (n // 50) % 2 == 0 else "idle"
                    sup.inject_nowait(status(n % 50, word, later_ms=n))
                    if n % 25 == 24:
                        # A step of 25 transitions: the pump takes them as one run (a quarter
                        # of the buffer), the fast watcher reads every one.
                        while _pumped(server) < n + 1:  # bounded by fail_after
                            await anyio.lowlevel.checkpoint()
                        while len(seqs) < n + 1:
                            line = await fast_reader.receive_until(b"\n", 1 << 20)
                            seqs.append(json.loads(line)["seq"])

                def overflowed() -> bool:
                    watch = server.statistics().watch
                    return watch is not None and watch.overflows == 1

                await poll_until(overflowed, "the slow watcher's overflow")
                slow_reader = BufferedByteReceiveStream(slow)
                slow_lines = []
                with pytest.raises(anyio.IncompleteRead):
                    while True:
                        slow_lines.append(
                            json.loads(await slow_reader.receive_until(b"\n", 1 << 20))
                        )
                stats = server.statistics()
    assert seqs == list(range(1, total + 1))
    *got, marker = slow_lines
    assert [line["seq"] for line in got] == list(range(1, len(got) + 1))
    assert marker["type"] == "Overflow"
    assert marker["next_seq"] == len(got) + 1
    assert marker["dropped"] == total - len(got)
    assert "fell 100 transitions behind" in marker["reason"]
    assert stats.watch is not None and stats.watch.overflows == 1
    assert stats.watch.dropped == total - len(got)
