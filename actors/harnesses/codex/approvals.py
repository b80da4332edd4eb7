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
(:func:`actors.core.hints.permission_reason` of the hook's ``tool_name`` and
``tool_input.command``). Codex names its tools for hooks apart from the model's names
(``codex-rs/core/src/tools/hook_names.rs``): the shell tools (``exec_command``, whose hook
command is its ``cmd``, checked live; ``shell_command``, whose hook command is its
``command`` string, from the source) are ``Bash``; ``apply_patch`` keeps its name and its
hook command is the patch (from the source). Any other pending call (MCP tools, several calls
pending at once) names nothing here: the reason stays ``permission``.

Functional core: :func:`pending_call` (bytes in, ``(tool, command)`` out). The blocking,
bounded read of a rollout's tail is :func:`read_tail` (a worker thread's job).
"""

from __future__ import annotations

import os
import stat
from typing import Final

import msgspec

__all__ = ["TAIL_BYTES", "pending_call", "read_tail"]

#: How much of a rollout's end is read for one approval wait. The pending call is among the
#: last few lines (the call, then a token-usage record); 1 MiB also holds a large patch.
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


def pending_call(tail: bytes, *, whole: bool) -> tuple[str, str] | None:
    """The hook's ``(tool_name, tool_input.command)`` of the one tool call in ``tail`` that
    has no output yet, in the current turn; ``None`` if there is none, several, or one this
    module cannot name (see the module docstring).

    ``tail`` is the end of a rollout; ``whole`` says it starts at the file's start (else its
    first, possibly partial, line is ignored). Lines that are not JSON are skipped. Pure.
    """
    lines = tail.split(b"\n")
    if not whole:
        lines = lines[1:]
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
        elif record.type == "response_item" and payload.call_id:
            if payload.type in _CALLS:
                pending[payload.call_id] = payload
            elif payload.type in _OUTPUTS:
                pending.pop(payload.call_id, None)
    if len(pending) != 1:
        return None
    return _hook_view(next(iter(pending.values())))


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
