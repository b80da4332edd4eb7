"""Synthetic sessions as their sources send them: bursts of Claude Code hooks shaped like the
real captures (``tests/fixtures/real-harness/``), a terminal session that runs and then waits
for a permission (as messages, and as the JSON frames a hook socket reads), and hostile text for
a reason."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import messages
from messages import NotifyHook, ProgramStatus, PtySpawned, SessionKey
from tests.support.daemon import start_token
from tests.support.replay import FIXTURES


def _templates() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in (FIXTURES / "claude" / "hooks.jsonl").read_text().splitlines():
        payload = json.loads(line)["stdin"]
        out.setdefault(payload["hook_event_name"], payload)
    return out


TEMPLATES = _templates()


def claude_hook(session: str, event: str, n: int, pid: int, token: str) -> NotifyHook:
    """The ``n``-th hook of ``session`` (unique prompt id: never a duplicate)."""
    payload = {**TEMPLATES[event], "session_id": session, "prompt_id": f"prompt-{n}"}
    at = 1_800_000_000_000 + n
    return NotifyHook(
        harness="claude-code",
        payload=payload,
        at_ms=at,
        observed_at_ms=at,
        pid=pid,
        start_token=token,
    )


def burst(sessions: list[str], turns: int, pid: int, token: str) -> list[NotifyHook]:
    """SessionStart each, then UserPromptSubmit/Stop pairs round-robin: one transition each."""
    out = [claude_hook(s, "SessionStart", i, pid, token) for i, s in enumerate(sessions)]
    n = len(out)
    for _ in range(turns):
        for s in sessions:
            for event in ("UserPromptSubmit", "Stop"):
                out.append(claude_hook(s, event, n, pid, token))
                n += 1
    return out


def frames(hooks: list[NotifyHook]) -> bytes:
    """The hooks as the hook socket reads them: one JSON frame a line."""
    return b"".join(messages.encode(h) + b"\n" for h in hooks)


def spawned(session: str) -> PtySpawned:
    """The session runs (its host says so; the owner is this test process, alive)."""
    now = time.time_ns() // 1_000_000
    return PtySpawned(
        key=SessionKey("terminal", session), pid=os.getpid(), start_token=start_token(os.getpid()),
        at_ms=now, observed_at_ms=now,
    )


def blocked(session: str, message: str = "approve Bash: echo hi") -> ProgramStatus:
    """The session's program waits for a permission (an OSC 7501 record saying so)."""
    now = time.time_ns() // 1_000_000
    return ProgramStatus(
        key=SessionKey("terminal", session), state="blocked", kind="permission",
        message=message, at_ms=now, observed_at_ms=now,
    )


# A one-word command that ends an OSC at its C1 ST (U+009C) and starts an OSC 52 clipboard write
# with a C1 OSC (U+009D), for a terminal that honours C1 in UTF-8 (xterm, VTE).
C1_COMMAND = "x\x9c\x9d52;c;cHduZWQh\x9c"


# When the frames of spawned_frame and status_frame happened.
FRAMES_AT_MS = 1795995370911


def spawned_frame(session: str) -> bytes:
    """The session's program runs in a PTY its host owns (this test process stands for it):
    the host is then the authority on its turn, so ProgramStatus moves it."""
    pid = os.getpid()
    return json.dumps({
        "type": "PtySpawned", "key": {"harness": "terminal", "session_id": session},
        "pid": pid, "start_token": start_token(pid),
        "at_ms": FRAMES_AT_MS, "observed_at_ms": FRAMES_AT_MS,
    }).encode() + b"\n"


def status_frame(session: str, state: str, n: int) -> bytes:
    """The program's ``n``-th status record (``blocked`` waits for a permission)."""
    return json.dumps({
        "type": "ProgramStatus", "state": state, **({"kind": "permission"} if state == "blocked"
                                                   else {}),
        "key": {"harness": "terminal", "session_id": session},
        "at_ms": FRAMES_AT_MS + n, "observed_at_ms": FRAMES_AT_MS + n,
    }).encode() + b"\n"


def pane_bound_frame(session: str, pane: str) -> bytes:
    """The host binds the session to its ``pane`` (a pane of the host's own tmux)."""
    return json.dumps({
        "type": "PaneBound", "key": {"harness": "terminal", "session_id": session},
        "pane": pane, "at_ms": FRAMES_AT_MS, "proof": "host",
    }).encode() + b"\n"
