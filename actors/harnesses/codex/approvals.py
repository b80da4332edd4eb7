"""Which tool call a Codex approval wait is about, from the tail of the thread's rollout.

Facts (re-checked with the real Codex 0.171.0 in daemon mode against the loopback mock; the
capture is ``tests/fixtures/codex/rollout-daemon-waiting-for-approval.jsonl``): when the
app-server daemon broadcasts ``thread/status/changed`` ``{"type": "active", "activeFlags":
["waitingOnApproval"]}``, the thread's rollout already ends with the model's call as a
``response_item`` (``function_call`` ``exec_command``, ``arguments`` ``{"cmd": "echo hi >
hi.txt", ...}``, ``call_id``) and no ``function_call_output`` with that ``call_id`` yet.
``thread/read`` with ``includeTurns`` does not list the pending command (only the user's
message), and the status names no call: the rollout is where the command is.

The reason must be the one the ``PermissionRequest`` hook gives for the same dialog
(:func:`actors.core.session.hints.permission_reason` of the hook's ``tool_name`` and
``tool_input.command``). Codex names its tools for hooks apart from the model's names
(``codex-rs/core/src/tools/hook_names.rs``): the shell tools (``exec_command``, whose hook
command is its ``cmd``, checked live; ``shell_command``, whose hook command is its
``command`` string, from the source) are ``Bash``; ``apply_patch`` keeps its name and its
hook command is the patch (from the source). Any other pending call (MCP tools, several calls
pending at once) names nothing here: the reason stays ``permission``.

Functional core: :func:`scan_tail` / :func:`pending_call` (bytes in, ``(tool, command)``
out). Imperative shell, blocking (a worker thread's job): :func:`read_tail`, a bounded read of a
rollout's end, and :func:`find_pending`, which reads the last 64 KiB and only when that window
does not reach back to the current turn's start the last 1 MiB (a turn's lines up to its call
are a few KiB; the approval edge is on the latency path of the badge).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Final

import msgspec

__all__ = ["FIRST_TAIL_BYTES", "TAIL_BYTES", "Scan", "find_pending", "pending_call",
           "read_tail", "scan_tail"]

#: How much of a rollout's end is read first for one approval wait: the pending call is among
#: the last few lines (the call, then a token-usage record).
FIRST_TAIL_BYTES: Final = 64 << 10
#: At most this much when the first window does not reach back to the turn's start (a long
#: turn, a large patch); a call that began further back is not found.
TAIL_BYTES: Final = 1 << 20

_CALLS: Final = frozenset({"function_call", "custom_tool_call"})
_OUTPUTS: Final = frozenset({"function_call_output", "custom_tool_call_output"})
_BOUNDARIES: Final = frozenset({"task_started", "task_complete", "turn_aborted"})
# Only lines that may matter are decoded (every other record is skipped by a byte search).
_MARKERS: Final = (b"function_call", b"custom_tool_call", b"task_", b"turn_aborted")
_OPEN_FLAGS: Final = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


class _Payload(msgspec.Struct):
    type: str = ""
    name: str | None = None
    call_id: str | None = None
    arguments: str | None = None  # function_call: a JSON object as text
    input: str | None = None  # custom_tool_call: the raw input


class _Line(msgspec.Struct):
    type: str = ""
    payload: _Payload | None = None


_LINE: Final = msgspec.json.Decoder(_Line)
_ARGS: Final = msgspec.json.Decoder(dict[str, object])


@dataclass(frozen=True)
class Scan:
    """What :func:`scan_tail` found: the pending call (as :func:`pending_call`), and whether
    the window reaches back to the current turn's start (or the file's), so that no call of
    this turn can lie before it."""

    call: tuple[str, str] | None
    complete: bool


def pending_call(tail: bytes, *, whole: bool) -> tuple[str, str] | None:
    """The hook's ``(tool_name, tool_input.command)`` of the one tool call in ``tail`` that
    has no output yet, in the current turn; ``None`` if there is none, several, or one this
    module cannot name (see the module docstring).

    ``tail`` is the end of a rollout; ``whole`` says it starts at the file's start (else its
    first, possibly partial, line is ignored). Lines that are not JSON are skipped. Pure.
    """
    return scan_tail(tail, whole=whole).call


def scan_tail(tail: bytes, *, whole: bool) -> Scan:
    """:func:`pending_call`, and whether ``tail`` holds the whole current turn. Pure."""
    lines = tail.split(b"\n")
    if not whole:
        lines = lines[1:]
    complete = whole
    pending: dict[str, _Payload] = {}
    for line in lines:
        if not any(marker in line for marker in _MARKERS):
            continue
        try:
            record = _LINE.decode(line)
        except msgspec.DecodeError:
            continue  # a line still being written, or not a record at all
        payload = record.payload
        if payload is None:
            continue
        if record.type == "event_msg" and payload.type in _BOUNDARIES:
            pending.clear()  # a call left without output by an ended turn is not waiting
            complete = True
        elif record.type == "response_item" and payload.call_id:
            if payload.type in _CALLS:
                pending[payload.call_id] = payload
            elif payload.type in _OUTPUTS:
                pending.pop(payload.call_id, None)
    call = _hook_view(next(iter(pending.values()))) if len(pending) == 1 else None
    return Scan(call, complete)


def _hook_view(call: _Payload) -> tuple[str, str] | None:
    """How Codex's ``PermissionRequest`` hook names ``call``: ``(tool_name, command)``."""
    if call.type == "custom_tool_call":
        return ("apply_patch", call.input) if call.name == "apply_patch" and call.input else None
    try:
        args = _ARGS.decode(call.arguments or "")
    except msgspec.DecodeError:
        return None
    key = {"exec_command": "cmd", "shell_command": "command"}.get(call.name or "")
    if key is not None:
        command = args.get(key)
        return ("Bash", command) if isinstance(command, str) and command else None
    if call.name == "apply_patch":
        patch = args.get("input")
        return ("apply_patch", patch) if isinstance(patch, str) and patch else None
    return None


def read_tail(path: str, limit: int = TAIL_BYTES) -> tuple[bytes, bool] | None:
    """Blocking (a worker thread): the last ``limit`` bytes of the regular file ``path``, and
    whether they start at its beginning; ``None`` if it cannot be opened, is a symbolic link
    or not a regular file (a FIFO would block a plain open: ``O_NONBLOCK``)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - limit)
        chunks: list[bytes] = []
        offset, left = start, info.st_size - start
        while left > 0:
            chunk = os.pread(fd, left, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            left -= len(chunk)
        return b"".join(chunks), start == 0
    except OSError:
        return None
    finally:
        os.close(fd)


def find_pending(path: str) -> tuple[str, str] | None:
    """Blocking (a worker thread): :func:`pending_call` of the rollout at ``path``, from its
    last :data:`FIRST_TAIL_BYTES`, or its last :data:`TAIL_BYTES` when the first window does
    not hold the whole current turn; ``None`` also when the file cannot be read."""
    found = None
    for limit in (FIRST_TAIL_BYTES, TAIL_BYTES):
        tail = read_tail(path, limit)
        if tail is None:
            return None
        found = scan_tail(tail[0], whole=tail[1])
        if found.complete:
            break
    return found.call if found is not None else None
