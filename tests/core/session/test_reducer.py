"""The session reducer, one named case per rule of docs/design.md §4 (table-driven, no loop)."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import pytest

from actors.core.session.hints import permission_reason
from actors.core.session.reducer import (
    REPLACED,
    SessionMessage,
    SessionState,
    initial_state,
    pane_rank,
    pane_views,
    pane_winners,
    reduce,
)
from messages import (
    Acknowledge,
    Activity,
    Attention,
    Evidence,
    Forget,
    HookHint,
    HostSignal,
    LedgerFire,
    LifecycleBoundary,
    PaneBound,
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
    RolloutOwned,
    RolloutReleased,
    SessionKey,
    ThreadStatus,
)
from messages.common import Presence, Turn
from messages.evidence import HintKind, ThreadState

T = 1_795_995_000_000
K = SessionKey("claude-code", "s1")
CX = SessionKey("codex", "thread-root")
CHILD = SessionKey("codex", "thread-child")
PID, TOK = 4242, "154519"
WRITE = "permission: Bash: echo hi > hi.txt"


def reg(
    status: str | None, t: int, waiting: str | None = None, pid: int = PID, tok: str = TOK
) -> RegistryStatus:
    return RegistryStatus(
        key=K,
        pid=pid,
        start_token=tok,
        status=status,
        at_ms=T + t,
        observed_at_ms=T + t,
        waiting_for=waiting,
        version="2.1.332",
    )


def hook(
    event: str,
    hint: HintKind,
    t: int,
    prompt: str | None = "p1",
    *,
    pid: int | None = PID,
    tok: str | None = TOK,
    tool: str | None = None,
    summary: str | None = None,
    agent: str | None = None,
    key: SessionKey = K,
    background: tuple[str, ...] | Literal["as sent"] | None = "as sent",
) -> HookHint:
    source: Literal["claude_hook", "cursor_hook"] = (
        "claude_hook" if key.harness == "claude-code" else "cursor_hook"
    )
    return HookHint(
        key=key,
        source=source,
        event=event,
        hint=hint,
        at_ms=T + t,
        observed_at_ms=T + t,
        prompt_id=prompt,
        tool=tool,
        summary=summary,
        agent_id=agent,
        pid=pid,
        start_token=tok,
        # Claude Code 2.1.332 lists its in-flight background work in every Stop (empty: none).
        background=(() if event == "Stop" else None) if background == "as sent" else background,
    )


def notify(t: int, turn: str, key: SessionKey = CX) -> HookHint:
    return HookHint(
        key=key,
        source="codex_notify",
        event="agent-turn-complete",
        hint="completed",
        at_ms=T + t,
        observed_at_ms=T + t,
        turn_id=turn,
    )


def bound(
    t: int,
    key: SessionKey = CX,
    boundary: str = "task_started",
    turn: str = "t1",
    root: SessionKey | None = None,
) -> LifecycleBoundary:
    return LifecycleBoundary(
        key=key,
        boundary=boundary,  # type: ignore[arg-type]
        at_ms=T + t,
        observed_at_ms=T + t,
        turn_id=turn,
        root_key=root,
    )


def daemon(
    status: ThreadState,
    t: int,
    *flags: str,
    key: SessionKey = CX,
    root: SessionKey | None = None,
    summary: str | None = None,
) -> ThreadStatus:
    """The Codex app-server daemon's status of a thread (it runs as pid 77)."""
    return ThreadStatus(
        key=key, status=status, at_ms=T + t, observed_at_ms=T + t, flags=flags, pid=77,
        start_token="9", root_key=root, version="0.171.0", summary=summary,
    )


def owned(t: int, key: SessionKey = CX) -> RolloutOwned:
    return RolloutOwned(key=key, pid=77, start_token="9", at_ms=T + t, observed_at_ms=T + t)


def osc(
    state: str,
    t: int,
    *,
    kind: str | None = None,
    msg: str | None = None,
    child: str | None = None,
    key: SessionKey = K,
) -> ProgramStatus:
    return ProgramStatus(
        state=state,  # type: ignore[arg-type]
        at_ms=T + t,
        observed_at_ms=T + t,
        key=key,
        kind=kind,
        message=msg,
        child_id=child,
    )


@dataclass
class Run:
    state: SessionState
    published: list[Activity] = field(default_factory=list)

    @property
    def last(self) -> Activity:
        assert self.state.activity is not None
        return self.state.activity

    @property
    def axes(self) -> tuple[str, str, str | None]:
        a = self.last
        return (a.presence, a.turn, a.attention.kind if a.attention else None)


def run(*messages: SessionMessage, key: SessionKey = K) -> Run:
    result = Run(initial_state(key))
    for message in messages:
        step = reduce(result.state, message)
        result.state = step.state
        if step.publish is not None:
            result.published.append(step.publish)
    return result


@dataclass(frozen=True)
class Case:
    name: str
    messages: tuple[SessionMessage, ...]
    axes: tuple[str, str, str | None]
    key: SessionKey = K
    reason: str | None = None
    published: int | None = None
    subagents: int | None = None
    source: str | None = None


PTY = PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T)
BASH = permission_reason("Bash", "echo hi > hi.txt")

CASES = [
    # ---- presence
    Case(
        "registry record of a live pid proves running",
        (reg(None, 0),),
        ("running", "unknown", None),
    ),
    Case(
        "rollout held open by codex proves running",
        (owned(0),),
        ("running", "unknown", None),
        key=CX,
    ),
    Case(
        "hook whose claimed owner is alive proves running",
        (hook("SessionStart", "start", 0),),
        ("running", "unknown", None),
    ),
    Case(
        "hook without a proven owner proves nothing: persisted means turn unknown",
        (hook("UserPromptSubmit", "working", 0, pid=None, tok=None),),
        ("persisted", "unknown", None),
    ),
    Case(
        "ProcessGone of the owner ends the session",
        (reg("idle", 0), ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5)),
        ("persisted", "unknown", None),
    ),
    Case(
        "ProcessGone of the seen incarnation ends it",
        (reg("idle", 0), ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5, start_token=TOK)),
        ("persisted", "unknown", None),
    ),
    Case(
        "ProcessGone of another incarnation of the pid ends nothing",
        (
            reg("idle", 0),
            ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5, start_token="other"),
        ),
        ("running", "idle", None),
    ),
    Case(
        "a replaced pid never ends the session it left",
        (
            reg("idle", 0),
            reg("idle", 10, pid=5555, tok="2"),
            ProcessGone(pid=PID, at_ms=T + 20, observed_at_ms=T + 20),
        ),
        ("running", "idle", None),
    ),
    Case(
        "a recycled pid (start token mismatch) ends the session",
        (
            reg("idle", 0),
            ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5, start_token=TOK, recycled=True),
        ),
        ("persisted", "unknown", None),
    ),
    Case(
        "death while working opens failed",
        (reg("busy", 0), ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5)),
        ("persisted", "unknown", "failed"),
        reason="exited while working (gone)",
    ),
    Case(
        "registry file gone with the owner dead ends the session (graceful)",
        (reg("busy", 0), RegistryRemoved(key=K, pid=PID, at_ms=T + 5, observed_at_ms=T + 5)),
        ("persisted", "unknown", None),
    ),
    Case(
        "registry file gone with the owner alive proves nothing",
        (
            reg("idle", 0),
            RegistryRemoved(key=K, pid=PID, at_ms=T + 5, observed_at_ms=T + 5, pid_alive=True),
        ),
        ("running", "idle", None),
    ),
    Case(
        "session id rotated in the same registry file ends the old key",
        (
            reg("idle", 0),
            RegistryRemoved(
                key=K, pid=PID, at_ms=T + 5, observed_at_ms=T + 5, pid_alive=True, rotated=True
            ),
        ),
        ("persisted", "unknown", None),
    ),
    Case(
        "rollout ownership missed twice ends the thread",
        (owned(0), bound(1), RolloutReleased(key=CX, pid=77, at_ms=T + 5, observed_at_ms=T + 5)),
        ("persisted", "unknown", "failed"),
        key=CX,
    ),
    Case(
        "SessionEnd hook ends the session without failed",
        (hook("UserPromptSubmit", "working", 0), hook("SessionEnd", "ended", 5)),
        ("persisted", "unknown", None),
    ),
    Case(
        "a late hook from the dead incarnation does not revive",
        (
            reg("idle", 0),
            ProcessGone(pid=PID, at_ms=T + 50, observed_at_ms=T + 50),
            hook("Stop", "completed", 40),
        ),
        ("persisted", "unknown", None),
    ),
    Case(
        "ProcessSeen of a restored owner proves running again",
        (
            reg("idle", 0),
            ProcessGone(pid=PID, at_ms=T + 5, observed_at_ms=T + 5),
            ProcessSeen(pid=PID, start_token=TOK, at_ms=T + 9, observed_at_ms=T + 9),
        ),
        ("running", "unknown", None),
    ),
    Case(
        "PtySpawned makes the host the authority on presence",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T, pane="%1"),
            ProcessGone(pid=9, at_ms=T + 5, observed_at_ms=T + 5),
            RegistryRemoved(key=K, pid=9, at_ms=T + 6, observed_at_ms=T + 6),
        ),
        ("running", "unknown", None),
    ),
    Case(
        "a PtySpawned announced again (wrapper reconnected) changes nothing",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T, pane="%1"),
            osc("working", 1),
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T + 5, observed_at_ms=T + 5, pane="%1"),
        ),
        ("running", "working", None),
        published=2,
    ),
    Case(
        "PtyExit with code 0 ends quietly",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, code=0),
        ),
        ("persisted", "unknown", None),
    ),
    Case(
        "PtyExit non-zero opens failed",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, code=3),
        ),
        ("persisted", "unknown", "failed"),
        reason="exited with code 3",
    ),
    Case(
        "PtyExit by a signal opens failed",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, signal=9),
        ),
        ("persisted", "unknown", "failed"),
        reason="killed by signal 9",
    ),
    Case(
        "host terminate means shutting_down",
        (reg("busy", 0), HostSignal(key=K, signal="terminate", at_ms=T + 5)),
        ("shutting_down", "unknown", None),
    ),
    # ---- turn
    Case(
        "UserPromptSubmit is working",
        (reg("idle", 0), hook("UserPromptSubmit", "working", 5)),
        ("running", "working", None),
    ),
    Case(
        "a <task-notification> prompt is a real turn",
        (
            reg("idle", 0),
            hook("Stop", "completed", 2),
            hook("UserPromptSubmit", "working", 5, "p2", summary="task-notification"),
        ),
        ("running", "working", None),
    ),
    Case(
        "PostToolUse after a permission wait is working again",
        (
            reg("busy", 0),
            hook("PermissionRequest", "needs_input", 2, tool="Bash", summary="permission: Bash"),
            hook("PostToolUse", "working", 9, tool="Bash"),
        ),
        ("running", "working", None),
    ),
    Case("registry busy is working", (reg("busy", 0),), ("running", "working", None)),
    Case(
        "registry waiting is needs_input with waitingFor as the reason",
        (reg("waiting", 0, "permission prompt"),),
        ("running", "needs_input", "needs_input"),
        reason="permission prompt",
    ),
    Case(
        "registry shell is an idle turn (hook-less: the busy edge completed it)",
        (reg("busy", 0), reg("shell", 5)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "PermissionRequest opens needs_input at once, naming the tool",
        (
            reg("busy", 0),
            hook("PermissionRequest", "needs_input", 5, tool="Bash", summary="permission: Bash"),
        ),
        ("running", "needs_input", "needs_input"),
        reason="permission: Bash",
    ),
    Case(
        "the registry's generic word after the hook's named reason keeps the named one",
        (
            reg("busy", 0),
            hook("PermissionRequest", "needs_input", 5, tool="Bash", summary=WRITE),
            reg("waiting", 8, "permission prompt"),
        ),
        ("running", "needs_input", "needs_input"),
        reason=WRITE,
    ),
    Case(
        "the hook's named reason arriving after the registry's newer generic word replaces it",
        (
            reg("busy", 0),
            reg("waiting", 8, "permission prompt"),
            hook("PermissionRequest", "needs_input", 5, tool="Bash", summary=WRITE),
        ),
        ("running", "needs_input", "needs_input"),
        reason=WRITE,
    ),
    Case(
        "an older record of a wait that was closed since names nothing",
        (
            reg("busy", 0),
            reg("waiting", 8, "permission prompt"),
            reg("busy", 9),
            reg("waiting", 12, "permission prompt"),
            hook("PermissionRequest", "needs_input", 5, tool="Bash", summary=WRITE),
        ),
        ("running", "needs_input", "needs_input"),
        reason="permission prompt",
    ),
    Case(
        "Stop completes the turn: idle and turn_done",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1), hook("Stop", "completed", 5)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "StopFailure also ends the turn (it lists no background work: the registry's idle "
        "edge confirms)",
        (reg("busy", 0), hook("StopFailure", "completed", 5), reg("idle", 6)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "Esc interrupt: registry busy -> idle without Stop is idle, no turn_done",
        (hook("UserPromptSubmit", "working", 0), reg("busy", 1), reg("idle", 9)),
        ("running", "idle", None),
    ),
    Case(
        "a denied permission: waiting -> idle is idle, no turn_done",
        (
            hook("UserPromptSubmit", "working", 0),
            reg("waiting", 3, "permission prompt"),
            reg("idle", 9),
        ),
        ("running", "idle", None),
    ),
    Case(
        "Stop landing just after the registry edge still opens turn_done",
        (
            hook("UserPromptSubmit", "working", 0),
            reg("busy", 1),
            reg("idle", 9),
            hook("Stop", "completed", 12),
        ),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "a Stop delivered late (older than the edge) still opens turn_done for its prompt",
        (
            hook("UserPromptSubmit", "working", 0),
            reg("busy", 1),
            reg("idle", 9),
            hook("Stop", "completed", 8),
        ),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "a late Stop for another prompt opens nothing",
        (
            hook("UserPromptSubmit", "working", 0, "p2"),
            reg("busy", 1),
            reg("idle", 9),
            hook("Stop", "completed", 8, "p1"),
        ),
        ("running", "idle", None),
    ),
    Case(
        "a hook-less Claude session treats registry idle after busy as completion",
        (reg("idle", 0), reg("busy", 1), reg("idle", 9)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "a stale registry status does not override a newer hook",
        (
            reg("busy", 0),
            hook("PermissionRequest", "needs_input", 10, summary="permission: Bash"),
            reg("busy", 5),
        ),
        ("running", "needs_input", "needs_input"),
        reason="permission: Bash",
    ),
    Case(
        "the permission Notification ~6 s late does not reopen needs_input",
        (
            reg("busy", 0),
            hook("PermissionRequest", "needs_input", 1),
            reg("busy", 3000),
            hook("Notification", "late_needs_input", 6300, summary="Claude needs your permission"),
        ),
        ("running", "working", None),
    ),
    Case(
        "a late permission Notification opens needs_input without better proof",
        (
            hook("UserPromptSubmit", "working", 0),
            hook("Notification", "late_needs_input", 6300, summary="Claude needs your permission"),
        ),
        ("running", "needs_input", "needs_input"),
        reason="Claude needs your permission",
    ),
    Case(
        "approvalrequired-style notifications open needs_input at once",
        (
            hook("beforeSubmitPrompt", "working", 0, key=SessionKey("cursor", "c1")),
            hook(
                "notification",
                "needs_input",
                5,
                key=SessionKey("cursor", "c1"),
                summary="input required",
            ),
        ),
        ("running", "needs_input", "needs_input"),
        key=SessionKey("cursor", "c1"),
    ),
    Case(
        "idle_prompt is a reminder, never needs_input",
        (reg("idle", 0), hook("Notification", "info", 60_000, summary="waiting for input")),
        ("running", "idle", None),
        published=1,
    ),
    Case(
        "Cursor stop completes, aborted stop does not",
        (
            hook("beforeSubmitPrompt", "working", 0, key=SessionKey("cursor", "c1")),
            hook("stop", "interrupted", 5, key=SessionKey("cursor", "c1")),
        ),
        ("running", "idle", None),
        key=SessionKey("cursor", "c1"),
    ),
    Case(
        "host interrupt: idle, no turn_done",
        (reg("busy", 0), HostSignal(key=K, signal="interrupt", at_ms=T + 5)),
        ("running", "idle", None),
    ),
    Case(
        "Codex task_started is working", (owned(0), bound(1)), ("running", "working", None), key=CX
    ),
    Case(
        "Codex task_complete is idle + turn_done",
        (owned(0), bound(1), bound(5, boundary="task_complete")),
        ("running", "idle", "turn_done"),
        key=CX,
    ),
    Case(
        "Codex turn_aborted is idle without turn_done",
        (owned(0), bound(1), bound(5, boundary="turn_aborted")),
        ("running", "idle", None),
        key=CX,
    ),
    Case(
        "notify agent-turn-complete completes a thread that has a rollout",
        (owned(0), bound(1), notify(5, "t1")),
        ("running", "idle", "turn_done"),
        key=CX,
    ),
    Case(
        "notify for the same turn as task_complete opens nothing new after acknowledge",
        (
            owned(0),
            bound(1),
            bound(5, boundary="task_complete"),
            Acknowledge(T + 6, key=CX),
            notify(9, "t1"),
        ),
        ("running", "idle", None),
        key=CX,
    ),
    Case(
        "duplicates are dropped",
        (reg("busy", 0), reg("idle", 5), reg("busy", 0)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "evidence older than the newest applied turn evidence is ignored",
        (reg("busy", 10), hook("Stop", "completed", 20), hook("UserPromptSubmit", "working", 15)),
        ("running", "idle", "turn_done"),
    ),
    # ---- subagents
    Case(
        "SubagentStop never flips the parent to idle",
        (
            reg("busy", 0),
            hook("SubagentStart", "subagent_start", 1, agent="a1"),
            hook("SubagentStop", "subagent_stop", 5, agent="a1"),
        ),
        ("running", "working", None),
    ),
    Case(
        "Codex child threads roll up: a busy child keeps the root working",
        (
            owned(0),
            bound(1),
            bound(2, boundary="task_complete"),
            bound(3, key=CHILD, root=CX, turn="c1"),
        ),
        ("running", "working", "turn_done"),
        key=CX,
    ),
    Case(
        "Codex child going idle lets the root show its own idle",
        (
            owned(0),
            bound(1),
            bound(2, boundary="task_complete"),
            bound(3, key=CHILD, root=CX, turn="c1"),
            bound(4, key=CHILD, root=CX, turn="c1", boundary="task_complete"),
        ),
        ("running", "idle", "turn_done"),
        key=CX,
    ),
    # ---- OSC 7501 program status
    Case(
        "program status working",
        (PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T), osc("working", 1)),
        ("running", "working", None),
    ),
    Case(
        "program status blocked: needs_input with the decoded message",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("blocked", 2, kind="permission", msg="approve Bash: echo hi > hi.txt"),
        ),
        ("running", "needs_input", "needs_input"),
        reason="permission: Bash: echo hi > hi.txt",
    ),
    Case(
        "program status done: completion",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("done", 5),
        ),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "program status idle after working without done: interrupt",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("idle", 5),
        ),
        ("running", "idle", None),
    ),
    Case(
        "program status clear: no further claim",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("clear", 5),
        ),
        ("running", "unknown", None),
    ),
    Case(
        "program status child ids are subagents, not the parent's turn",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("idle", 1),
            osc("working", 2, child="agent-1"),
        ),
        ("running", "idle", None),
    ),
    # ---- attention
    Case(
        "needs_input closes when the turn leaves needs_input",
        (reg("waiting", 0, "permission prompt"), reg("busy", 5)),
        ("running", "working", None),
    ),
    Case(
        "turn_done closes on the next turn",
        (
            reg("busy", 0),
            hook("Stop", "completed", 5),
            hook("UserPromptSubmit", "working", 9, "p2"),
        ),
        ("running", "working", None),
    ),
    Case(
        "turn_done closes on acknowledge",
        (reg("busy", 0), hook("Stop", "completed", 5), Acknowledge(T + 9, key=K)),
        ("running", "idle", None),
    ),
    Case(
        "turn_done closes on focus",
        (
            PaneBound(key=K, pane="%1", at_ms=T),
            reg("busy", 0),
            hook("Stop", "completed", 5),
            PaneFocused("%1", T + 9),
        ),
        ("running", "idle", None),
    ),
    Case(
        "turn_done does not open while the pane is focused",
        (
            PaneBound(key=K, pane="%1", at_ms=T),
            PaneFocused("%1", T),
            reg("busy", 0),
            hook("Stop", "completed", 5),
        ),
        ("running", "idle", None),
    ),
    Case(
        "focus elsewhere lets turn_done open again",
        (
            PaneBound(key=K, pane="%1", at_ms=T),
            PaneFocused("%1", T),
            PaneFocused("%2", T + 1),
            reg("busy", 2),
            hook("Stop", "completed", 5),
        ),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "failed closes on acknowledge",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, code=1),
            Acknowledge(T + 6, key=K),
        ),
        ("persisted", "unknown", None),
    ),
    Case(
        "priority: needs_input over failed over turn_done",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("done", 2),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, code=2),
            PtySpawned(key=K, pid=10, start_token="4", at_ms=T + 6, observed_at_ms=T + 6),
            osc("blocked", 7, msg="approve?"),
        ),
        ("running", "needs_input", "needs_input"),
    ),
    Case(
        "priority: failed over turn_done",
        (
            PtySpawned(key=K, pid=9, start_token="3", at_ms=T, observed_at_ms=T),
            osc("working", 1),
            osc("done", 2),
            PtyExit(at_ms=T + 5, observed_at_ms=T + 5, key=K, code=2),
        ),
        ("persisted", "unknown", "failed"),
    ),
    Case(
        "unbinding a pane clears it from the activity",
        (
            PaneBound(key=K, pane="%1", at_ms=T),
            reg("idle", 0),
            PaneUnbound(key=K, pane="%1", at_ms=T + 3),
        ),
        ("running", "idle", None),
    ),
    # ---- work that outlives the turn (docs/design.md §4): still working, turn_done when it ends
    Case(
        "a Stop listing a running background agent keeps the turn working, counted",
        (
            reg("busy", 0),
            hook("UserPromptSubmit", "working", 1),
            hook("SubagentStart", "subagent_start", 2, agent="a1"),
            hook("SubagentStop", "subagent_stop", 3, agent="a1", background=("a1",)),
            hook("Stop", "completed", 4, background=("a1",)),
        ),
        ("running", "working", None),
        subagents=1,
    ),
    Case(
        "the agent reports: its <task-notification> turn's Stop lists nothing: turn_done",
        (
            reg("busy", 0),
            hook("UserPromptSubmit", "working", 1),
            hook("SubagentStart", "subagent_start", 2, agent="a1"),
            hook("Stop", "completed", 4, background=("a1",)),
            hook("SubagentStop", "subagent_stop", 9, agent="a1", background=("a1",)),
            hook("UserPromptSubmit", "working", 10, "p2", summary="task-notification"),
            hook("Stop", "completed", 12, "p2", background=()),
        ),
        ("running", "idle", "turn_done"),
        subagents=0,
    ),
    Case(
        "the registry's own idle ends the listed background work: the completion opens",
        (
            reg("busy", 0),
            hook("UserPromptSubmit", "working", 1),
            hook("Stop", "completed", 4, background=("a1",)),
            reg("idle", 9),
        ),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "a Claude that lists no background work: registry still busy after Stop is working",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1),
         hook("Stop", "completed", 4, background=None)),
        ("running", "working", None),
    ),
    Case(
        "... and its idle edge opens the Stop's completion (even one older than the Stop)",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1),
         hook("Stop", "completed", 4, background=None), reg("idle", 3)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "a Stop listing nothing in flight completes at once, whatever the registry says",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1), hook("Stop", "completed", 4)),
        ("running", "idle", "turn_done"),
    ),
    Case(
        "SubagentStart without its SubagentStop keeps the completed turn working",
        (
            hook("UserPromptSubmit", "working", 1),
            hook("SubagentStart", "subagent_start", 2, agent="a1"),
            hook("Stop", "completed", 4),
        ),
        ("running", "working", None),
        subagents=1,
    ),
    Case(
        "... its SubagentStop, the harness idle: turn_done",
        (
            hook("UserPromptSubmit", "working", 1),
            hook("SubagentStart", "subagent_start", 2, agent="a1"),
            hook("Stop", "completed", 4),
            hook("SubagentStop", "subagent_stop", 6, agent="a1"),
        ),
        ("running", "idle", "turn_done"),
        subagents=0,
    ),
    Case(
        "OSC 7501: done while a child record works stays working",
        (PTY, osc("working", 1), osc("working", 2, child="c1"), osc("done", 3)),
        ("running", "working", None),
        subagents=1,
    ),
    Case(
        "OSC 7501: the last child's clear opens the completion",
        (PTY, osc("working", 1), osc("working", 2, child="c1"), osc("done", 3),
         osc("clear", 7, child="c1")),
        ("running", "idle", "turn_done"),
        subagents=0,
    ),
    Case(
        "Codex: the root completes while a child thread works: working until it ends",
        (owned(0), bound(1), bound(2, key=CHILD, root=CX, turn="c1"),
         bound(3, boundary="task_complete")),
        ("running", "working", None),
        key=CX,
        subagents=1,
    ),
    Case(
        "Codex: ... the child's task_complete opens the root's turn_done",
        (owned(0), bound(1), bound(2, key=CHILD, root=CX, turn="c1"),
         bound(3, boundary="task_complete"),
         bound(8, key=CHILD, root=CX, turn="c1", boundary="task_complete")),
        ("running", "idle", "turn_done"),
        key=CX,
        subagents=0,
    ),
    Case(
        "an interrupt during background work: idle, nothing opens",
        (PTY, osc("working", 1), osc("working", 2, child="c1"), osc("done", 3),
         osc("working", 4), osc("idle", 5), osc("clear", 7, child="c1")),
        ("running", "idle", None),
    ),
    Case(
        "background items die with their owner (an abrupt death while working: failed)",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1),
         hook("Stop", "completed", 4, background=("a1",)),
         ProcessGone(pid=PID, at_ms=T + 9, observed_at_ms=T + 9)),
        ("persisted", "unknown", "failed"),
        subagents=0,
    ),
    Case(
        "registry shell after Stop is an idle turn with a background shell, as always",
        (reg("busy", 0), hook("UserPromptSubmit", "working", 1), hook("Stop", "completed", 4),
         reg("shell", 5)),
        ("running", "idle", "turn_done"),
        subagents=0,
    ),
    Case(
        "a deferred completion focus meets opens nothing",
        (PaneBound(key=K, pane="%1", at_ms=T), hook("UserPromptSubmit", "working", 1),
         hook("Stop", "completed", 4, background=("a1",)), PaneFocused("%1", T + 5),
         reg("idle", 9)),
        ("running", "idle", None),
    ),
    # ---- the Codex app-server daemon's own thread status
    Case(
        "daemon active is working, and proves the daemon runs the thread",
        (daemon("active", 1),),
        ("running", "working", None),
        key=CX,
        source="codex_daemon",
    ),
    Case(
        "daemon waitingOnApproval is needs_input",
        (daemon("active", 1), daemon("active", 2, "waitingOnApproval")),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason="permission",
    ),
    Case(
        "daemon waitingOnUserInput is needs_input",
        (daemon("active", 1), daemon("active", 2, "waitingOnUserInput")),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason="input requested",
    ),
    Case(
        "the hook's reason for the same approval (tool and command) is kept",
        (
            daemon("active", 1),
            HookHint(key=CX, source="codex_hook", event="PermissionRequest",
                     hint="needs_input", at_ms=T + 2, observed_at_ms=T + 2, tool="Bash",
                     summary=BASH, pid=77, start_token="9"),
            daemon("active", 3, "waitingOnApproval"),
        ),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason=BASH,
    ),
    Case(
        "daemon waitingOnApproval with the call found in the rollout names it like the hook",
        (daemon("active", 1), daemon("active", 2, "waitingOnApproval", summary=BASH)),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason=BASH,
    ),
    Case(
        "the daemon's named reason, then the hook's for the same dialog: one reason",
        (
            daemon("active", 1),
            daemon("active", 2, "waitingOnApproval", summary=BASH),
            HookHint(key=CX, source="codex_hook", event="PermissionRequest",
                     hint="needs_input", at_ms=T + 3, observed_at_ms=T + 3, tool="Bash",
                     summary=BASH, pid=77, start_token="9"),
        ),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason=BASH,
        published=2,
    ),
    Case(
        "a named reason replaces a bare permission for the same wait",
        (daemon("active", 1), daemon("active", 2, "waitingOnApproval"),
         daemon("active", 3, "waitingOnApproval", summary=BASH)),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason=BASH,
    ),
    Case(
        "the hook's reason is kept over the daemon's when they differ",
        (
            daemon("active", 1),
            HookHint(key=CX, source="codex_hook", event="PermissionRequest",
                     hint="needs_input", at_ms=T + 2, observed_at_ms=T + 2, tool="Bash",
                     summary=BASH, pid=77, start_token="9"),
            daemon("active", 3, "waitingOnApproval", summary="permission: Bash: other"),
        ),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason=BASH,
    ),
    Case(
        "a summary on anything but an approval wait is no reason",
        (daemon("active", 1), daemon("active", 2, "waitingOnUserInput", summary=BASH)),
        ("running", "needs_input", "needs_input"),
        key=CX,
        reason="input requested",
    ),
    Case(
        "approved: active again is working",
        (daemon("active", 1), daemon("active", 2, "waitingOnApproval"), daemon("active", 3)),
        ("running", "working", None),
        key=CX,
    ),
    Case(
        "daemon idle after active is idle, and no completion by itself",
        (owned(0), bound(1), daemon("active", 1), daemon("idle", 9)),
        ("running", "idle", None),
        key=CX,
    ),
    Case(
        "the rollout's task_complete, older than the daemon's idle edge, still completes it",
        (owned(0), bound(1), daemon("active", 1), daemon("idle", 9),
         bound(8, boundary="task_complete")),
        ("running", "idle", "turn_done"),
        key=CX,
    ),
    Case(
        "Esc: an older turn_aborted after the daemon's idle edge opens nothing",
        (owned(0), bound(1), daemon("active", 1), daemon("idle", 9),
         bound(8, boundary="turn_aborted")),
        ("running", "idle", None),
        key=CX,
    ),
    Case(
        "systemError opens failed",
        (daemon("active", 1), daemon("systemError", 5)),
        ("running", "idle", "failed"),
        key=CX,
        reason="codex daemon: system error",
    ),
    Case(
        "notLoaded (also half of a reload) claims nothing",
        (daemon("active", 1), daemon("notLoaded", 5)),
        ("running", "working", None),
        key=CX,
        published=1,
    ),
    Case(
        "thread/closed ends the thread",
        (daemon("idle", 1), daemon("closed", 5)),
        ("persisted", "unknown", None),
        key=CX,
    ),
    Case(
        "a child thread's daemon status rolls up to its root",
        (daemon("idle", 1), daemon("active", 2, key=CHILD, root=CX)),
        ("running", "working", None),
        key=CX,
        subagents=1,
    ),
    # ---- one reason for one wait, whoever saw it
    Case(
        "OSC 7501 blocked without a message (Codex): the kind is the reason",
        (PTY, osc("working", 1), osc("blocked", 2, kind="permission")),
        ("running", "needs_input", "needs_input"),
        reason="permission",
    ),
    Case(
        "OSC 7501 blocked from Claude names the tool and command like its hook",
        (PTY, osc("working", 1),
         osc("blocked", 2, kind="permission", msg="approve Bash: echo hi > hi.txt")),
        ("running", "needs_input", "needs_input"),
        reason=BASH,
    ),
    # ---- Hermes
    Case(
        "Hermes claimed/running with a live pid is running/working",
        (
            LedgerFire(
                key=SessionKey("hermes", "h"),
                status="running",
                at_ms=T,
                observed_at_ms=T,
                pid=5,
                pid_alive=True,
            ),
        ),
        ("running", "working", None),
        key=SessionKey("hermes", "h"),
    ),
    Case(
        "Hermes running with a dead pid is persisted/unknown (abandoned)",
        (
            LedgerFire(
                key=SessionKey("hermes", "h"),
                status="running",
                at_ms=T,
                observed_at_ms=T,
                pid=5,
                pid_alive=False,
            ),
        ),
        ("persisted", "unknown", None),
        key=SessionKey("hermes", "h"),
    ),
    Case(
        "Hermes completed is persisted/unknown",
        (
            LedgerFire(
                key=SessionKey("hermes", "h"),
                status="running",
                at_ms=T,
                observed_at_ms=T,
                pid=5,
                pid_alive=True,
            ),
            LedgerFire(
                key=SessionKey("hermes", "h"),
                status="completed",
                at_ms=T + 5,
                observed_at_ms=T + 5,
                pid=5,
                pid_alive=False,
            ),
        ),
        ("persisted", "unknown", None),
        key=SessionKey("hermes", "h"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_rule(case: Case) -> None:
    result = run(*case.messages, key=case.key)
    assert result.axes == case.axes
    if case.reason is not None:
        assert result.last.attention is not None
        assert result.last.attention.reason == case.reason
    if case.published is not None:
        assert len(result.published) == case.published
    if case.subagents is not None:
        assert result.last.subagents == case.subagents
    if case.source is not None:
        assert result.last.evidence.source == case.source


def test_repeat_observation_differing_only_in_time_publishes_nothing() -> None:
    first = run(reg("busy", 0))
    step = reduce(
        first.state,
        RegistryStatus(
            key=K,
            pid=PID,
            start_token=TOK,
            status="busy",
            at_ms=T + 0,
            observed_at_ms=T + 999,
            waiting_for=None,
            version="2.1.332",
        ),
    )
    assert step.publish is None
    step = reduce(first.state, reg("busy", 7))
    assert step.publish is None and step.ignored == "repeat"


def test_hook_events_within_one_turn_publish_nothing_new() -> None:
    result = run(
        reg("busy", 0),
        hook("UserPromptSubmit", "working", 1),
        hook("PreToolUse", "working", 2, tool="Bash"),
        hook("PostToolUse", "working", 3, tool="Bash"),
        hook("MessageDisplay", "info", 4),
    )
    assert len(result.published) == 1


def test_hermes_abandoned_keeps_the_native_word() -> None:
    result = run(
        LedgerFire(
            key=SessionKey("hermes", "h"),
            status="claimed",
            at_ms=T,
            observed_at_ms=T,
            pid=5,
            pid_alive=False,
        ),
        key=SessionKey("hermes", "h"),
    )
    assert result.last.evidence.native_state == "abandoned"
    assert result.last.evidence.source == "hermes_executions"


def test_registry_shell_keeps_its_native_word() -> None:
    result = run(reg("busy", 0), reg("shell", 5))
    assert result.last.evidence.native_state == "shell"


def test_published_evidence_never_contains_a_pid_path_or_token() -> None:
    result = run(reg("busy", 0), hook("Stop", "completed", 5))
    text = repr(result.published)
    assert str(PID) not in text and TOK not in text


# (The reducer's purity -- no I/O, no async library loaded -- is guarded with every core module
# in tests/test_design.py.)


# --------------------------------------------------------------- one winner per pane


def shown(
    name: str,
    turn: Turn = "idle",
    *,
    presence: Presence = "running",
    attention: str | None = None,
    at: int = 0,
) -> Activity:
    """An activity bound to pane %1 whose evidence is from ``T + at``."""
    return Activity(
        key=SessionKey("codex", name),
        presence=presence,
        turn=turn if presence != "persisted" else "unknown",
        evidence=Evidence(source="pid_probe", at_ms=T + at, observed_at_ms=T + at),
        attention=None if attention is None else Attention(attention, "r", T),  # type: ignore[arg-type]
        pane="%1",
    )


@dataclass(frozen=True)
class Pane:
    name: str
    bound: tuple[Activity, ...]
    winner: str


PANES = [
    # a proven turn first: a session whose turn is unknown never hides one that proves a turn
    Pane("working beats a newer unknown (wrap -- codex and its TUI process)",
         (shown("w", "working", at=1), shown("tui", "unknown", at=9)), "w"),
    Pane("idle beats a newer unknown", (shown("i", "idle", at=1), shown("u", "unknown", at=9)),
         "i"),
    Pane("a live proven turn beats an ended session's newer record",
         (shown("i", "idle", at=1), shown("e", presence="persisted", at=9)), "i"),
    Pane("an unknown live session with attention never hides a proven turn",
         (shown("w", "working", at=1), shown("u", "unknown", attention="turn_done", at=9)), "w"),
    Pane("an ended session's failure never hides the live agent now in the pane",
         (shown("f", presence="persisted", attention="failed", at=9), shown("w", "working")),
         "w"),
    # then attention, most urgent first
    Pane("needs_input beats turn_done, whatever is newer",
         (shown("n", "needs_input", attention="needs_input", at=1),
          shown("d", "idle", attention="turn_done", at=9)), "n"),
    Pane("needs_input beats failed",
         (shown("f", "idle", attention="failed", at=9),
          shown("n", "needs_input", attention="needs_input", at=1)), "n"),
    Pane("failed beats turn_done",
         (shown("d", "idle", attention="turn_done", at=9),
          shown("f", "idle", attention="failed", at=1)), "f"),
    Pane("turn_done beats no attention",
         (shown("w", "working", at=9), shown("d", "idle", attention="turn_done", at=1)), "d"),
    # then live over ended (both unproven)
    Pane("a live unknown beats an ended one",
         (shown("e", presence="persisted", at=9), shown("u", "unknown", at=1)), "u"),
    # ties go to the newest evidence, then the key (only to be deterministic)
    Pane("equal proof: the newest evidence", (shown("a", "idle", at=9), shown("b", "working",
                                                                             at=1)), "a"),
    Pane("equal proof, equal time: the key", (shown("a", "idle"), shown("b", "idle")), "b"),
]


@pytest.mark.parametrize("case", PANES, ids=lambda c: c.name)
def test_one_winner_per_pane(case: Pane) -> None:
    for bound in (case.bound, tuple(reversed(case.bound))):  # the order never matters
        assert pane_winners(bound)["%1"].key.session_id == case.winner
        best = max(bound, key=pane_rank)
        assert best.key.session_id == case.winner
        (view,) = pane_views(bound)
        assert view.key.session_id == case.winner and view.pane == "%1"
        assert {k.session_id for k in view.hidden} == {
            a.key.session_id for a in bound} - {case.winner}


def test_pane_views_carry_the_harness_note_of_the_winner() -> None:
    tui = shown("tui-1-2", "unknown")
    other = msgspec.structs.replace(shown("x", "idle"), pane="%2")
    views = pane_views([other, tui], lambda a: f"note for {a.key.session_id}")
    assert [(v.pane, v.note) for v in views] == [("%1", "note for tui-1-2"), ("%2", "note for x")]
    assert pane_views([tui])[0].note is None


def test_the_hot_path_makes_untracked_values() -> None:
    """The state, step and activity of every reduced hook, and routing's delivery, are acyclic
    values the cyclic collector never tracks (see messages/common.py)."""
    from actors.core.session.routing import RoutingIndex

    state = initial_state(K)
    for message in (hook("UserPromptSubmit", "working", 1), hook("Stop", "completed", 2)):
        step = reduce(state, message)
        assert step.publish is not None
        for value in (step, step.state, step.publish):
            assert not gc.is_tracked(value), value
        state = step.state
    deliveries = RoutingIndex().route(hook("Stop", "completed", 3))
    assert len(deliveries) == 1
    assert not gc.is_tracked(deliveries[0])


def test_a_session_bound_to_the_pane_already_focused_is_focused() -> None:
    """Routing: the focus a pane had before its session bound reaches the session as it binds;
    a finished turn there opens nothing. A pane that merely opens (even as its session's
    active pane) is no focus change."""
    from actors.harnesses.catalog import PROOF_TABLE, normalize
    from tests.support.reference_model import SessionTable

    table = SessionTable(normalize, PROOF_TABLE)
    for message in (PaneFocused("%1", T), PaneOpened(pane="%2", root_pid=5, at_ms=T, focused=True),
                    PaneBound(key=K, pane="%1", at_ms=T), reg("busy", 0),
                    hook("Stop", "completed", 5)):
        table.apply(message)
    shown = table.states[K].activity
    assert shown is not None and shown.attention is None and shown.turn == "idle"
    # Focus elsewhere: the next finished turn opens turn_done.
    for message in (PaneFocused("%2", T + 6), reg("busy", 7),
                    hook("Stop", "completed", 9, prompt="p2")):
        table.apply(message)
    shown = table.states[K].activity
    assert shown is not None and shown.attention is not None
    assert shown.attention.kind == "turn_done"


TUI = SessionKey("codex", "tui-31-310")


def test_a_tuis_own_session_that_gave_way_to_its_thread_ends_and_can_be_forgotten() -> None:
    seen = ProcessSeen(pid=31, start_token="310", at_ms=T, observed_at_ms=T, key=TUI)
    standing_in = (seen, PaneBound(key=TUI, pane="%1", at_ms=T, proof="codex_tui_process"))
    standing = run(*standing_in, key=TUI)
    assert (standing.axes, standing.last.pane) == (("running", "unknown", None), "%1")
    gave_way = (*standing_in, PaneUnbound(key=TUI, pane="%1", at_ms=T + 5, replaced=True))
    ended = run(*gave_way, key=TUI)
    assert (ended.axes, ended.last.pane) == (("persisted", "unknown", None), None)
    assert (ended.last.evidence.source, ended.last.evidence.native_state) == (
        "pane_mapper", REPLACED)
    # ended, the Forget the pane mapper sends next is taken (published: the session leaves)
    forgotten = run(*gave_way, Forget(TUI, T + 5), key=TUI)
    assert len(forgotten.published) == len(ended.published) + 1
    # the pid watcher's probe of that process, still alive, does not bring it back; the pane
    # mapper showing it again (the thread closed) does
    probed = ProcessSeen(pid=31, start_token="310", at_ms=T + 7, observed_at_ms=T + 7)
    still = run(*gave_way, probed, key=TUI)
    assert still.axes == ("persisted", "unknown", None)
    again = msgspec.structs.replace(seen, at_ms=T + 8, observed_at_ms=T + 8)
    shown = run(*gave_way, again, PaneBound(key=TUI, pane="%1", at_ms=T + 8), key=TUI)
    assert (shown.axes, shown.last.pane) == (("running", "unknown", None), "%1")
    # a plain unbind (another agent in the pane) ends nothing
    moved = run(*standing_in, PaneUnbound(key=TUI, pane="%1", at_ms=T + 5), key=TUI)
    assert moved.axes == ("running", "unknown", None)


def test_a_record_from_tmux_output_makes_no_session_of_its_own() -> None:
    """A record read from a pane is about the session the pane shows: one that reaches a session
    nobody knows, or one that gave way (a TUI's own session, once its thread is bound, then
    forgotten), is late and changes nothing; the same record for a session the pane shows is
    applied; ``paneward wrap``'s record (``pty_status``) is not limited so."""
    late = msgspec.structs.replace(osc("working", 5, key=TUI), source="tmux_output")
    nothing = run(late, key=TUI)
    assert (nothing.published, nothing.state.known) == ([], False)
    seen = ProcessSeen(pid=31, start_token="310", at_ms=T, observed_at_ms=T, key=TUI)
    bound = PaneBound(key=TUI, pane="%1", at_ms=T, proof="codex_tui_process")
    shown = run(seen, bound, late, key=TUI)
    assert shown.axes == ("running", "working", None)
    assert shown.last.evidence.source == "tmux_output"
    # One that reaches it after it gave way brings it back no more than the pid probe does
    # (the supervisor then forgets it: a fresh state, as above).
    gave_way = run(seen, bound, PaneUnbound(key=TUI, pane="%1", at_ms=T + 3, replaced=True),
                   late, key=TUI)
    assert gave_way.axes == ("persisted", "unknown", None)
    assert gave_way.last.evidence.native_state == REPLACED
    wrapped = run(osc("working", 5, key=TUI), key=TUI)
    assert wrapped.state.known


def test_the_dead_tuis_own_session_shows_it_ended_in_its_pane() -> None:
    seen = ProcessSeen(pid=31, start_token="310", at_ms=T, observed_at_ms=T, key=TUI)
    gone = ProcessGone(pid=31, start_token="310", at_ms=T + 9, observed_at_ms=T + 9, key=TUI)
    back = PaneBound(key=TUI, pane="%1", at_ms=T + 9, proof="exited_client")
    # it had given way to the thread (and ended), or it was never known (or forgotten): either
    # way it is shown in the pane, ended, by the process's death
    earlier: tuple[tuple[SessionMessage, ...], ...] = (
        (seen, PaneBound(key=TUI, pane="%1", at_ms=T),
         PaneUnbound(key=TUI, pane="%1", at_ms=T + 5, replaced=True)),
        (),
    )
    for before in earlier:
        orders: tuple[tuple[SessionMessage, ...], ...] = ((gone, back), (back, gone))
        for last in orders:
            after = run(*before, *last, key=TUI)
            assert (after.axes, after.last.pane) == (("persisted", "unknown", None), "%1")
            assert after.last.evidence.source == "pid_probe"


GEM = SessionKey("gemini", "g1")


def gemini(event: str, hint: HintKind, t: int) -> HookHint:
    return HookHint(key=GEM, source="gemini_hook", event=event, hint=hint, at_ms=T + t,
                    observed_at_ms=T + t, pid=PID, start_token=TOK)


GEM_DONE = (PaneBound(key=GEM, pane="%1", at_ms=T), gemini("BeforeAgent", "working", 1),
            gemini("AfterAgent", "completed", 2))
GEM_KILLED = ProcessGone(pid=PID, start_token=TOK, at_ms=T + 9, observed_at_ms=T + 9)


def test_an_agent_killed_after_a_finished_turn_keeps_the_unseen_done_and_leaves_once_seen() -> (
    None
):
    killed = run(*GEM_DONE, GEM_KILLED, key=GEM)
    assert (killed.axes, killed.last.pane) == (("persisted", "unknown", "turn_done"), "%1")
    # looking at the pane closes the done and, the agent being gone, leaves the pane bare
    seen = run(*GEM_DONE, GEM_KILLED, PaneFocused("%1", T + 20), key=GEM)
    assert (seen.axes, seen.last.pane) == (("persisted", "unknown", None), None)
    # so does acknowledging it (a focus elsewhere does neither)
    elsewhere = run(*GEM_DONE, GEM_KILLED, PaneFocused("%2", T + 20), key=GEM)
    assert (elsewhere.axes, elsewhere.last.pane) == (("persisted", "unknown", "turn_done"), "%1")
    acked = run(*GEM_DONE, GEM_KILLED, Acknowledge(T + 20, pane="%1"), key=GEM)
    assert (acked.axes, acked.last.pane) == (("persisted", "unknown", None), None)


def test_an_agent_that_ends_in_the_focused_pane_leaves_it_when_the_focus_moves() -> None:
    watched = (PaneBound(key=GEM, pane="%1", at_ms=T), PaneFocused("%1", T),
               gemini("BeforeAgent", "working", 1), gemini("AfterAgent", "completed", 2),
               GEM_KILLED)
    ended = run(*watched, key=GEM)
    assert (ended.axes, ended.last.pane) == (("persisted", "unknown", None), "%1")
    moved = run(*watched, PaneFocused("%2", T + 20), key=GEM)
    assert moved.last.pane is None


def test_a_failed_end_stays_in_its_pane_until_acknowledged() -> None:
    dying = (PaneBound(key=GEM, pane="%1", at_ms=T), gemini("BeforeAgent", "working", 1),
             GEM_KILLED)
    focused = run(*dying, PaneFocused("%1", T + 20), key=GEM)
    assert (focused.axes, focused.last.pane) == (("persisted", "unknown", "failed"), "%1")
    acked = run(*dying, PaneFocused("%1", T + 20), Acknowledge(T + 21, key=GEM), key=GEM)
    assert (acked.axes, acked.last.pane) == (("persisted", "unknown", None), None)


def test_a_session_that_left_its_pane_shows_there_again_when_it_is_alive_again() -> None:
    left = (*GEM_DONE, GEM_KILLED, PaneFocused("%1", T + 20))
    again = run(*left, HookHint(key=GEM, source="gemini_hook", event="SessionStart",
                                hint="start", at_ms=T + 30, observed_at_ms=T + 30, pid=PID + 1,
                                start_token="2"), key=GEM)
    assert (again.last.presence, again.last.pane) == ("running", "%1")
    rebound = run(*left, PaneBound(key=GEM, pane="%3", at_ms=T + 30), key=GEM)
    assert rebound.last.pane == "%3"
