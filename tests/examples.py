"""One valid example of every paneward message, for codec and routing tests."""

from __future__ import annotations

import msgspec

from messages import (
    Acknowledge,
    Activity,
    Attention,
    Evidence,
    ExitInfo,
    HookHint,
    HostSignal,
    LedgerFire,
    LifecycleBoundary,
    NotifyHook,
    Overflow,
    PaneBound,
    PaneClosed,
    PaneFocused,
    PaneOpened,
    PaneUnbound,
    ProcessGone,
    ProcessSeen,
    ProgramStatus,
    PtyExit,
    PtySpawned,
    RegistryRemoved,
    RegistryStatus,
    Rejected,
    RolloutOwned,
    RolloutReleased,
    SessionKey,
    Snapshot,
    Transition,
    Unmapped,
)

T = 1_795_995_369_045
CLAUDE = SessionKey("claude-code", "d9db7ac4-b60a-4a14-ae51-321496e4fc8f")
CODEX = SessionKey("codex", "01a229ab-bacd-7422-95f3-108794d72fbf")

ACTIVITY = Activity(
    key=CLAUDE,
    presence="running",
    turn="needs_input",
    evidence=Evidence("claude_registry", "waiting", T + 5, T, "2.1.332"),
    attention=Attention("needs_input", "permission: Bash", T),
    pane="%3",
    exit=None,
    subagents=1,
)

INBOUND: list[msgspec.Struct] = [
    ProcessSeen(pid=26995, start_token="154519", at_ms=T, observed_at_ms=T, ppid=1),
    ProcessGone(pid=26995, at_ms=T, observed_at_ms=T, start_token="154519", recycled=True),
    RegistryStatus(CLAUDE, 26995, "154519", "waiting", T, T, "permission prompt", "2.1.332"),
    RegistryRemoved(CLAUDE, 26995, T, T, pid_alive=True, rotated=True),
    LifecycleBoundary(
        CODEX, "task_complete", T, T, turn_id="t1", root_key=CODEX, version="0.171.0"
    ),
    RolloutOwned(CODEX, 4242, "777", T, T, root_key=None, version="0.171.0"),
    RolloutReleased(CODEX, 4242, T, T),
    NotifyHook("codex", {"type": "agent-turn-complete", "thread-id": "x"}, T, T, 4242, "777"),
    HookHint(
        CLAUDE,
        "claude_hook",
        "PermissionRequest",
        "needs_input",
        T,
        T,
        prompt_id="p1",
        tool="Bash",
        summary="permission: Bash",
        pid=26995,
        start_token="154519",
    ),
    LedgerFire(SessionKey("hermes", "cron_j1_20261129_233700"), "running", T, T, 99, True),
    PtySpawned(SessionKey("terminal", "pty-1-2"), 1234, "5678", T, T, pane="%1"),
    PtyExit(T, T, key=SessionKey("terminal", "pty-1-2"), code=None, signal=15),
    ProgramStatus(
        "blocked",
        T,
        T,
        pane="%1",
        kind="permission",
        app="claude-code",
        message="approve Bash: echo hi > hi.txt",
    ),
    PaneOpened("%1", 1234, T, cwd="/tmp", focused=True),
    PaneClosed("%1", T),
    PaneFocused("%1", T),
    PaneBound(CLAUDE, "%1", T, proof="claude_registry_pid"),
    PaneUnbound(CLAUDE, "%1", T),
    Acknowledge(T, pane="%1"),
    HostSignal(CLAUDE, "interrupt", T, reason="ctrl-c"),
]

OUTBOUND: list[msgspec.Struct] = [
    ACTIVITY,
    Transition(seq=7, key=CLAUDE, after=ACTIVITY, cause="RegistryStatus:waiting", before=None),
    Snapshot(seq=7, activities=(ACTIVITY,)),
    Overflow(next_seq=8, dropped=3, reason="subscriber fell 1024 transitions behind"),
    Unmapped(harness="cursor", event="weird", keys=("a", "b"), at_ms=T),
    Rejected(reason="invalid inbound message: ...", origin="hook", at_ms=T, key=None),
    Activity(
        key=CODEX,
        presence="persisted",
        turn="unknown",
        evidence=Evidence("pty_host"),
        exit=ExitInfo(code=3),
    ),
]
