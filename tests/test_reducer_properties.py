"""Property tests: random message sequences through the reference SessionTable."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.harnesses.catalog import PROOFS, normalize
from actors.runtime.table import SessionTable
from messages import (
    Acknowledge,
    HookHint,
    HostSignal,
    LifecycleBoundary,
    PaneBound,
    PaneClosed,
    PaneFocused,
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
    Transition,
)
from messages.codec import Inbound
from messages.evidence import HintKind

T = 1_795_995_000_000
CLAUDE = st.sampled_from([SessionKey("claude-code", "a"), SessionKey("claude-code", "b")])
CODEX = st.sampled_from([SessionKey("codex", "root"), SessionKey("codex", "child")])
ANY_KEY = st.one_of(CLAUDE, CODEX, st.just(SessionKey("terminal", "pty")))
PID = st.sampled_from([100, 200, 300])
TOKEN = st.sampled_from(["1", "2"])
AT = st.integers(0, 60).map(lambda n: T + n * 100)
PANE = st.sampled_from(["%1", "%2"])
EVENTS: st.SearchStrategy[tuple[str, HintKind]] = st.sampled_from(
    [
        ("UserPromptSubmit", "working"),
        ("PreToolUse", "working"),
        ("PostToolUse", "working"),
        ("PermissionRequest", "needs_input"),
        ("Notification", "late_needs_input"),
        ("Notification", "info"),
        ("Stop", "completed"),
        ("SessionStart", "start"),
        ("SessionEnd", "ended"),
        ("SubagentStart", "subagent_start"),
        ("SubagentStop", "subagent_stop"),
    ]
)


@st.composite
def hook(draw: st.DrawFn) -> HookHint:
    event, hint = draw(EVENTS)
    at = draw(AT)
    owner = draw(st.booleans())
    return HookHint(
        key=draw(CLAUDE),
        source="claude_hook",
        event=event,
        hint=hint,
        at_ms=at,
        observed_at_ms=at,
        prompt_id=draw(st.sampled_from(["p1", "p2", None])),
        agent_id=draw(st.sampled_from(["g1", None])),
        pid=draw(PID) if owner else None,
        start_token=draw(TOKEN) if owner else None,
    )


@st.composite
def registry(draw: st.DrawFn) -> RegistryStatus:
    at = draw(AT)
    return RegistryStatus(
        key=draw(CLAUDE),
        pid=draw(PID),
        start_token=draw(TOKEN),
        status=draw(st.sampled_from([None, "idle", "busy", "waiting", "shell"])),
        at_ms=at,
        observed_at_ms=at,
        waiting_for=draw(st.sampled_from([None, "permission prompt"])),
    )


@st.composite
def codex(draw: st.DrawFn) -> Inbound:
    at = draw(AT)
    key = draw(CODEX)
    root = SessionKey("codex", "root") if key.session_id == "child" else None
    kind = draw(st.sampled_from(["owned", "released", "boundary", "notify"]))
    if kind == "owned":
        return RolloutOwned(
            key=key,
            pid=draw(PID),
            start_token=draw(TOKEN),
            at_ms=at,
            observed_at_ms=at,
            root_key=root,
        )
    if kind == "released":
        return RolloutReleased(key=key, pid=draw(PID), at_ms=at, observed_at_ms=at)
    if kind == "notify":
        return HookHint(
            key=key,
            source="codex_notify",
            event="agent-turn-complete",
            hint="completed",
            at_ms=at,
            observed_at_ms=at,
            turn_id=draw(st.sampled_from(["t1", "t2"])),
        )
    return LifecycleBoundary(
        key=key,
        boundary=draw(st.sampled_from(["task_started", "task_complete", "turn_aborted"])),
        at_ms=at,
        observed_at_ms=at,
        turn_id=draw(st.sampled_from(["t1", "t2"])),
        root_key=root,
    )


@st.composite
def other(draw: st.DrawFn) -> Inbound:
    at = draw(AT)
    kind = draw(st.integers(0, 10))
    key = draw(ANY_KEY)
    if kind == 0:
        return ProcessSeen(pid=draw(PID), start_token=draw(TOKEN), at_ms=at, observed_at_ms=at)
    if kind == 1:
        return ProcessGone(
            pid=draw(PID),
            at_ms=at,
            observed_at_ms=at,
            start_token=draw(st.sampled_from([None, "1", "2"])),
            recycled=draw(st.booleans()),
        )
    if kind == 2:
        return RegistryRemoved(
            key=draw(CLAUDE),
            pid=draw(PID),
            at_ms=at,
            observed_at_ms=at,
            pid_alive=draw(st.booleans()),
            rotated=draw(st.booleans()),
        )
    if kind == 3:
        return PtySpawned(
            key=key,
            pid=draw(PID),
            start_token=draw(TOKEN),
            at_ms=at,
            observed_at_ms=at,
            pane=draw(PANE),
        )
    if kind == 4:
        return PtyExit(
            at_ms=at,
            observed_at_ms=at,
            key=key,
            code=draw(st.sampled_from([None, 0, 1])),
            signal=draw(st.sampled_from([None, 15])),
        )
    if kind == 5:
        return ProgramStatus(
            state=draw(st.sampled_from(["working", "blocked", "done", "idle", "clear"])),
            at_ms=at,
            observed_at_ms=at,
            key=key,
            message="approve?",
            child_id=draw(st.sampled_from([None, "c1"])),
        )
    if kind == 6:
        return PaneBound(key=key, pane=draw(PANE), at_ms=at)
    if kind == 7:
        return PaneFocused(draw(PANE), at)
    if kind == 8:
        return PaneClosed(draw(PANE), at)
    if kind == 9:
        return Acknowledge(at, key=key)
    return HostSignal(
        key=key, signal=draw(st.sampled_from(["interrupt", "eof", "terminate"])), at_ms=at
    )


MESSAGES = st.lists(st.one_of(hook(), registry(), codex(), other()), max_size=80)


def _replay(messages: list[Inbound]) -> tuple[SessionTable, list[Transition]]:
    table = SessionTable(normalize, PROOFS)
    out: list[Transition] = []
    for message in messages:
        out.extend(table.apply(message))
    return table, out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MESSAGES)
def test_invariants_hold_for_any_sequence(messages: list[Inbound]) -> None:
    table, transitions = _replay(messages)
    last_seq = 0
    previous: dict[SessionKey, object] = {}
    for tr in transitions:
        # seq strictly increases
        assert tr.seq > last_seq
        last_seq = tr.seq
        after = tr.after
        # no published transition repeats the previous state of its session
        if tr.key in previous:
            assert previous[tr.key] != after.visible()
            assert tr.before is not None and tr.before.visible() == previous[tr.key]
        previous[tr.key] = after.visible()
        # presence persisted implies turn unknown
        if after.presence == "persisted":
            assert after.turn == "unknown"
        # attention needs_input iff turn needs_input
        is_needs = after.attention is not None and after.attention.kind == "needs_input"
        assert is_needs == (after.turn == "needs_input")
    # the last transition of each key is the current activity
    for key, visible in previous.items():
        current = table.activity(key)
        assert current is not None and current.visible() == visible


@settings(max_examples=200, deadline=None)
@given(MESSAGES)
def test_the_same_sequence_twice_gives_the_same_states(messages: list[Inbound]) -> None:
    first, out1 = _replay(messages)
    second, out2 = _replay(messages)
    assert out1 == out2
    assert first.states == second.states
