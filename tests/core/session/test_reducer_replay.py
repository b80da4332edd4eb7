"""Replay of the real Claude Code and Codex captures through the reducer.

The captures (tests/fixtures/real-harness/) were recorded from the real CLIs
against loopback mock APIs; tests/support/replay.py turns each record into the message
its paneward source sends and sorts them by event time.
"""

from __future__ import annotations

from actors.harnesses.catalog import PROOF_TABLE, normalize
from messages import Transition
from tests.support.reference_model import SessionTable
from tests.support.replay import (
    CLAUDE_INTERACTIVE,
    CODEX_TUI_THREAD,
    claude_messages,
    codex_messages,
)

Row = tuple[str, str, str, str, tuple[str, str] | None]

DONE_STOP = ("turn_done", "turn done (Stop)")
DONE_CODEX = ("turn_done", "turn done (task_complete)")


def _rows(transitions: list[Transition]) -> list[Row]:
    rows: list[Row] = []
    for tr in transitions:
        a = tr.after
        attention = (a.attention.kind, a.attention.reason) if a.attention else None
        rows.append((tr.key.session_id[:8], tr.cause, a.presence, a.turn, attention))
    return rows


def _replay(messages: list[object]) -> tuple[SessionTable, list[Transition]]:
    table = SessionTable(normalize, PROOF_TABLE)
    out: list[Transition] = []
    for message in messages:
        out.extend(table.apply(message))  # type: ignore[arg-type]
    return table, out


def test_claude_interactive_session_exact_sequence() -> None:
    table, transitions = _replay(list(claude_messages()))
    assert [t.seq for t in transitions] == list(range(1, len(transitions) + 1))
    interactive = [r for r in _rows(transitions) if r[0] == "d9db7ac4"]
    assert interactive == [
        # first registry write has no status: running, turn unknown
        ("d9db7ac4", "RegistryStatus", "running", "unknown", None),
        ("d9db7ac4", "RegistryStatus:idle", "running", "idle", None),
        # TOOL prompt: working, then Stop -> idle + turn_done
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        ("d9db7ac4", "HookHint:Stop", "running", "idle", DONE_STOP),
        # WRITE prompt: the next turn closes turn_done; the dialog opens needs_input at
        # once, and PermissionRequest names the tool
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        (
            "d9db7ac4",
            "RegistryStatus:waiting",
            "running",
            "needs_input",
            ("needs_input", "permission prompt"),
        ),
        (
            "d9db7ac4",
            "HookHint:PermissionRequest",
            "running",
            "needs_input",
            ("needs_input", "permission: Bash: echo hi > hi.txt"),
        ),
        # the late (~6 s) permission Notification changes nothing; approval is the
        # registry edge waiting -> busy (no hook fires for it)
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        ("d9db7ac4", "HookHint:Stop", "running", "idle", DONE_STOP),
        # AGENT prompt: the subagent starts (its count is part of the published activity);
        # its SubagentStop and the turn's Stop both list it as still running in the
        # background, so the session stays working through the Stop (published: the turn
        # ended, its work did not), the registry's busy and the <task-notification> turn
        # Claude submits when the agent reports; that turn's Stop lists nothing in flight:
        # idle + turn_done
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        ("d9db7ac4", "HookHint:SubagentStart", "running", "working", None),
        ("d9db7ac4", "HookHint:Stop", "running", "working", None),
        ("d9db7ac4", "HookHint:Stop", "running", "idle", DONE_STOP),
        # SLOW + Esc: idle from the registry alone, no turn_done
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        ("d9db7ac4", "RegistryStatus:idle", "running", "idle", None),
        # hello: completes; the 60 s idle_prompt Notification changes nothing
        ("d9db7ac4", "RegistryStatus:busy", "running", "working", None),
        ("d9db7ac4", "HookHint:Stop", "running", "idle", DONE_STOP),
        # /exit: registry file removed with the owner gone -> persisted, turn unknown
        ("d9db7ac4", "RegistryRemoved", "persisted", "unknown", DONE_STOP),
    ]
    final = table.activity(CLAUDE_INTERACTIVE)
    assert final is not None
    assert final.evidence.harness_version == "2.1.332"
    assert table.unmapped == []


def test_claude_print_mode_session_from_hooks_alone() -> None:
    _, transitions = _replay(list(claude_messages()))
    print_mode = [r for r in _rows(transitions) if r[0] == "c20f0219"]
    assert print_mode == [
        ("c20f0219", "HookHint:SessionStart", "running", "unknown", None),
        ("c20f0219", "HookHint:UserPromptSubmit", "running", "working", None),
        ("c20f0219", "HookHint:Stop", "running", "idle", DONE_STOP),
        ("c20f0219", "HookHint:SessionEnd", "persisted", "unknown", DONE_STOP),
    ]


def test_codex_tui_rollout_and_notify_exact_sequence() -> None:
    table, transitions = _replay(list(codex_messages()))
    assert _rows(transitions) == [
        ("01a229ab", "RolloutOwned", "running", "unknown", None),
        ("01a229ab", "LifecycleBoundary:task_started", "running", "working", None),
        ("01a229ab", "LifecycleBoundary:task_complete", "running", "idle", DONE_CODEX),
        ("01a229ab", "LifecycleBoundary:task_started", "running", "working", None),
        ("01a229ab", "LifecycleBoundary:task_complete", "running", "idle", DONE_CODEX),
        ("01a229ab", "LifecycleBoundary:task_started", "running", "working", None),
        ("01a229ab", "LifecycleBoundary:task_complete", "running", "idle", DONE_CODEX),
        # Esc: turn_aborted -> idle without turn_done
        ("01a229ab", "LifecycleBoundary:task_started", "running", "working", None),
        ("01a229ab", "LifecycleBoundary:turn_aborted", "running", "idle", None),
        # the turn the daemon finished in the background
        ("01a229ab", "LifecycleBoundary:task_started", "running", "working", None),
        ("01a229ab", "LifecycleBoundary:task_complete", "running", "idle", DONE_CODEX),
    ]
    # notify for threads without a rollout (the hidden title threads, the exec run not
    # replayed here) creates nothing visible; notify for the TUI thread repeats the
    # rollout's completion and publishes nothing.
    shown = {t.key for t in transitions}
    assert shown == {CODEX_TUI_THREAD}
    assert table.ignored == {"no claim": 5, "repeat": 4}


def test_codex_notify_completion_is_not_doubled_after_acknowledge() -> None:
    """The notify for a turn whose task_complete was already applied opens nothing."""
    from messages import Acknowledge

    messages = list(codex_messages())
    table = SessionTable(normalize, PROOF_TABLE)
    seen_notify = 0
    for message in messages:
        table.apply(message)
        activity = table.activity(CODEX_TUI_THREAD)
        if activity is not None and activity.attention is not None:
            # the user acknowledges every turn_done at once
            table.apply(Acknowledge(at_ms=message.at_ms, key=CODEX_TUI_THREAD))
        if type(message).__name__ == "NotifyHook":
            seen_notify += 1
            after = table.activity(CODEX_TUI_THREAD)
            assert after is None or after.attention is None
    assert seen_notify == 9
