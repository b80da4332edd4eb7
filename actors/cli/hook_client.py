"""``paneward hook``: forward one harness hook payload to the daemon, never failing the agent.

Standard library only, and nothing heavy: this runs once per hook event inside Claude Code,
Codex, Cursor, Hermes and Gemini CLI (whose hooks block the agent until they exit), so its cost
is paid on every tool call. It

1. reads the payload from the last argument (Codex ``notify`` passes the JSON there) or, when
   there is none, from stdin (Claude/Codex/Cursor command hooks);
2. stamps ``at_ms`` (now: the moment the hook fired, as best known) and the claimed owner
   process, as ``--owner`` says: ``parent`` (the default: the harness runs the hook itself,
   e.g. Codex), ``env:NAME`` (the pid in ``$NAME``: Claude Code's hooks run under ``/bin/sh``
   and carry ``$CLAUDE_PID``) or ``none``; plus that pid's start token
   (:func:`actors.core.session.pids.parse_stat`). Which rule a harness needs is its package's fact:
   ``paneward install-hooks`` writes it into the hook command;
3. sends ONE line -- a ``NotifyHook`` encoded exactly as ``messages.codec.encode`` would -- to
   the hook socket (:func:`actors.core.paths.socket_path`) within ONE deadline for the whole
   connect-and-send (:data:`SEND_TIMEOUT_S`, however slowly the daemon reads), so the hook
   never takes longer than :data:`STDIN_TIMEOUT_S` + :data:`SEND_TIMEOUT_S` in all;
   ``$PANEWARD_HOOK_AT_MS`` (a decimal integer, epoch milliseconds) overrides ``at_ms``: replays
   and tests set it to the moment the recorded hook originally fired. A value that is not a
   positive integer below 2**63 is ignored (the hook never fails over it; debug says why);
4. exits 0 whatever happened (no daemon, bad payload, bad arguments): a status tool must never
   break or slow the agent it watches. Set ``PANEWARD_HOOK_DEBUG=1`` to see failures on stderr.

The payload is sent as it arrived (spliced into the frame unparsed, see :func:`build_frame`): a
payload that is not a JSON object makes the daemon reject *and count* the frame instead of the
client guessing.

Codex ``notify`` takes one command only. ``install-hooks codex`` keeps a user's own ``notify``
working by chaining: ``paneward hook --harness codex --forward-json '["cmd", "arg"]' PAYLOAD``
sends the frame, then ``exec``s ``cmd arg PAYLOAD`` -- same pid, parent, environment and stdio
as if Codex had run it directly.
"""

from __future__ import annotations

import os
import sys
import time

from actors.core import paths
from actors.core.procstat import parse_stat

# Every millisecond here is paid on every hook event: no typing/pathlib/socket (enum-heavy)
# imports at run time, ``_socket`` and ``select`` only when used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = [
    "HELP",
    "MAX_FRAME_BYTES",
    "SEND_TIMEOUT_S",
    "STDIN_TIMEOUT_S",
    "HookArgs",
    "build_frame",
    "fire_time_ms",
    "main",
    "owner_pid",
    "parse_args",
    "read_start_token",
    "send_frame",
]

MAX_FRAME_BYTES = 1 << 20  # the listener rejects longer lines (counted as ``oversize``)
# Connecting to a Unix socket nobody listens on fails at once; these bound the pathological
# cases (a wedged daemon with a full socket buffer, a harness that never closes our stdin).
SEND_TIMEOUT_S = 0.5
STDIN_TIMEOUT_S = 2.0

#: What ``paneward hook --help`` prints (``paneward install-hooks`` writes the commands).
HELP = f"""\
usage: paneward hook --harness HARNESS [--owner parent|env:NAME|none]
                     [--forward-json JSON_ARGV] [PAYLOAD]

Forward one hook payload to the daemon's hook socket. The agents run this (the commands
`paneward install-hooks` writes); it always exits 0, within {STDIN_TIMEOUT_S + SEND_TIMEOUT_S:g} s.

  --harness HARNESS        whose payload: the harness id install-hooks wrote into the
                           command (`paneward install-hooks --help` lists them)
  --owner parent|env:NAME|none
                           the process the hook claims as the session's owner: its parent
                           (default), the pid in $NAME (Claude Code: env:CLAUDE_PID), or none
  --forward-json JSON_ARGV after sending, exec this command with the payload appended
                           (a Codex notify you had before install-hooks, chained)
  PAYLOAD                  the hook JSON (default: read stdin, for at most {STDIN_TIMEOUT_S:g} s)

PANEWARD_HOOK_DEBUG=1 prints on stderr why a frame was not sent; PANEWARD_SOCKET names the
socket. Details: docs/hooks.md.
"""


class HookArgs:
    """What ``paneward hook`` was asked to do (parsed without argparse: it must never exit 2)."""

    __slots__ = ("errors", "forward", "harness", "owner", "payload", "show_help")

    def __init__(self) -> None:
        self.harness: str | None = None
        self.owner = "parent"
        self.payload: str | None = None
        self.forward: list[str] | None = None
        self.errors: list[str] = []
        self.show_help = False


def parse_args(argv: Sequence[str]) -> HookArgs:
    """Parse ``hook`` arguments leniently: problems are collected in ``errors``, never raised."""
    args = HookArgs()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            args.show_help = True
        elif arg == "--harness" and i + 1 < len(argv):
            args.harness = argv[i + 1]
            i += 1
        elif arg.startswith("--harness="):
            args.harness = arg.partition("=")[2]
        elif arg == "--owner" and i + 1 < len(argv):
            args.owner = argv[i + 1]
            i += 1
        elif arg.startswith("--owner="):
            args.owner = arg.partition("=")[2]
        elif arg == "--forward-json" and i + 1 < len(argv):
            args.forward = _parse_forward(argv[i + 1], args.errors)
            i += 1
        elif arg == "--":
            positional.extend(argv[i + 1 :])
            break
        elif arg.startswith("--"):
            args.errors.append(f"unknown or incomplete option {arg!r}")
        else:
            positional.append(arg)
        i += 1
    if args.harness is None:
        args.errors.append("--harness is required")
    if positional:
        # Codex appends the JSON as the LAST argument; anything before it is not ours.
        args.payload = positional[-1]
    return args


def _parse_forward(text: str, errors: list[str]) -> list[str] | None:
    import json  # only the chained Codex notify pays for it

    try:
        value = json.loads(text)
    except ValueError as exc:
        errors.append(f"--forward-json is not JSON: {exc}")
        return None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(part, str) and part for part in value)
    ):
        errors.append("--forward-json must be a non-empty JSON array of non-empty strings")
        return None
    return value


def read_start_token(pid: int, proc: str = "/proc") -> str | None:
    """The start token of ``pid`` (field 22 of ``/proc/<pid>/stat``), or ``None``."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            stat = parse_stat(handle.read())
    except OSError:
        return None
    return None if stat is None else stat.start_token


def owner_pid(rule: str, environ: Mapping[str, str], ppid: int) -> int | None:
    """The process that owns the session this hook belongs to, by ``rule`` (``--owner``).

    ``parent``: our parent (a parent of 1 means we were orphaned -- ``codex exec`` does not
    wait for ``notify`` -- so claim nothing rather than init); ``env:NAME``: the pid in
    ``$NAME`` (nothing if it is not a plain pid); ``none``: nothing.
    """
    if rule == "parent":
        return ppid if ppid > 1 else None
    name, _, var = rule.partition(":")
    if name == "env" and var:
        raw = environ.get(var, "")
        if raw.isascii() and raw.isdigit() and 1 < int(raw) < 2**31:
            return int(raw)
    return None


def _json_string(text: str) -> str:
    """A JSON string literal (hand-rolled: importing ``json`` costs milliseconds per hook)."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    if any(ch < " " for ch in out):
        out = "".join(ch if ch >= " " else f"\\u{ord(ch):04x}" for ch in out)
    return f'"{out}"'


def build_frame(
    harness: str | None,
    raw_payload: bytes | str,
    *,
    at_ms: int,
    pid: int | None,
    start_token: str | None,
) -> bytes:
    """One newline-terminated ``NotifyHook`` line, exactly as ``messages.encode`` shapes it.

    The payload bytes are spliced in as they arrived -- not parsed here: when they are not
    one valid JSON value (truncated, empty, not UTF-8) the whole line is invalid and the
    listener rejects and counts it, which is the point. Raw newlines and carriage returns
    can only be insignificant whitespace in valid JSON (inside strings they must be escaped),
    so turning them into spaces keeps one frame per line without changing any valid payload.
    """
    payload = raw_payload.encode("utf-8", "surrogateescape") if isinstance(
        raw_payload, str
    ) else raw_payload
    payload = payload.strip().replace(b"\n", b" ").replace(b"\r", b" ")
    head = (
        '{"type":"NotifyHook","harness":'
        + ("null" if harness is None else _json_string(harness))
        + ',"payload":'
    )
    tail = (
        f',"at_ms":{at_ms},"observed_at_ms":{at_ms},'
        f'"pid":{"null" if pid is None else pid},'
        f'"start_token":{"null" if start_token is None else _json_string(start_token)}}}\n'
    )
    return head.encode("utf-8", "surrogateescape") + payload + tail.encode("ascii")


def send_frame(frame: bytes, path: str | os.PathLike[str], timeout: float = SEND_TIMEOUT_S) -> None:
    """Send one frame to the listener at ``path``, all of it within ``timeout`` seconds.

    The deadline covers the connect and every ``send()`` together: a daemon that reads a
    little at a time cannot stretch a large payload past it (a per-call timeout could).

    :raises OSError: no daemon (ENOENT/ECONNREFUSED), permission, or ``TimeoutError`` when the
        deadline passed (part of the frame may have been sent: the listener then counts a
        truncated frame).
    """
    import _socket  # the C module: ``socket`` costs milliseconds of enum setup

    deadline = time.monotonic() + timeout
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(os.fspath(path))
        view = memoryview(frame)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"frame not sent within {timeout:g} s")
            sock.settimeout(remaining)
            view = view[sock.send(view) :]
        sock.shutdown(_socket.SHUT_WR)
    finally:
        sock.close()


def _read_stdin(limit: int, timeout: float) -> bytes:
    """Read stdin to EOF (at most ``limit`` bytes), giving up after ``timeout`` seconds."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return b""
    try:
        if os.isatty(fd):
            return b""
    except OSError:
        return b""
    import select

    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + timeout
    while size < limit:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                break
            chunk = os.read(fd, min(1 << 16, limit - size))
        except (OSError, ValueError):
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _debug(message: str) -> None:
    if os.environ.get("PANEWARD_HOOK_DEBUG"):
        try:  # noqa: SIM105 - contextlib costs an import here
            sys.stderr.write(f"paneward hook: {message}\n")
        except (OSError, ValueError):
            pass


def fire_time_ms(environ: Mapping[str, str], now_ms: int) -> int:
    """When the hook fired: ``$PANEWARD_HOOK_AT_MS`` if it is a valid epoch-ms integer, else now.

    Only ASCII digits are accepted (no sign, no spaces, no ``_``): ``int()`` alone would take
    ``" 12"``, ``"1_000"`` and non-ASCII digits, none of which a replay tool writes.
    """
    raw = environ.get("PANEWARD_HOOK_AT_MS")
    if raw is None:
        return now_ms
    if raw.isascii() and raw.isdigit() and 0 < int(raw) < 2**63:
        return int(raw)
    _debug(f"ignoring PANEWARD_HOOK_AT_MS={raw!r}: not a positive integer (epoch ms)")
    return now_ms


def main(argv: Sequence[str]) -> int:
    """Run ``paneward hook``; returns 0 always (or ``exec``s the chained ``notify`` command)."""
    # actors.core.clock.now_ms, spelled out: one module less on the hook's path
    at_ms = time.time_ns() // 1_000_000
    try:
        at_ms = fire_time_ms(os.environ, at_ms)
        args = parse_args(argv)
        if args.show_help:
            sys.stdout.write(HELP)
            return 0
        for error in args.errors:
            _debug(error)
        raw: bytes | str
        if args.payload is not None:
            raw = args.payload
        else:
            # One byte over the limit is enough for the listener to see (and count) oversize.
            raw = _read_stdin(MAX_FRAME_BYTES + 1, STDIN_TIMEOUT_S)
        pid = owner_pid(args.owner, os.environ, os.getppid())
        token = read_start_token(pid) if pid is not None else None
        frame = build_frame(args.harness, raw, at_ms=at_ms, pid=pid, start_token=token)
        try:
            send_frame(frame, paths.socket_path())
        except OSError as exc:
            _debug(f"not delivered ({exc.__class__.__name__}: {exc})")
        if args.forward is not None:
            _forward(args.forward, args.payload)
    except Exception as exc:  # never fail the agent, whatever went wrong
        _debug(f"internal error: {exc!r}")
    return 0


def _forward(command: list[str], payload: str | None) -> None:
    """Replace this process with the user's original ``notify`` command (Codex chaining)."""
    argv = [*command, payload] if payload is not None else list(command)
    try:
        sys.stdout.flush()
        os.execvp(argv[0], argv)
    except OSError as exc:
        # Codex would have failed to spawn it too; say so where Codex logs notify stderr.
        sys.stderr.write(f"paneward hook: could not run forwarded notify {argv[0]!r}: {exc}\n")
