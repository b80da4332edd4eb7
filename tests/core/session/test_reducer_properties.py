"""Property tests: random message sequences through the reference SessionTable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.harnesses.catalog import PROOF_TABLE, normalize
from messages import (
    Acknowledge,
    HookHint,
    HostSignal,
    LifecycleBoundary,
    NotifyHook,
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
    ThreadStatus,
    Transition,
)
from messages.codec import Inbound
from messages.common import Harness
from messages.evidence import HintKind
from tests.support.reference_model import SessionTable

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
    table = SessionTable(normalize, PROOF_TABLE)
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


# ------------------------------------------------------- one wait, several records, any order

# The records each harness's sources make of one permission wait (the same dialog), built as
# the sources build them -- hook payloads through the harness's own normalize -- and the reason
# each one names. A record is (make(at_ms) -> message, reason, how much it says: 4 the tool and
# its command, 2 the harness's own words, 1 a generic word).
OWNER_PID, OWNER_TOKEN = 321, "77"
CMD = "echo hi > hi.txt"
WaitRecord = tuple[Callable[[int], Inbound], str, int]


def _hook(harness: Harness, payload: dict[str, Any]) -> Callable[[int], Inbound]:
    def make(at: int) -> Inbound:
        return NotifyHook(harness=harness, payload=payload, at_ms=at, observed_at_ms=at,
                          pid=OWNER_PID, start_token=OWNER_TOKEN)

    return make


def _osc(key: SessionKey, message: str | None) -> Callable[[int], Inbound]:
    def make(at: int) -> Inbound:
        return ProgramStatus(state="blocked", kind="permission", message=message, at_ms=at,
                             observed_at_ms=at, key=key)

    return make


def _claude_registry(at: int) -> Inbound:
    return RegistryStatus(key=SessionKey("claude-code", "w"), status="waiting",
                          waiting_for="permission prompt", at_ms=at, observed_at_ms=at,
                          pid=OWNER_PID, start_token=OWNER_TOKEN)


def _codex_daemon(summary: str | None) -> Callable[[int], Inbound]:
    def make(at: int) -> Inbound:
        return ThreadStatus(key=SessionKey("codex", "w"), status="active",
                            flags=("waitingOnApproval",), summary=summary, at_ms=at,
                            observed_at_ms=at, pid=OWNER_PID, start_token=OWNER_TOKEN)

    return make


_CLAUDE_ASK = {"hook_event_name": "PermissionRequest", "session_id": "w", "tool_name": "Bash",
               "tool_input": {"command": CMD}}
_CODEX_ASK = {**_CLAUDE_ASK, "turn_id": "t1"}
WAITS: dict[Harness, tuple[dict[str, Any], list[WaitRecord]]] = {
    "claude-code": (
        {"hook_event_name": "UserPromptSubmit", "session_id": "w", "prompt_id": "p1"},
        [
            (_hook("claude-code", _CLAUDE_ASK), f"permission: Bash: {CMD}", 4),
            (_claude_registry, "permission prompt", 1),
            (_osc(SessionKey("claude-code", "w"), f"approve Bash: {CMD}"),
             f"permission: Bash: {CMD}", 4),
            (_osc(SessionKey("claude-code", "w"), None), "permission", 1),
        ],
    ),
    "codex": (
        {"hook_event_name": "UserPromptSubmit", "session_id": "w", "turn_id": "t1"},
        [
            (_hook("codex", _CODEX_ASK), f"permission: Bash: {CMD}", 4),
            (_codex_daemon(f"permission: Bash: {CMD}"), f"permission: Bash: {CMD}", 4),
            (_codex_daemon(None), "permission", 1),
            (_osc(SessionKey("codex", "w"), None), "permission", 1),
        ],
    ),
    "gemini": (
        {"hook_event_name": "BeforeAgent", "session_id": "w"},
        [
            (_hook("gemini", {"hook_event_name": "Notification", "session_id": "w",
                              "notification_type": "ToolPermission",
                              "message": "Tool Confirm Shell Command requires execution",
                              "details": {"type": "exec", "command": CMD, "rootCommand": "echo"}}),
             f"permission: run_shell_command: {CMD}", 4),
            (_hook("gemini", {"hook_event_name": "Notification", "session_id": "w",
                              "notification_type": "ToolPermission"}), "permission", 1),
        ],
    ),
    "opencode": (
        {"hook_event_name": "session.status", "session_id": "w", "status": "busy"},
        [
            (_hook("opencode", {"hook_event_name": "permission.asked", "session_id": "w",
                                "permission": "bash", "patterns": [CMD]}),
             f"permission: bash: {CMD}", 4),
            (_hook("opencode", {"hook_event_name": "permission.asked", "session_id": "w"}),
             "permission", 1),
        ],
    ),
    "hermes": (
        {"hook_event_name": "pre_llm_call", "session_id": "w"},
        [
            (_hook("hermes", {"hook_event_name": "pre_approval_request", "session_id": "",
                              "extra": {"session_key": "w", "surface": "cli", "command": CMD,
                                        "description": "recursive delete"}}),
             f"permission: terminal: {CMD}", 4),
            (_hook("hermes", {"hook_event_name": "pre_approval_request", "session_id": "",
                              "extra": {"session_key": "w", "surface": "cli"}}),
             "permission: terminal", 3),
        ],
    ),
}


def test_every_harness_that_can_prove_a_wait_is_in_the_order_test() -> None:
    waits = {h for h, proof in PROOF_TABLE.items() if proof.get("needs_input")}
    assert waits == set(WAITS)
    assert {h for h in PROOF_TABLE if h not in WAITS} == {"cursor", "pi"}  # no permission event


@st.composite
def one_wait(draw: st.DrawFn) -> tuple[Harness, list[tuple[int, WaitRecord]], list[int]]:
    harness = draw(st.sampled_from(sorted(WAITS)))
    records = WAITS[harness][1]
    picked = draw(st.lists(st.sampled_from(range(len(records))), min_size=1, max_size=4))
    times = draw(st.lists(st.integers(1, 40), min_size=len(picked), max_size=len(picked),
                          unique=True))
    timed = [(T + t, records[i]) for t, i in zip(times, picked, strict=True)]
    order = draw(st.permutations(range(len(timed))))
    return harness, timed, list(order)


@settings(max_examples=400, deadline=None)
@given(one_wait())
def test_the_most_specific_reason_of_one_wait_wins_in_any_order(
    case: tuple[Harness, list[tuple[int, WaitRecord]], list[int]],
) -> None:
    """Every record one wait makes (hook, registry, daemon, OSC 7501), in every arrival order:
    the attention names the record that says most (the newest of those that say as much) and
    is open since the oldest record."""
    harness, timed, order = case
    table = SessionTable(normalize, PROOF_TABLE)
    table.apply(_hook(harness, WAITS[harness][0])(T))  # the turn the wait is in
    for i in order:
        at, (make, _reason, _detail) = timed[i]
        table.apply(make(at))
    activity = table.activity(SessionKey(harness, "w"))
    assert activity is not None and activity.attention is not None
    _at, (_make, reason, _detail) = max(timed, key=lambda r: (r[1][2], r[0]))
    assert (activity.turn, activity.attention.kind) == ("needs_input", "needs_input")
    assert activity.attention.reason == reason
    assert activity.attention.since_ms == min(at for at, _ in timed)
