"""HookListener: pure framing/validation decisions, then a real Unix socket and a real http port."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import msgspec
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import messages
from actors.core.ingress.frames import (
    MAX_DEPTH,
    MAX_FRAME_BYTES,
    FrameSplitter,
    Oversize,
    Rejection,
    check_frame,
    nesting_depth,
    restamp,
)
from actors.core.ingress.http import (
    HttpClosed,
    HttpHook,
    HttpHookProtocol,
    HttpRefusal,
    NeedData,
    RequestHead,
    check_http_request,
)
from actors.core.ingress.limits import ConnectionCaps
from actors.harnesses.catalog import HOOK_ROUTES, HOOKS
from actors.sources.hook_listener import HookListener, HookListenerError, load_http_token
from tests import support
from tests.support.polling import poll_until
from tests.support.sinks import ListSink

AT = 1_795_999_000_000
FIXTURES = support.FIXTURES / "hooks"
ROOT = support.ROOT


def notify_frame(payload: Any, *, harness: str = "claude-code", pid: int | None = None) -> bytes:
    return json.dumps(
        {
            "type": "NotifyHook",
            "harness": harness,
            "payload": payload,
            "at_ms": AT,
            "observed_at_ms": AT,
            "pid": pid,
            "start_token": None,
        }
    ).encode()


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Listener counters have no event: poll them (tests.support.polling; callers bound it)."""
    await poll_until(predicate, within=3600)


@asynccontextmanager
async def running(listener: HookListener, sink: ListSink) -> AsyncIterator[HookListener]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, sink)
        await listener.wait_listening()
        yield listener
        tg.cancel_scope.cancel()


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "rt" / "paneward" / "hook.sock"


# --------------------------------------------------------------------------------------------
# Pure decisions


def test_splitter_splits_lines_across_chunks() -> None:
    splitter = FrameSplitter(max_frame=10)
    assert splitter.feed(b"ab") == []
    assert splitter.feed(b"c\nde\n\nf") == [b"abc", b"de", b""]
    assert splitter.close() == [b"f"]
    assert splitter.close() == []


def test_splitter_rejects_oversize_once_and_resynchronises() -> None:
    splitter = FrameSplitter(max_frame=4)
    assert splitter.feed(b"12345") == []  # over the limit: not buffered any further
    assert splitter.buffered == 0
    assert splitter.feed(b"678") == []
    assert splitter.feed(b"9\nok\n") == [Oversize(9), b"ok"]
    assert splitter.feed(b"toolong\nok2\n") == [Oversize(7), b"ok2"]
    assert splitter.feed(b"1234") == []
    assert splitter.feed(b"\n") == [b"1234"]  # exactly the limit is fine
    assert splitter.feed(b"abcdef") == []
    assert splitter.close() == [Oversize(6)]


def test_nesting_depth_ignores_brackets_in_strings() -> None:
    assert nesting_depth(b'{"a":[1,{"b":2}]}') == 3
    deep = b"[" * 100 + b"]" * 100
    assert nesting_depth(deep) == 100
    text = b'{"a":"' + b"[" * 200 + b'"}'
    assert nesting_depth(text) == 1
    escaped = b'{"a":"\\"' + b"{" * 100 + b'"}'
    assert nesting_depth(escaped) == 1


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"{" + b"\x00" + b"}", "nul_byte"),
        (b'{"type":"NotifyHook","payload":"\xff"}', "invalid_utf8"),
        (notify_frame({"a": json.loads("[" * 70 + "]" * 70)}), "too_deep"),
        (b'{"type":"NotifyHook"', "bad_json"),
        (b"not json", "bad_json"),
        (b'{"type":"Bogus","x":1}', "unknown_type"),
        (notify_frame("a string payload"), "invalid_message"),
        (notify_frame({}, harness="vim"), "invalid_message"),
        (b"[1,2]", "invalid_message"),
        (b'{"harness":"codex"}', "invalid_message"),
        (b"x" * (MAX_FRAME_BYTES + 1), "oversize"),
    ],
)
def test_check_frame_rejects_with_reason(frame: bytes, reason: str) -> None:
    result = check_frame(frame)
    assert isinstance(result, Rejection)
    assert result.reason == reason
    assert result.detail


def test_check_frame_depth_limit_is_exact() -> None:
    inner_ok = json.loads("[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2))
    assert not isinstance(check_frame(notify_frame({"a": inner_ok})), Rejection)
    inner_bad = json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    rejected = check_frame(notify_frame({"a": inner_bad}))
    assert isinstance(rejected, Rejection)
    assert rejected.reason == "too_deep"


def test_check_frame_accepts_every_real_claude_payload() -> None:
    lines = (FIXTURES / "claude-hooks.jsonl").read_text().splitlines()
    for line in lines:
        payload = json.loads(line)["stdin"]
        result = check_frame(notify_frame(payload, pid=4242))
        assert isinstance(result, messages.NotifyHook), result
        assert result.payload == payload
        assert result.pid == 4242


def test_restamp_sets_observed_time_only() -> None:
    message = check_frame(notify_frame({"hook_event_name": "Stop"}))
    assert isinstance(message, messages.NotifyHook)
    stamped = restamp(message, AT + 5)
    assert isinstance(stamped, messages.NotifyHook)
    assert stamped.observed_at_ms == AT + 5
    assert stamped.at_ms == AT
    assert msgspec.structs.replace(stamped, observed_at_ms=AT) == message


AUTH = b"Host: x\r\nX-Paneward-Token: tok\r\n"


def _request(body: bytes = b'{"hook_event_name": "Stop"}', extra: bytes = b"") -> bytes:
    return (
        b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH + extra
        + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )


def _events(data: bytes, *, eof: bool = True) -> list[object]:
    """Every event the protocol gives for ``data`` (answering each hook with 200)."""
    protocol = HttpHookProtocol("tok", HOOKS)
    protocol.receive_data(data)
    if eof:
        protocol.receive_data(b"")
    out: list[object] = []
    for _ in range(100):
        event = protocol.next_event(AT)
        out.append(event)
        if isinstance(event, HttpHook):
            protocol.respond(200, {})
        elif isinstance(event, NeedData | HttpClosed) or (
            isinstance(event, HttpRefusal) and event.close
        ):
            break
    return out


def test_http_protocol_parses_requests_with_h11() -> None:
    events = _events(_request() + _request(b'{"n": 2}', b"Connection: close\r\n"))
    hooks = [e.message.payload for e in events if isinstance(e, HttpHook)]
    assert hooks == [{"hook_event_name": "Stop"}, {"n": 2}]
    assert isinstance(events[-1], HttpClosed)  # Connection: close after the second
    # Keep-alive: a request split anywhere is one hook.
    whole = _request()
    for cut in (1, 20, len(whole) - 1):
        protocol = HttpHookProtocol("tok", HOOKS)
        protocol.receive_data(whole[:cut])
        assert isinstance(protocol.next_event(AT), NeedData)
        protocol.receive_data(whole[cut:])
        assert isinstance(protocol.next_event(AT), HttpHook)


@pytest.mark.parametrize(
    ("data", "status", "reason"),
    [
        (b"GARBAGE\r\n\r\n", 400, "http_bad_request"),
        (b"POST / HTTP/2\r\n\r\n", 400, "http_bad_request"),
        (b"POST / HTTP/1.1\r\nno colon\r\n\r\n", 400, "http_bad_request"),
        (b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH
         + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "http_bad_request"),
        # Digits str.isdigit() accepts but int() does not: a bad request, not a crash.
        (b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH
         + "Content-Length: \u00b2\r\n\r\n".encode(), 400, "http_bad_request"),
        (b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH
         + b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n", 400, "http_bad_request"),
        (b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH + b"X: " + b"a" * 20_000,
         431, "http_bad_request"),
        (b"POST /hook/claude-code HTTP/1.1\r\n" + AUTH + b"Content-Length: 5\r\n\r\n{",
         400, "http_bad_request"),  # truncated body at end of stream
        (_request(b"[1]"), 400, "http_not_object"),
        (_request(b'{"hook_event_name": "SessionStart"}'), 422, "http_session_start"),
    ],
)
def test_http_protocol_refusals(data: bytes, status: int, reason: str) -> None:
    refusals = [e for e in _events(data) if isinstance(e, HttpRefusal)]
    assert [r.rejection.reason for r in refusals] == [reason]
    assert refusals[0].reply.startswith(f"HTTP/1.1 {status} ".encode())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from([
                _request(), b"\r\n", b"\r\n\r\n", b"Content-Length: ", b"9" * 30,
                "\u00b2\u0663".encode(), b"Transfer-Encoding: chunked\r\n", AUTH,
                b"POST /hook/codex HTTP/1.1\r\n", b"GET / HTTP/1.0\r\n", b"\x00\xff",
            ]),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_http_protocol_is_total(chunks: list[bytes], eof: bool) -> None:
    """Fuzz: whatever bytes arrive, in whatever pieces, every call returns an event (no
    exception), refusals carry a counted reason and a complete reply, and hooks are valid."""
    protocol = HttpHookProtocol("tok", HOOKS)
    for chunk in [*chunks, *([b""] if eof else [])]:
        protocol.receive_data(chunk)
        for _ in range(50):
            event = protocol.next_event(AT)
            if isinstance(event, HttpHook):
                messages.revalidate(event.message)
                assert protocol.respond(200, {}).startswith(b"HTTP/1.1 200 ")
                continue
            if isinstance(event, HttpRefusal):
                assert event.rejection.reason.startswith(("http_", "bad_json", "too_deep",
                                                           "nul_byte", "invalid_utf8"))
                assert not event.reply or event.reply.startswith(b"HTTP/1.1 ")
                if event.close:
                    break
                continue
            break  # NeedData or HttpClosed


def _head(target: str = "/hook/claude-code", method: str = "POST", **headers: str) -> RequestHead:
    return RequestHead(
        method, target, "HTTP/1.1", {k.replace("_", "-"): v for k, v in headers.items()}
    )


@pytest.mark.parametrize(
    ("head", "status", "reason"),
    [
        (_head(content_length="2"), 401, "http_unauthorized"),
        (_head(content_length="2", x_paneward_token="wrong"), 401, "http_unauthorized"),
        (_head("/hook/vim", x_paneward_token="tok", content_length="2"), 404, "http_not_found"),
        (_head("/other/claude-code", x_paneward_token="tok"), 404, "http_not_found"),
        (_head(method="GET", x_paneward_token="tok"), 405, "http_method"),
        (_head(x_paneward_token="tok"), 411, "http_length_required"),
        (_head(x_paneward_token="tok", content_length="-1"), 400, "http_bad_request"),
        (
            _head(x_paneward_token="tok", content_length=str(MAX_FRAME_BYTES + 1)),
            413,
            "http_too_large",
        ),
        (_head(x_paneward_token="tok", transfer_encoding="chunked"), 501, "http_bad_request"),
    ],
)
def test_check_http_request_refusals(head: RequestHead, status: int, reason: str) -> None:
    reply = check_http_request(head, "tok", HOOK_ROUTES)
    assert reply.status == status
    assert reply.rejection is not None and reply.rejection.reason == reason


def test_check_http_request_accepts() -> None:
    reply = check_http_request(
        _head("/hook/codex", x_paneward_token="tok", content_length="5"), "tok", HOOK_ROUTES
    )
    assert (reply.status, reply.harness, reply.content_length, reply.rejection) == (
        200,
        "codex",
        5,
        None,
    )


def test_load_http_token_refuses_readable_file(tmp_path: Path) -> None:
    token = tmp_path / "http-token"
    with pytest.raises(HookListenerError, match="no token"):
        load_http_token(token)
    token.write_text("secret\n")
    token.chmod(0o644)
    with pytest.raises(HookListenerError, match="mode 0600"):
        load_http_token(token)
    token.chmod(0o600)
    assert load_http_token(token) == "secret"


# --------------------------------------------------------------------------------------------
# Real Unix socket


async def send_raw(path: Path, data: bytes) -> None:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(data)
        await stream.send_eof()


async def test_socket_and_directory_permissions_and_cleanup(sock_path: Path) -> None:
    with anyio.fail_after(10):
        sink = ListSink()
        async with running(HookListener(HOOKS, socket_path=sock_path), sink) as listener:
            assert listener.socket_path == sock_path
            assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) == 0o700
            assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600
            assert stat.S_ISSOCK(os.stat(sock_path).st_mode)
            await send_raw(sock_path, notify_frame({"hook_event_name": "Stop"}) + b"\n")
            await sink.wait_count(1)
        assert not await anyio.Path(sock_path).exists()


async def test_a_directory_others_can_reach_is_refused_not_changed(sock_path: Path) -> None:
    # As tmux does for its socket directory: refuse with the reason, never chmod it.
    sock_path.parent.mkdir(parents=True, mode=0o755)
    sock_path.parent.chmod(0o755)
    with anyio.fail_after(10), pytest.raises(HookListenerError, match="accessible by other"):
        await HookListener(HOOKS, socket_path=sock_path).run(ListSink())
    assert stat.S_IMODE(sock_path.parent.stat().st_mode) == 0o755
    assert list(sock_path.parent.iterdir()) == []


async def test_a_symlinked_directory_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    (tmp_path / "rt").mkdir(mode=0o700)
    (tmp_path / "rt" / "paneward").symlink_to(victim)
    path = tmp_path / "rt" / "paneward" / "hook.sock"
    with anyio.fail_after(10), pytest.raises(HookListenerError, match="symbolic link"):
        await HookListener(HOOKS, socket_path=path).run(ListSink())
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755
    assert list(victim.iterdir()) == []


async def test_stale_socket_is_replaced_live_one_is_not(sock_path: Path) -> None:
    sock_path.parent.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(sock_path))
    stale.close()  # bound, never listening, closed: a dead daemon's leftover
    with anyio.fail_after(10):
        sink = ListSink()
        async with running(HookListener(HOOKS, socket_path=sock_path), sink):
            second = HookListener(HOOKS, socket_path=sock_path)
            with pytest.raises(HookListenerError, match="already listening"):
                await second.run(ListSink())
            # The first listener is untouched and still serves.
            await send_raw(sock_path, notify_frame({"n": 1}) + b"\n")
            await sink.wait_count(1)


async def test_refuses_to_replace_a_regular_file(sock_path: Path) -> None:
    await anyio.Path(sock_path.parent).mkdir(parents=True, mode=0o700)
    await anyio.Path(sock_path).write_text("precious")
    with anyio.fail_after(10), pytest.raises(HookListenerError, match="not a socket"):
        await HookListener(HOOKS, socket_path=sock_path).run(ListSink())
    assert await anyio.Path(sock_path).read_text() == "precious"


async def test_bad_frames_counted_valid_ones_delivered_on_same_connection(
    sock_path: Path,
) -> None:
    with anyio.fail_after(20):
        sink = ListSink()
        async with running(HookListener(HOOKS, socket_path=sock_path), sink) as listener:
            stream = b"".join(
                [
                    notify_frame({"n": 1}) + b"\n",
                    b"{broken\n",
                    b"\n",
                    b'{"type":"Nope"}\n',
                    b"x" * (MAX_FRAME_BYTES + 10) + b"\n",
                    notify_frame({"n": 2}) + b"\n",
                    b"\xff\xfe\n",
                    notify_frame({"n": 3}),  # no trailing newline: EOF ends it
                ]
            )
            await send_raw(sock_path, stream)
            await sink.wait_count(3)
            await wait_until(lambda: listener.statistics().connections_open == 0)
            stats = listener.statistics()
        assert [m.payload for m in sink.items if isinstance(m, messages.NotifyHook)] == [
            {"n": 1},
            {"n": 2},
            {"n": 3},
        ]
        assert dict(stats.rejected) == {
            "bad_json": 1,
            "unknown_type": 1,
            "oversize": 1,
            "invalid_utf8": 1,
        }
        assert stats.frames_received == 7
        assert stats.frames_delivered == 3
        assert stats.blank_lines == 1
        assert [r.reason for r in stats.recent_rejections] == [
            "bad_json",
            "unknown_type",
            "oversize",
            "invalid_utf8",
        ]
        assert all(r.peer_pid == os.getpid() for r in stats.recent_rejections)


async def test_observed_time_is_restamped(sock_path: Path) -> None:
    clock = iter(range(AT + 100, AT + 200))
    with anyio.fail_after(10):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path, clock_ms=lambda: next(clock))
        async with running(listener, sink):
            await send_raw(sock_path, notify_frame({"n": 1}) + b"\n")
            await sink.wait_count(1)
    message = sink.items[0]
    assert isinstance(message, messages.NotifyHook)
    assert (message.at_ms, message.observed_at_ms) == (AT, AT + 100)


async def test_sink_refusal_is_counted(sock_path: Path) -> None:
    with anyio.fail_after(10):
        listener = HookListener(HOOKS, socket_path=sock_path)
        async with running(listener, ListSink(refuse=True)):
            await send_raw(sock_path, notify_frame({"n": 1}) + b"\n")
            await wait_until(lambda: listener.statistics().rejected_total == 1)
        stats = listener.statistics()
        assert dict(stats.rejected) == {"refused_by_sink": 1}
        assert "mailbox refused it" in stats.recent_rejections[0].detail
        assert stats.frames_delivered == 0


# Hostile frames: each strategy yields (bytes without a newline, expected reason or None).
_valid = st.dictionaries(
    st.text(max_size=8),
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=20)),
    max_size=4,
).map(lambda p: (notify_frame(p), None))
_truncated = _valid.flatmap(
    lambda pair: st.integers(1, len(pair[0]) - 1).map(lambda n: (pair[0][:n], "bad_json"))
)
_wrong_types = st.sampled_from(
    [
        ("at_ms", "soon"),
        ("pid", "x"),
        ("pid", -5),
        ("harness", "vim"),
        ("payload", [1, 2]),
        ("at_ms", 12),
        ("start_token", 7),
    ]
).map(
    lambda kv: (
        json.dumps({**json.loads(notify_frame({})), kv[0]: kv[1]}).encode(),
        "invalid_message",
    )
)
_unknown = (
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef", min_size=1, max_size=12)
    .filter(lambda t: t not in {c.__name__ for c in messages.codec.INBOUND_TYPES})
    .map(lambda t: (json.dumps({"type": t}).encode(), "unknown_type"))
)
_nul = _valid.flatmap(
    lambda pair: st.integers(0, len(pair[0])).map(
        lambda n: (pair[0][:n] + b"\x00" + pair[0][n:], "nul_byte")
    )
)
_bad_utf8 = st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]).map(
    lambda junk: (notify_frame({"k": "v"}).replace(b'"v"', b'"' + junk + b'"'), "invalid_utf8")
)
_deep = st.integers(MAX_DEPTH + 1, 5000).map(
    lambda d: (notify_frame({"a": 1}).replace(b"1", b"[" * d + b"]" * d, 1), "too_deep")
)
_hostile = st.one_of(_valid, _truncated, _wrong_types, _unknown, _nul, _bad_utf8, _deep)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    frames=st.lists(_hostile, min_size=99, max_size=99),
    oversize_at=st.integers(0, 99),
    oversize_extra=st.integers(1, 70_000),
)
async def test_ten_thousand_hostile_frames_through_a_real_socket(
    frames: list[tuple[bytes, str | None]], oversize_at: int, oversize_extra: int
) -> None:
    # 100 examples x (99 generated + 1 oversize) = 10,000 frames, each over a real socket.
    oversize = (b"o" * (MAX_FRAME_BYTES + oversize_extra), "oversize")
    frames = [*frames[:oversize_at], oversize, *frames[oversize_at:]]
    tmp = Path(tempfile.mkdtemp(prefix="pw-hyp-"))
    path = tmp / "rt" / "hook.sock"
    try:
        with anyio.fail_after(60):
            sink = ListSink()
            listener = HookListener(HOOKS, socket_path=path)
            async with running(listener, sink):
                # Split across several connections to exercise resynchronisation per stream.
                for start in range(0, len(frames), 25):
                    chunk = frames[start : start + 25]
                    await send_raw(path, b"".join(f + b"\n" for f, _ in chunk))
                expected_valid = [f for f, reason in frames if reason is None]
                await sink.wait_count(len(expected_valid))
                await wait_until(lambda: listener.statistics().frames_received == len(frames))
                stats = listener.statistics()
        expected: dict[str, int] = {}
        for _, reason in frames:
            if reason is not None:
                expected[reason] = expected.get(reason, 0) + 1
        assert dict(stats.rejected) == expected
        assert [
            msgspec.json.encode(m.payload) for m in sink.items if isinstance(m, messages.NotifyHook)
        ] == [msgspec.json.encode(json.loads(f)["payload"]) for f in expected_valid]
        assert stats.frames_delivered == len(expected_valid)
    finally:
        shutil.rmtree(tmp)


# --------------------------------------------------------------------------------------------
# Another user


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A directory under /tmp another uid can traverse (pytest's tmp_path is 0700 root's)."""
    path = Path(tempfile.mkdtemp(prefix="pw-uid-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path)


_OTHER_CLIENT = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("connect-error", exc.errno)
    sys.exit(0)
print("connected")
try:  # the listener may already have hung up on us: that is the point
    s.sendall(sys.argv[2].encode() + b"\\n")
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
except OSError:
    pass
"""


@pytest.mark.skipif(os.getuid() != 0, reason="switching to another uid needs root (setpriv)")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) not installed")
async def test_another_users_client_is_refused(shared_tmp: Path) -> None:
    path = shared_tmp / "rt" / "hook.sock"
    system_python = "/usr/bin/python3"  # readable by uid 65534, unlike a venv under /root
    if not os.access(system_python, os.X_OK):
        pytest.skip("no /usr/bin/python3 for the other user's client")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", system_python, "-c"]
    frame = notify_frame({"from": "nobody"}).decode()
    with anyio.fail_after(30):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=path)
        async with running(listener, sink):
            # Layer 1: the 0700 directory keeps the other user from reaching the socket.
            first = await anyio.run_process([*nobody, _OTHER_CLIENT, str(path), frame])
            assert first.stdout.decode().split() == ["connect-error", "13"]  # EACCES
            # Layer 2: even when the directory and socket are opened up (misconfiguration),
            # SO_PEERCRED identifies the peer and the listener refuses it.
            path.parent.chmod(0o711)
            path.chmod(0o666)
            second = await anyio.run_process([*nobody, _OTHER_CLIENT, str(path), frame])
            assert second.stdout.decode().split() == ["connected"]
            await wait_until(lambda: listener.statistics().rejected.get("peer_uid") == 1)
            # Our own uid still gets through afterwards.
            await send_raw(path, notify_frame({"from": "us"}) + b"\n")
            await sink.wait_count(1)
            stats = listener.statistics()
        assert [m.payload for m in sink.items if isinstance(m, messages.NotifyHook)] == [
            {"from": "us"}
        ]
        assert stats.recent_rejections[0].detail == f"peer uid 65534 is not {os.getuid()}"
        assert stats.recent_rejections[0].peer_pid is not None


# --------------------------------------------------------------------------------------------
# Real http listener


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "state" / "http-token"
    path.parent.mkdir(mode=0o700)
    path.write_text("s3cret-token\n")
    path.chmod(0o600)
    return path


async def http_exchange(
    stream: anyio.abc.SocketStream, request: bytes
) -> tuple[int, dict[str, str], Any]:
    await stream.send(request)
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers["content-length"])
    while len(rest) < length:
        rest += await stream.receive()
    return status, headers, json.loads(rest[:length])


def post(
    harness: str, body: bytes, token: str | None = "s3cret-token", close: bool = False
) -> bytes:
    headers = [
        f"POST /hook/{harness} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    if token is not None:
        headers.append(f"X-Paneward-Token: {token}")
    if close:
        headers.append("Connection: close")
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + body


async def test_http_hooks_token_delivery_and_refusals(sock_path: Path, token_file: Path) -> None:
    real = json.loads((FIXTURES / "http-hook-request-sample.json").read_text())["body"]
    with anyio.fail_after(20):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path, http_port=0, token_path=token_file)
        async with running(listener, sink):
            port = listener.http_port
            assert port is not None and port > 0
            # Keep-alive: several requests on one connection, like axios does.
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                status, headers, body = await http_exchange(
                    stream, post("claude-code", json.dumps(real).encode())
                )
                assert (status, body, headers["connection"]) == (200, {}, "keep-alive")
                status, _, body = await http_exchange(
                    stream, post("claude-code", json.dumps({**real, "n": 2}).encode())
                )
                assert (status, body) == (200, {})
                start = {**real, "hook_event_name": "SessionStart"}
                status, _, body = await http_exchange(
                    stream, post("claude-code", json.dumps(start).encode())
                )
                assert status == 422
                assert body["error"].startswith("SessionStart cannot be an http hook")
                status, _, body = await http_exchange(stream, post("claude-code", b"[1]"))
                assert (status, body) == (
            400, {"error": "body is not a JSON object: Expected `object`, got `array`"}
        )
            for request, expected in [
                (post("claude-code", b"{}", token=None), 401),
                (post("claude-code", b"{}", token="nope"), 401),
                (post("vim", b"{}"), 404),
                (
                    b"POST /hook/codex HTTP/1.1\r\nHost: x\r\nX-Paneward-Token: s3cret-token\r\n"
                    + f"Content-Length: {MAX_FRAME_BYTES + 1}\r\n\r\n".encode(),
                    413,
                ),
            ]:
                async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                    status, headers, _ = await http_exchange(stream, request)
                    assert status == expected
                    assert headers["connection"] == "close"
            await wait_until(lambda: listener.statistics().rejected_total == 6)
            stats = listener.statistics()
    assert [m.payload for m in sink.items if isinstance(m, messages.NotifyHook)] == [
        real,
        {**real, "n": 2},
    ]
    first = sink.items[0]
    assert isinstance(first, messages.NotifyHook)
    assert first.harness == "claude-code" and first.pid is None
    assert dict(stats.rejected) == {
        "http_session_start": 1,
        "http_not_object": 1,
        "http_unauthorized": 2,
        "http_not_found": 1,
        "http_too_large": 1,
    }
    assert stats.http_requests == 8
    assert stats.http_delivered == 2


async def test_http_enabled_without_token_refuses_to_start(sock_path: Path, tmp_path: Path) -> None:
    listener = HookListener(
        HOOKS,
        socket_path=sock_path,
        http_port=0,
        token_path=tmp_path / "missing-token",
    )
    with anyio.fail_after(10), pytest.raises(HookListenerError, match="install-hooks"):
        await listener.run(ListSink())


def test_listener_module_never_imported_by_hook_path() -> None:
    # `paneward hook` must stay stdlib-only: run the real console script's import chain.
    code = (
        "import sys, actors.cli.main; print(sorted(m for m in sys.modules"
        " if m.split('.')[0] in {'anyio', 'msgspec', 'messages', 'psutil', 'typing'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------------------------
# Admission: idle connections, bursts, deadlines, running out of descriptors


def _connect_idle(path: Path, count: int) -> list[socket.socket]:
    """``count`` connections that never send a byte (blocking: call from a thread)."""
    held = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.fspath(path))
        held.append(sock)
    return held


def _close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()


async def test_idle_connections_never_keep_real_hooks_out(sock_path: Path) -> None:
    """600 idle connections of our own uid (the old fixed cap was 512) are held while real
    hooks arrive: every hook gets in."""
    with anyio.fail_after(60):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path)
        async with running(listener, sink):
            idle = await anyio.to_thread.run_sync(_connect_idle, sock_path, 600)
            try:
                for n in range(20):
                    await send_raw(sock_path, notify_frame({"n": n}) + b"\n")
                await sink.wait_count(20)
            finally:
                _close_all(idle)
            stats = listener.statistics()
    assert [m.payload for m in sink.of(messages.NotifyHook)] == [{"n": n} for n in range(20)]
    assert "too_many_connections" not in stats.rejected
    assert stats.unix is not None and stats.unix.cap >= 4


async def test_at_the_cap_the_idlest_unproven_connection_makes_room(sock_path: Path) -> None:
    caps = ConnectionCaps(hook=8, http=2, control=2)
    with anyio.fail_after(60):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path, caps=caps, head_deadline=60)
        async with running(listener, sink):
            idle = await anyio.to_thread.run_sync(_connect_idle, sock_path, 8)
            await wait_until(
                lambda: (s := listener.statistics().unix) is not None and s.open == 8
            )
            try:
                for n in range(5):
                    await send_raw(sock_path, notify_frame({"n": n}) + b"\n")
                await sink.wait_count(5)
                stats = listener.statistics()
                # The evicted idle connections were hung up on (EOF), the others held.
                closed = [s for s in idle if _hung_up(s)]
            finally:
                _close_all(idle)
    assert stats.unix is not None
    assert stats.unix.evicted == len(closed) >= 1
    assert stats.unix.open <= 8


def _hung_up(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


async def test_a_connection_must_prove_itself_within_the_head_deadline(sock_path: Path) -> None:
    with anyio.fail_after(60):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path, head_deadline=0.3)
        async with running(listener, sink):
            async with await anyio.connect_unix(sock_path) as proven:
                await proven.send(notify_frame({"n": 1}) + b"\n")
                await sink.wait_count(1)
                async with await anyio.connect_unix(sock_path) as idle:
                    with pytest.raises(anyio.EndOfStream):
                        await idle.receive()  # the listener hangs up on it at its deadline
                async with await anyio.connect_unix(sock_path) as partial:
                    await partial.send(b'{"type": "NotifyHook"')  # never finished
                    with pytest.raises(anyio.EndOfStream):
                        await partial.receive()
                # The connection that sent a valid frame is kept (paneward wrap holds one).
                await proven.send(notify_frame({"n": 2}) + b"\n")
                await sink.wait_count(2)
            stats = listener.statistics()
    assert stats.unix is not None and stats.unix.timeouts == 2
    assert stats.rejected == {"timeout": 1}
    assert stats.recent_rejections[-1].detail.startswith("frame not finished within 0.3 s")


def _burst(path: Path, frames: list[bytes], taken_in: Callable[[], bool] | None) -> None:
    """One connection per frame, all open at once (``taken_in()``: until the listener has
    accepted every one), then every frame written: a synchronized burst of hook processes."""
    socks = _connect_idle(path, len(frames))
    try:
        while taken_in is not None and not taken_in():
            time.sleep(0.005)  # polling the listener's counters from this thread
        for sock, frame in zip(socks, frames, strict=True):
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
    finally:
        _close_all(socks)


@pytest.mark.parametrize("caps", [None, ConnectionCaps(hook=64, http=2, control=2)],
                         ids=["default caps", "hook cap 64"])
async def test_a_burst_of_a_thousand_real_connections_loses_nothing(
    sock_path: Path, caps: ConnectionCaps | None
) -> None:
    """1,000 connections open at once (the old listener refused every one past 512 open); with
    a cap below that, the rest wait in the kernel's queue and are served as slots free."""
    frames = [notify_frame({"n": n}) + b"\n" for n in range(1000)]
    with anyio.fail_after(120):
        sink = ListSink()
        # The clients here wait for each other before writing (real ones write at once), so
        # the head deadline must not be what this measures.
        listener = HookListener(HOOKS, socket_path=sock_path, caps=caps, head_deadline=60)

        def taken_in() -> bool:
            unix = listener.statistics().unix
            return unix is not None and unix.accepted >= len(frames)

        async with running(listener, sink):
            await anyio.to_thread.run_sync(
                _burst, sock_path, frames, taken_in if caps is None else None
            )
            await sink.wait_count(1000)
            stats = listener.statistics()
    assert sorted(m.payload["n"] for m in sink.of(messages.NotifyHook)) == list(range(1000))
    assert stats.rejected == {}
    assert stats.unix is not None and stats.unix.accepted == 1000


_EMFILE_CHILD = r"""
import json, os, resource, sys
from pathlib import Path

import anyio

from actors.harnesses.catalog import HOOKS
from actors.sources.hook_listener import HookListener
from tests.support.sinks import ListSink


async def main() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    sink = ListSink()
    listener = HookListener(HOOKS, socket_path=Path(sys.argv[1]))
    result = {}
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, sink)
            await listener.wait_listening()
            hog = []
            try:
                while True:  # every descriptor this process may have
                    hog.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                pass
            os.write(1, b"full\n")
            # The parent connects its clients now and says when (our stdin is fd 0).
            while os.read(0, 1) != b"\n":
                pass
            while listener.statistics().unix.accept_errors.get("EMFILE", 0) < 3:
                await anyio.sleep(0.01)  # polling our own counters while starved
            for fd in hog:
                os.close(fd)
            while os.read(0, 1) != b"\n":  # the parent sent its last hook
                pass
            stats = listener.statistics()
            while len(sink.items) + stats.unix.shed < int(sys.argv[2]) + 1:
                await anyio.sleep(0.01)
                stats = listener.statistics()
            result = {"delivered": [m.payload["n"] for m in sink.items],
                      "shed": stats.unix.shed, "errors": stats.unix.accept_errors}
            tg.cancel_scope.cancel()
    except BaseException as exc:  # the listener died: the old behaviour
        result = {"crashed": repr(exc)}
    os.write(1, json.dumps(result).encode() + b"\n")


anyio.run(main)
"""


async def test_running_out_of_descriptors_never_stops_the_listener(sock_path: Path) -> None:
    """A real process at a 64-descriptor limit, every descriptor in use: accept() fails with
    EMFILE; the listener counts it, waits, sheds at most what it must, and serves again as
    soon as descriptors are free -- every connection is delivered or counted as shed."""
    sock_path.parent.mkdir(parents=True, mode=0o700)
    clients = 5
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-c", _EMFILE_CHILD, os.fspath(sock_path), str(clients)],
            cwd=ROOT,
        ) as child:
            assert child.stdout is not None and child.stdin is not None
            lines = BufferedByteReceiveStream(child.stdout)
            assert await lines.receive_until(b"\n", 64) == b"full"
            for n in range(clients):
                await send_raw_nowait(sock_path, notify_frame({"n": n}) + b"\n")
            await child.stdin.send(b"\n")
            # Once it has descriptors again, a later hook goes straight through.
            await send_raw(sock_path, notify_frame({"n": clients}) + b"\n")
            await child.stdin.send(b"\n")
            result = json.loads(await lines.receive_until(b"\n", 1 << 16))
            assert await child.wait() == 0
    assert "crashed" not in result, result
    assert result["errors"]["EMFILE"] >= 3
    delivered = result["delivered"]
    assert clients in delivered  # the hook sent after the shortage
    assert len(delivered) + result["shed"] == clients + 1  # nothing unaccounted for


async def send_raw_nowait(path: Path, data: bytes) -> None:
    """Connect, write ``data`` and close without waiting for the listener (it may not accept
    yet: the bytes wait in the kernel)."""
    def send() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(os.fspath(path))
            sock.sendall(data)

    await anyio.to_thread.run_sync(send)


@pytest.mark.parametrize(
    "length",
    [b"\xb2", b"\xb9\xb2", "\u0663".encode(), b"9" * 5000, b"1" + b"0" * 12],
    ids=["superscript two (latin-1)", "superscripts", "arabic-indic three", "5000 digits",
         "10**12"],
)
async def test_a_malformed_content_length_is_refused_and_http_serves_on(
    sock_path: Path, token_file: Path, length: bytes
) -> None:
    """Digits that pass str.isdigit() but are not ASCII, or thousands of them, are refused
    without crashing the listener (http and the socket)."""
    body = json.dumps({"hook_event_name": "Stop", "session_id": "s"}).encode()
    with anyio.fail_after(20):
        sink = ListSink()
        listener = HookListener(HOOKS, socket_path=sock_path, http_port=0, token_path=token_file)
        async with running(listener, sink):
            port = listener.http_port
            assert port is not None
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                bad = (b"POST /hook/claude-code HTTP/1.1\r\nHost: x\r\n"
                       b"X-Paneward-Token: s3cret-token\r\nContent-Length: " + length
                       + b"\r\n\r\n" + body)
                status, headers, _ = await http_exchange(stream, bad)
                assert (status, headers["connection"]) in ((400, "close"), (413, "close"))
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                status, _, _ = await http_exchange(stream, post("claude-code", body))
                assert status == 200
            await send_raw(sock_path, notify_frame({"n": 1}) + b"\n")
            await sink.wait_count(2)
            stats = listener.statistics()
    assert sum(stats.rejected.values()) == 1
    assert set(stats.rejected) <= {"http_bad_request", "http_too_large"}


def test_ids_refuse_nul() -> None:
    """NUL was accepted in ids (it ends the string for tmux and every C consumer)."""
    ack = {"type": "Acknowledge", "at_ms": AT, "key": {"harness": "codex", "session_id": "a\0b"}}
    result = check_frame(json.dumps(ack).encode())
    assert isinstance(result, Rejection) and result.reason == "invalid_message"
    assert "session_id" in result.detail
    pane = {"type": "PaneFocused", "pane": "%1\0", "at_ms": AT}
    result = check_frame(json.dumps(pane).encode())
    assert isinstance(result, Rejection) and result.reason == "invalid_message"
    # A hook payload naming such a session maps to nothing (counted as unmapped).
    from actors.harnesses.catalog import normalize

    hook = check_frame(notify_frame({"session_id": "a\0b", "hook_event_name": "Stop"}))
    assert isinstance(hook, messages.NotifyHook)
    assert isinstance(normalize(hook), messages.Unmapped)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=80) | st.sampled_from(
    [b"\n", notify_frame({"n": 1}), b"\x00", b"\xff", b"[" * 70, b'{"type":']), max_size=10))
def test_frames_are_total(chunks: list[bytes]) -> None:
    """Fuzz: split and check any byte stream; every line is a message or a counted rejection."""
    splitter = FrameSplitter(max_frame=256)
    items = [item for chunk in chunks for item in splitter.feed(chunk)] + splitter.close()
    for item in items:
        if isinstance(item, Oversize):
            assert item.size > 256
            continue
        result = check_frame(item)
        assert isinstance(result, Rejection) or type(result) in messages.codec.INBOUND_TYPES


def test_admission_refuses_a_batch_or_cap_below_one() -> None:
    from actors.sources.admission import ACCEPT_BATCH, Admission

    with pytest.raises(ValueError, match="accept_batch must be at least 1, not 0"):
        Admission(8, accept_batch=0)
    with pytest.raises(ValueError, match="cap must be at least 1, not 0"):
        Admission(0)
    assert Admission(8).accept_batch == ACCEPT_BATCH
    assert Admission(8, accept_batch=256).accept_batch == 256
