"""The pending tool call of a Codex approval wait, from a rollout's tail (pure, and the read).

The lines are real: ``rollout-daemon-approvals.jsonl`` is what the real Codex 0.171.0 wrote in
daemon mode against the loopback mock (tests/support/mock_apis.py ``WRITE``): a first
``exec_command`` call denied with Esc (its ``function_call_output`` "aborted", then
``turn_aborted``), then the same call approved and run to ``task_complete``. Line 11 ends the
rollout as it was when the daemon broadcast the first ``waitingOnApproval``, line 22 as it was
at the second (read at that moment, tests/harnesses/codex/test_real_panes.py checks it live).
``rollout-while-waiting-for-approval.jsonl`` holds an earlier,
finished ``exec_command`` before the pending one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actors.harnesses.codex.approvals import (
    FIRST_TAIL_BYTES,
    find_pending,
    pending_call,
    read_tail,
    scan_tail,
)
from tests import support

FIXTURES = support.FIXTURES / "codex"
LINES = (FIXTURES / "rollout-daemon-approvals.jsonl").read_bytes().splitlines(keepends=True)
EARLIER = (FIXTURES / "rollout-while-waiting-for-approval.jsonl").read_bytes()
WRITE = ("Bash", "echo hi > hi.txt")


def upto(n: int) -> bytes:
    """The rollout as its first ``n`` lines."""
    return b"".join(LINES[:n])


def renamed(line: bytes, old: bytes, new: bytes) -> bytes:
    assert old in line
    return line.replace(old, new)


CALL = LINES[20]  # the second turn's function_call (exec_command)
SHELL_COMMAND = renamed(renamed(CALL, b'"name":"exec_command"', b'"name":"shell_command"'),
                        b'\\"cmd\\"', b'\\"command\\"')
APPLY_PATCH = (b'{"timestamp":"2026-12-01T13:27:00.000Z","type":"response_item","payload":'
               b'{"type":"custom_tool_call","status":"completed","call_id":"call_p1",'
               b'"name":"apply_patch","input":"*** Begin Patch\\n*** Add File: /etc/x\\n+hi\\n'
               b'*** End Patch"}}\n')
MCP = renamed(CALL, b'"name":"exec_command"', b'"name":"mcp__codex_tui__create_thread"')


@pytest.mark.parametrize(("tail", "whole", "found"), [
    (upto(11), True, WRITE),  # the first wait, as the daemon broadcast it
    (upto(10), True, WRITE),  # the call is the last line
    (upto(9), True, None),  # before the call
    (upto(12), True, None),  # Esc: its output ("aborted")
    (upto(15), True, None),  # ... and turn_aborted
    (upto(22), True, WRITE),  # the second wait (the mock reuses call ids: one per turn)
    (upto(24), True, None),  # approved: the command ran
    (upto(30), True, None),  # task_complete
    (b"".join(LINES[12:22]), False, WRITE),  # a window: its first line is dropped
    (LINES[20][40:] + LINES[21], False, None),  # a window that starts inside the call
    (upto(22)[: -len(LINES[21])] + LINES[21][:50], True, WRITE),  # a line still being written
    (LINES[20][:-20] + b"\n" + LINES[21], True, None),  # the call cut short: not JSON
    (EARLIER, True, WRITE),  # an earlier call finished, the newest one waits
    (upto(17) + LINES[20] + LINES[20].replace(b"call_mock1", b"call_mock2"), True, None),
    (upto(17) + SHELL_COMMAND, True, WRITE),  # shell_command: Bash, its command
    (upto(17) + APPLY_PATCH, True,
     ("apply_patch", "*** Begin Patch\n*** Add File: /etc/x\n+hi\n*** End Patch")),
    (upto(17) + MCP, True, None),  # an MCP tool: not named here
    (upto(11).replace(b"echo hi > hi.txt", b""), True, None),  # no command
    (b"", True, None),
    (b"\x00\xff not json\n[1, 2]\n{\"type\": 3}\n", True, None),
])
def test_the_pending_call_is_the_one_without_output(
    tail: bytes, whole: bool, found: tuple[str, str] | None
) -> None:
    assert pending_call(tail, whole=whole) == found


def test_the_tail_read_is_bounded_and_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(upto(22))
    assert read_tail(str(rollout)) == (upto(22), True)
    limit = len(LINES[20]) + len(LINES[21]) + 10  # the call, whole, and the line after it
    data, whole = read_tail(str(rollout), limit=limit) or (b"", True)
    assert (data, whole) == (upto(22)[-limit:], False)
    assert pending_call(data, whole=whole) == WRITE
    data, whole = read_tail(str(rollout), limit=limit - 20) or (b"", True)
    assert pending_call(data, whole=whole) is None  # the call begins before the window
    link = tmp_path / "link.jsonl"
    link.symlink_to(rollout)
    assert read_tail(str(link)) is None  # O_NOFOLLOW
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert read_tail(str(fifo)) is None  # opened without blocking, then refused
    assert read_tail(str(tmp_path)) is None
    assert read_tail(str(tmp_path / "missing.jsonl")) is None


@pytest.mark.parametrize(("tail", "whole", "complete"), [
    (upto(22), True, True),  # the file's start
    (b"".join(LINES[15:22]), False, True),  # the turn's task_started (line 17) is in it
    (b"".join(LINES[17:22]), False, False),  # it is not: an earlier call may be pending
    (b"".join(LINES[12:15]), False, True),  # turn_aborted
])
def test_a_window_is_complete_when_it_reaches_back_to_the_turns_start(
    tail: bytes, whole: bool, complete: bool
) -> None:
    assert scan_tail(tail, whole=whole).complete is complete


def test_a_long_turn_widens_the_window(tmp_path: Path) -> None:
    # The second turn with more than the first window of other lines (its user message,
    # repeated) between its start and its call.
    filler = LINES[18] * (FIRST_TAIL_BYTES // len(LINES[18]) + 2)
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(upto(17) + filler + LINES[20] + LINES[21])
    assert find_pending(str(rollout)) == WRITE
    # a second call of the same turn, pending, before the first window: both are seen, so
    # neither is named (the first window alone would have named the wrong one half the time)
    other = LINES[20].replace(b"call_mock1", b"call_mock0").replace(b"echo hi > hi.txt", b"ls")
    rollout.write_bytes(upto(17) + other + filler + LINES[20] + LINES[21])
    tail = read_tail(str(rollout), FIRST_TAIL_BYTES)
    assert tail is not None and pending_call(tail[0], whole=tail[1]) == WRITE
    assert find_pending(str(rollout)) is None
    assert find_pending(str(tmp_path / "missing.jsonl")) is None
