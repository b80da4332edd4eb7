"""The harnesses' captured hook payloads (``tests/fixtures/<harness>/``), as paneward's installed
hooks would have received them, and what they publish through the reference model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import messages
from actors.harnesses import catalog
from actors.harnesses.catalog import normalize_hook
from messages import NotifyHook
from tests.support import FIXTURES
from tests.support.daemon import start_token
from tests.support.reference_model import SessionTable

#: The owner the captured hooks are given: this live test process.
PID: Final = os.getpid()
TOKEN: Final = start_token(PID)


def lines(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines capture."""
    with path.open() as handle:
        for line in handle:
            yield json.loads(line)


def replay_hooks(hooks: list[NotifyHook]) -> list[tuple[str, str, str | None]]:
    """Every transition the hooks publish: (presence, turn, attention kind)."""
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    out: list[tuple[str, str, str | None]] = []
    for hook in hooks:
        for t in table.apply(hook):
            kind = t.after.attention.kind if t.after.attention else None
            out.append((t.after.presence, t.after.turn, kind))
    return out


def captured_hooks(harness: str, path: Path, installed: tuple[str, ...]) -> list[NotifyHook]:
    """The captured hook payloads paneward's installed hooks would have received, as the hook
    client frames them (owner: the live test process, standing in for the recorded parent)."""
    out = []
    for record in lines(path):
        payload = record["stdin"]
        if payload["hook_event_name"] not in installed:
            continue
        at = int(record["ts"] * 1000)
        out.append(NotifyHook(harness=harness, payload=payload, at_ms=at, observed_at_ms=at,  # type: ignore[arg-type]
                              pid=PID, start_token=TOKEN))
    return out


#: When the hook payloads of tests/fixtures/hooks/ are taken to arrive.
HOOK_AT: Final = 1_795_995_370_000


def hook_payloads(name: str) -> list[dict[str, Any]]:
    """The payloads (``stdin``) of tests/fixtures/hooks/NAME, the real captures of Claude Code
    2.1.332 and Codex 0.171.0."""
    rows = (FIXTURES / "hooks" / name).read_text().splitlines()
    return [json.loads(row)["stdin"] for row in rows if row.strip()]


def hook_hint(harness: messages.Harness, payload: dict[str, Any]) -> messages.HookHint:
    """What the harness package makes of ``payload`` (it must be a hint)."""
    out = normalize_hook(messages.NotifyHook(harness=harness, payload=payload, at_ms=HOOK_AT,
                                             observed_at_ms=HOOK_AT))
    assert isinstance(out, messages.HookHint), out
    return out
