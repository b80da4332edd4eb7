"""What each harness can prove (the catalog's declarations), as the reducer enforces it:
a value a harness cannot prove stays unknown, process and host evidence is never limited;
``paneward status --proofs``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import messages
from actors.cli import main as cli
from actors.cli import status as status_command
from actors.core.session.harness import PROVABLE, axis_of
from actors.core.session.reducer import UNLIMITED_SOURCES, initial_state, reduce
from actors.harnesses import catalog
from messages import HookHint, ProgramStatus, SessionKey
from tests.support.captures import PID, TOKEN


def test_every_harness_declares_every_value_once_with_known_sources() -> None:
    known = set(messages.common.Source.__args__)  # type: ignore[attr-defined]
    for spec in catalog.SPECS.values():
        assert [p.value for p in spec.proofs] == list(PROVABLE), spec.id
        for proof in spec.proofs:
            assert set(proof.sources) <= known, (spec.id, proof)
            assert proof.how, (spec.id, proof.value)
        assert catalog.PROOF_TABLE[spec.id] == spec.proofs_by_value()
    assert [axis_of(v) for v in PROVABLE] == [
        "presence", "turn", "turn", "turn", "attention", "attention"
    ]


def _hint(key: SessionKey, source: str, hint: str, at: int, **extra: Any) -> HookHint:
    return HookHint(key=key, source=source, event="e", hint=hint,  # type: ignore[arg-type]
                    at_ms=10**12 * 2 + at, observed_at_ms=10**12 * 2 + at, **extra)


def _published(key: SessionKey, *steps: Any, proof_table: Any = catalog.PROOF_TABLE) -> Any:
    state = initial_state(key)
    for message in steps:
        state = reduce(state, message, proof_table).state
    return state.activity


def test_a_value_a_harness_cannot_prove_stays_unknown() -> None:
    pi = SessionKey("pi", "p1")
    start = _hint(pi, "pi_extension", "working", 0, pid=PID, start_token=TOKEN)
    wait = _hint(pi, "pi_extension", "needs_input", 5, pid=PID, start_token=TOKEN)
    # Pi has no permission event: a needs_input claimed for it is not shown as proven ...
    shown = _published(pi, start, wait)
    assert (shown.presence, shown.turn, shown.attention) == ("running", "unknown", None)
    # ... where the same messages, with no declaration handed in, would show it.
    assert _published(pi, start, wait, proof_table=None).turn == "needs_input"

    # Gemini emits no OSC 7501: a status record for its pane proves nothing about its turn.
    gemini = SessionKey("gemini", "g1")
    at = 10**12 * 2 + 9
    osc = ProgramStatus(state="blocked", kind="permission", key=gemini, at_ms=at,
                        observed_at_ms=at)
    shown = _published(gemini, _hint(gemini, "gemini_hook", "working", 0, pid=PID,
                                     start_token=TOKEN), osc)
    assert (shown.turn, shown.attention) == ("unknown", None)

    # Cursor's hooks name no owner: even a payload claiming one does not prove presence.
    cursor = SessionKey("cursor", "c1")
    shown = _published(cursor, _hint(cursor, "cursor_hook", "working", 0, pid=PID,
                                     start_token=TOKEN))
    assert shown.presence == "persisted"
    # A source a harness does not name cannot open its turn_done either.
    codex = SessionKey("codex", "x1")
    done = _published(codex, _hint(codex, "codex_hook", "working", 0, pid=PID, start_token=TOKEN),
                      _hint(codex, "cursor_hook", "completed", 5))
    assert (done.turn, done.attention) == ("unknown", None)


def test_process_and_host_evidence_is_never_limited() -> None:
    assert {"pid_probe", "pty_host", "host"} <= UNLIMITED_SOURCES
    pi = SessionKey("pi", "p1")
    at = 10**12 * 2
    gone = messages.ProcessGone(pid=PID, start_token=TOKEN, at_ms=at + 9, observed_at_ms=at + 9)
    shown = _published(pi, _hint(pi, "pi_extension", "working", 0, pid=PID, start_token=TOKEN),
                       gone)
    assert shown.presence == "persisted"
    assert shown.attention is not None and shown.attention.kind == "failed"


def test_status_proofs_prints_each_harness_and_what_it_cannot_prove(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["status", "--proofs", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert list(table) == list(catalog.SPECS)
    pi = {p["value"]: p for p in table["pi"]["proves"]}
    assert pi["needs_input"]["sources"] == []
    assert "no permission" in pi["needs_input"]["how"]
    gemini = {p["value"]: p for p in table["gemini"]["proves"]}
    assert "Esc" in gemini["turn_done"]["how"]
    assert cli.main(["status", "--proofs"]) == 0
    text = capsys.readouterr().out
    assert "  turn      needs_input cannot prove: Pi has no permission prompt" in text
    assert status_command.format_proofs(table) == text.rstrip("\n")
