"""Hermes Agent's interactive hooks from the real capture (tests/fixtures/hermes/) through normalize
and the reducer: the turns the screen showed, the permission reason, the session of the approval
hooks.
"""

from __future__ import annotations

from actors.harnesses import catalog
from actors.harnesses.hermes import hooks as hermes_hooks
from messages import HookHint, SessionKey, Transition
from tests.support import FIXTURES
from tests.support.captures import captured_hooks
from tests.support.reference_model import SessionTable


def test_hermes_capture_replays_to_the_turns_the_screen_showed() -> None:
    hooks = captured_hooks(
        "hermes", FIXTURES / "hermes" / "hooks.jsonl", hermes_hooks.INSTALLED_EVENTS
    )
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    seen: list[Transition] = []
    for hook in hooks:
        seen += table.apply(hook)
    assert [(t.after.presence, t.after.turn, t.after.attention and t.after.attention.kind)
            for t in seen] == [
        ("running", "unknown", None),  # on_session_start, with the first prompt
        ("running", "working", None),  # pre_llm_call (TOOL)
        ("running", "idle", "turn_done"),  # on_session_end completed
        ("running", "working", None),  # pre_llm_call (DANGER)
        ("running", "needs_input", "needs_input"),  # pre_approval_request surface cli
        ("running", "working", None),  # post_approval_response once
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # SLOW, then Ctrl+C:
        ("running", "idle", None),  # on_session_end interrupted (and completed): no turn_done
        ("persisted", "unknown", None),  # on_session_finalize
    ]
    needs = next(t for t in seen if t.after.turn == "needs_input")
    assert needs.after.attention is not None
    assert needs.after.attention.reason == "permission: terminal: rm -rf ./junkdir"
    # The approval hooks carry an empty session_id: their session is extra.session_key.
    assert {t.key for t in seen} == {SessionKey("hermes", "20261201_090257_aa66ac")}
    # The `smart` surface (Hermes's own model reviewing) is not a wait for the user.
    smart = next(h for h in hooks if h.payload["extra"].get("surface") == "smart")
    assert isinstance(hint := hermes_hooks.normalize(smart), HookHint) and hint.hint == "info"
