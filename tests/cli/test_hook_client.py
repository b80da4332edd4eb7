"""``paneward hook``: pure helpers, then the real console script against a real listener."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

import messages
from actors.cli import hook_client
from actors.core import paths
from actors.core.ingress.frames import check_frame
from actors.harnesses.catalog import HOOKS
from actors.sources.hook_listener import HookListener
from tests import support
from tests.support.sinks import ListSink

PANEWARD = Path(sys.executable).with_name("paneward")
FIXTURES = support.FIXTURES / "hooks"
AT = 1_795_999_000_000


@asynccontextmanager
async def listening(sock: Path) -> AsyncIterator[tuple[HookListener, ListSink]]:
    sink = ListSink()
    listener = HookListener(HOOKS, socket_path=sock)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.run, sink)
        await listener.wait_listening()
        yield listener, sink
        tg.cancel_scope.cancel()


def hook_env(sock: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PID"}
    env["PANEWARD_SOCKET"] = os.fspath(sock)
    env.update(extra)
    return env


def start_token(pid: int) -> str:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return fields[19]


# --------------------------------------------------------------------------------------------
# Pure helpers


def test_parse_args_lenient() -> None:
    args = hook_client.parse_args(["--harness", "codex", "a", '{"x":1}'])
    assert (args.harness, args.payload, args.errors, args.forward) == (
        "codex",
        '{"x":1}',
        [],
        None,
    )
    bad = hook_client.parse_args(["--bogus", "--forward-json", "nope"])
    assert bad.harness is None
    assert bad.errors[0] == "unknown or incomplete option '--bogus'"
    assert bad.errors[1].startswith("--forward-json is not JSON")
    assert bad.errors[2] == "--harness is required"
    fwd = hook_client.parse_args(["--harness=codex", "--forward-json", '["notify-send","x"]'])
    assert fwd.forward == ["notify-send", "x"] and fwd.harness == "codex"
    assert hook_client.parse_args(["--harness", "codex", "--forward-json", "[]"]).forward is None


def test_owner_pid_rules() -> None:
    claude = "env:CLAUDE_PID"  # what install-hooks writes for Claude Code
    assert hook_client.owner_pid(claude, {"CLAUDE_PID": "4242"}, 99) == 4242
    assert hook_client.owner_pid(claude, {}, 99) is None  # older Claude: no claim
    assert hook_client.owner_pid(claude, {"CLAUDE_PID": "x1"}, 99) is None
    assert hook_client.owner_pid(claude, {"CLAUDE_PID": "1"}, 99) is None
    assert hook_client.owner_pid(claude, {"CLAUDE_PID": "٤٢"}, 99) is None  # ASCII digits only
    assert hook_client.owner_pid("parent", {"CLAUDE_PID": "4242"}, 99) == 99  # Codex
    assert hook_client.owner_pid("parent", {}, 1) is None  # orphaned: never claim init
    assert hook_client.owner_pid("none", {}, 99) is None  # Cursor
    assert hook_client.owner_pid("env:", {"": "5"}, 99) is None
    assert hook_client.owner_pid("bogus", {}, 99) is None


def test_read_start_token_matches_proc() -> None:
    assert hook_client.read_start_token(os.getpid()) == start_token(os.getpid())
    assert hook_client.read_start_token(2**31 - 2) is None


def test_read_start_token_with_parenthesised_comm(tmp_path: Path) -> None:
    (tmp_path / "7").mkdir()
    fields = " ".join(str(n) for n in range(3, 53))
    (tmp_path / "7" / "stat").write_text(f"7 (a) (b c) {fields}")
    assert hook_client.read_start_token(7, proc=os.fspath(tmp_path)) == "22"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"PANEWARD_SOCKET": "/x/s.sock"}, "/x/s.sock"),
        ({"XDG_RUNTIME_DIR": "/run/user/5", "PANEWARD_STATE_DIR": "/st"},
         "/run/user/5/paneward/hook.sock"),
        ({"PANEWARD_STATE_DIR": "/st"}, "/st/hook.sock"),
        ({"XDG_STATE_HOME": "/xs"}, "/xs/paneward/hook.sock"),
        ({"PANEWARD_SOCKET": "", "XDG_RUNTIME_DIR": "", "HOME": "/home/u"},
         "/home/u/.local/state/paneward/hook.sock"),
        ({"HOME": "/home/u"}, "/home/u/.local/state/paneward/hook.sock"),
    ],
)
def test_the_one_socket_path_rule(
    env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook client, the daemon, wrap and the CLI all use actors.core.paths.socket_path."""
    for name in ("PANEWARD_SOCKET", "XDG_RUNTIME_DIR", "PANEWARD_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert paths.socket_path() == expected
    assert paths.control_path() == os.path.join(os.path.dirname(expected), "control.sock")


def test_build_frame_round_trips_every_real_payload() -> None:
    for line in (FIXTURES / "claude-hooks.jsonl").read_text().splitlines():
        payload = json.loads(line)["stdin"]
        raw = json.dumps(payload, indent=2).encode()  # pretty-printed: newlines are spliced out
        frame = hook_client.build_frame("claude-code", raw, at_ms=AT, pid=7, start_token="123")
        assert frame.endswith(b"\n") and frame.count(b"\n") == 1
        assert messages.decode_inbound(frame) == messages.NotifyHook(
            harness="claude-code",
            payload=payload,
            at_ms=AT,
            observed_at_ms=AT,
            pid=7,
            start_token="123",
        )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "bad_json"),
        (b"not json", "bad_json"),
        (b'{"a": 1', "bad_json"),
        (b"[1, 2]", "invalid_message"),
        (b'"text"', "invalid_message"),
        (b'{"a": "\xff"}', "invalid_utf8"),
        ('{"a": "\\ud800"}', "bad_json"),
    ],
)
def test_non_object_payloads_are_sent_as_is_for_the_daemon_to_reject(
    raw: bytes | str, reason: str
) -> None:
    frame = hook_client.build_frame("codex", raw, at_ms=AT, pid=None, start_token=None)
    result = check_frame(frame.rstrip(b"\n"))
    assert getattr(result, "reason", None) == reason


def test_harness_is_escaped() -> None:
    frame = hook_client.build_frame('a"b\\\x01', b"{}", at_ms=AT, pid=None, start_token=None)
    assert json.loads(frame)["harness"] == 'a"b\\\x01'


# --------------------------------------------------------------------------------------------
# The real console script (and `python -m actors.cli.main`) against a real listener


@pytest.mark.parametrize(
    "command", [[os.fspath(PANEWARD)], [sys.executable, "-m", "actors.cli.main"]]
)
async def test_claude_payload_on_stdin_with_claude_pid(tmp_path: Path, command: list[str]) -> None:
    sock = tmp_path / "rt" / "hook.sock"
    payload = json.loads((FIXTURES / "claude-hooks.jsonl").read_text().splitlines()[3])["stdin"]
    with anyio.fail_after(30):
        async with listening(sock) as (_, sink):
            before = 0
            result = await anyio.run_process(
                [*command, "hook", "--harness", "claude-code", "--owner", "env:CLAUDE_PID"],
                input=json.dumps(payload).encode(),
                env=hook_env(sock, CLAUDE_PID=str(os.getpid())),
                check=False,
            )
            assert result.returncode == 0
            assert result.stdout == b"" and result.stderr == b""
            await sink.wait_count(before + 1)
    message = sink.items[0]
    assert isinstance(message, messages.NotifyHook)
    assert message.payload == payload
    assert message.harness == "claude-code"
    assert message.pid == os.getpid()
    assert message.start_token == start_token(os.getpid())
    assert message.observed_at_ms >= message.at_ms


async def test_codex_notify_payload_as_last_argument_parent_is_owner(tmp_path: Path) -> None:
    sock = tmp_path / "rt" / "hook.sock"
    line = (FIXTURES / "notify.jsonl").read_text().splitlines()[0]
    notify_json = json.loads(line)["argv"][-1]
    with anyio.fail_after(30):
        async with listening(sock) as (_, sink):
            result = await anyio.run_process(
                [os.fspath(PANEWARD), "hook", "--harness", "codex", notify_json],
                env=hook_env(sock),
                check=False,
            )
            assert result.returncode == 0
            await sink.wait_count(1)
    message = sink.items[0]
    assert isinstance(message, messages.NotifyHook)
    assert message.payload == json.loads(notify_json)
    assert message.payload["type"] == "agent-turn-complete"
    assert message.pid == os.getpid()  # the process that ran the hook: this test
    assert message.start_token == start_token(os.getpid())


async def test_chained_notify_forwards_to_the_users_command(tmp_path: Path) -> None:
    sock = tmp_path / "rt" / "hook.sock"
    out = tmp_path / "user-notify.out"
    user_cmd = [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write(sys.argv[2])"]
    user_cmd.append(os.fspath(out))
    payload = '{"type":"agent-turn-complete","thread-id":"t1"}'
    with anyio.fail_after(30):
        async with listening(sock) as (_, sink):
            result = await anyio.run_process(
                [
                    os.fspath(PANEWARD),
                    "hook",
                    "--harness",
                    "codex",
                    "--forward-json",
                    json.dumps(user_cmd),
                    payload,
                ],
                env=hook_env(sock),
                check=False,
            )
            assert result.returncode == 0
            await sink.wait_count(1)
    assert await anyio.Path(out).read_text() == payload  # the user's command got it verbatim
    message = sink.items[0]
    assert isinstance(message, messages.NotifyHook)
    assert message.payload == json.loads(payload)


async def test_no_daemon_exits_zero_without_hanging(tmp_path: Path) -> None:
    sock = tmp_path / "nobody-listens" / "hook.sock"
    with anyio.fail_after(10):  # generous: a hang would trip it, no timing is asserted
        for args, stdin in [
            (["--harness", "claude-code"], b'{"hook_event_name":"Stop"}'),
            (["--harness", "codex", "{}"], None),
            (["--nonsense"], b"garbage"),
            ([], None),
        ]:
            result = await anyio.run_process(
                [os.fspath(PANEWARD), "hook", *args],
                input=stdin,
                env=hook_env(sock),
                check=False,
            )
            assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


async def test_stale_socket_file_exits_zero(tmp_path: Path) -> None:
    import socket as socket_module

    sock = tmp_path / "hook.sock"
    stale = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
    stale.bind(os.fspath(sock))
    stale.close()  # ECONNREFUSED, not ENOENT
    with anyio.fail_after(10):
        result = await anyio.run_process(
            [os.fspath(PANEWARD), "hook", "--harness", "codex", "{}"],
            env=hook_env(sock, PANEWARD_HOOK_DEBUG="1"),
            check=False,
        )
    assert result.returncode == 0
    assert b"not delivered (ConnectionRefusedError" in result.stderr


async def test_the_fast_exit_loses_no_output(tmp_path: Path) -> None:
    """``paneward hook`` ends with ``os._exit`` (no interpreter teardown): what it wrote is
    flushed first, with Python's own buffering (not PYTHONUNBUFFERED) and stderr a pipe."""
    env = hook_env(tmp_path / "absent.sock", PANEWARD_HOOK_DEBUG="1")
    env.pop("PYTHONUNBUFFERED", None)
    with anyio.fail_after(10):
        result = await anyio.run_process(
            [os.fspath(PANEWARD), "hook", "--harness", "codex", "--bogus", "{}"],
            env=env,
            check=False,
        )
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 0
    assert lines[0] == "paneward hook: unknown or incomplete option '--bogus'", lines
    assert lines[1].startswith("paneward hook: not delivered (FileNotFoundError"), lines
    assert len(lines) == 2, lines


async def test_inject_validates_and_reports_no_daemon(tmp_path: Path) -> None:
    sock = tmp_path / "rt" / "hook.sock"
    good = json.dumps(
        {
            "type": "HostSignal",
            "key": {"harness": "codex", "session_id": "t1"},
            "signal": "interrupt",
            "at_ms": AT,
        }
    )
    with anyio.fail_after(30):
        bad = await anyio.run_process(
            [os.fspath(PANEWARD), "inject", '{"type":"Nope"}'], env=hook_env(sock), check=False
        )
        assert bad.returncode == 1
        assert bad.stderr.decode().startswith("paneward inject: invalid inbound message")
        absent = await anyio.run_process(
            [os.fspath(PANEWARD), "inject", good], env=hook_env(sock), check=False
        )
        assert absent.returncode == 2
        assert b"no daemon listening" in absent.stderr
        async with listening(sock) as (_, sink):
            sent = await anyio.run_process(
                [os.fspath(PANEWARD), "inject", good], env=hook_env(sock), check=False
            )
            assert sent.returncode == 0, sent.stderr
            await sink.wait_count(1)
    assert messages.encode(sink.items[0]) == messages.encode(messages.decode_inbound(good))


async def test_version_command() -> None:
    with anyio.fail_after(30):
        result = await anyio.run_process([os.fspath(PANEWARD), "version"])
    assert result.stdout.decode().strip() == "paneward 0.1.0"


# --------------------------------------------------------------------------------------------
# PANEWARD_HOOK_AT_MS: the original fire time, for replays


def test_fire_time_override_accepts_only_plain_positive_integers() -> None:
    now = 1_700_000_000_000
    assert hook_client.fire_time_ms({}, now) == now
    assert hook_client.fire_time_ms({"PANEWARD_HOOK_AT_MS": "1795999000123"}, now) == (
        1_795_999_000_123
    )
    assert hook_client.fire_time_ms({"PANEWARD_HOOK_AT_MS": "1"}, now) == 1
    bad = ["", "0", "-5", "+5", " 12", "12 ", "1_000", "1.5", "1e3", "abc", "١٢٣", str(2**63)]
    for value in bad:
        assert hook_client.fire_time_ms({"PANEWARD_HOOK_AT_MS": value}, now) == now, value


async def test_fire_time_override_reaches_the_listener(tmp_path: Path) -> None:
    sock = tmp_path / "rt" / "hook.sock"
    payload = json.loads((FIXTURES / "claude-hooks.jsonl").read_text().splitlines()[3])["stdin"]
    with anyio.fail_after(30):
        async with listening(sock) as (_, sink):
            for count, value in enumerate(("1795999000123", "not-a-number"), start=1):
                result = await anyio.run_process(
                    [os.fspath(PANEWARD), "hook", "--harness", "claude-code"],
                    input=json.dumps(payload).encode(),
                    env=hook_env(sock, PANEWARD_HOOK_AT_MS=value, PANEWARD_HOOK_DEBUG="1"),
                    check=False,
                )
                assert result.returncode == 0
                if value.isdigit():
                    assert result.stderr == b""
                else:
                    assert b"ignoring PANEWARD_HOOK_AT_MS='not-a-number'" in result.stderr
                await sink.wait_count(count)
    overridden, ignored = sink.items
    assert isinstance(overridden, messages.NotifyHook)
    assert isinstance(ignored, messages.NotifyHook)
    assert overridden.at_ms == 1_795_999_000_123
    # a bad value falls back to the real clock: close to now, far from the bogus value
    assert abs(ignored.at_ms - ignored.observed_at_ms) < 60_000
    assert ignored.payload == payload


def test_one_deadline_covers_the_whole_send_however_slowly_the_daemon_reads(
    tmp_path: Path,
) -> None:
    """A reader that takes 128 KiB every 50 ms keeps each send() well under a per-call
    timeout, which let a 1 MiB payload take far longer than it (1,849 ms measured with a
    slower reader); the deadline is for the whole frame."""
    import socket
    import threading

    path = tmp_path / "slow.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(os.fspath(path))
    server.listen()
    received = 0
    done = threading.Event()

    def slow_reader() -> None:
        nonlocal received
        conn, _ = server.accept()
        with conn:
            while not done.is_set():
                chunk = conn.recv(1 << 17)
                if not chunk:
                    break
                received += len(chunk)
                done.wait(0.05)  # a daemon that reads slowly (this paces the reader only)

    reader = threading.Thread(target=slow_reader, daemon=True)
    reader.start()
    frame = b"x" * (1 << 20)
    try:
        with pytest.raises(TimeoutError):
            hook_client.send_frame(frame, path, timeout=0.2)
    finally:
        done.set()
        reader.join(10)
        server.close()
    assert 0 < received < len(frame)  # it was making progress, and gave up all the same
