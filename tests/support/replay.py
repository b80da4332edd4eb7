"""Turn the real captures in tests/fixtures/real-harness/ into paneward messages.

The captures come from the real Claude Code 2.1.332 and Codex 0.171.0 CLIs run
against loopback mock APIs. Each
record becomes the message the corresponding paneward source would have sent,
stamped with the capture's own clock; the list is sorted by event time.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from messages import (
    LifecycleBoundary,
    NotifyHook,
    RegistryRemoved,
    RegistryStatus,
    RolloutOwned,
    SessionKey,
)
from messages.codec import Inbound
from tests import support

FIXTURES = support.FIXTURES / "real-harness"
CLAUDE_INTERACTIVE = SessionKey("claude-code", "d9db7ac4-b60a-4a14-ae51-321496e4fc8f")
CODEX_TUI_THREAD = SessionKey("codex", "01a229ab-bacd-7422-95f3-108794d72fbf")


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _iso_ms(stamp: str) -> int:
    return _ms(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def claude_messages() -> list[Inbound]:
    """hooks.jsonl + sessions_watch.jsonl as NotifyHook / RegistryStatus / RegistryRemoved."""
    out: list[tuple[int, int, Inbound]] = []
    for order, row in enumerate(_lines(FIXTURES / "claude" / "hooks.jsonl")):
        at = _ms(row["ts"])
        pid = int(row["env"]["CLAUDE_PID"])
        # The capture has no start token for the hook's owner; the registry's
        # procStart for the interactive pid is the real one.
        token = "154519" if pid == 26995 else "154400"
        out.append(
            (
                at,
                order,
                NotifyHook(
                    harness="claude-code",
                    payload=row["stdin"],
                    at_ms=at,
                    observed_at_ms=at,
                    pid=pid,
                    start_token=token,
                ),
            )
        )
    last: dict[str, Any] | None = None
    for order, row in enumerate(_lines(FIXTURES / "claude" / "sessions_watch.jsonl")):
        seen = _ms(row["ts"])
        if "content" in row:
            record = json.loads(row["content"])
            last = record
            key = SessionKey("claude-code", record["sessionId"])
            at = record.get("statusUpdatedAt") or record.get("startedAt") or seen
            out.append(
                (
                    at,
                    10_000 + order,
                    RegistryStatus(
                        key=key,
                        pid=record["pid"],
                        start_token=record["procStart"],
                        status=record.get("status"),
                        at_ms=at,
                        observed_at_ms=seen,
                        waiting_for=record.get("waitingFor"),
                        version=record.get("version"),
                    ),
                )
            )
        elif row.get("deleted") and last is not None:
            key = SessionKey("claude-code", last["sessionId"])
            out.append(
                (
                    seen,
                    10_000 + order,
                    RegistryRemoved(
                        key=key, pid=last["pid"], at_ms=seen, observed_at_ms=seen, pid_alive=False
                    ),
                )
            )
    out.sort(key=lambda item: (item[0], item[1]))
    return [message for _, _, message in out]


def codex_messages(owner_pid: int = 4242, token: str = "777") -> list[Inbound]:
    """rollout-tui.jsonl lifecycle records + notify.jsonl, with the daemon as owner."""
    out: list[tuple[int, int, Inbound]] = []
    rows = _lines(FIXTURES / "codex" / "rollout-tui.jsonl")
    meta = rows[0]["payload"]
    key = SessionKey("codex", meta["id"])
    first = _iso_ms(rows[0]["timestamp"])
    out.append(
        (
            first,
            -1,
            RolloutOwned(
                key=key,
                pid=owner_pid,
                start_token=token,
                at_ms=first,
                observed_at_ms=first,
                version=meta.get("cli_version"),
            ),
        )
    )
    for order, row in enumerate(rows):
        payload = row.get("payload") or {}
        kind = payload.get("type")
        if row["type"] == "event_msg" and kind in ("task_started", "task_complete", "turn_aborted"):
            at = _iso_ms(row["timestamp"])
            out.append(
                (
                    at,
                    order,
                    LifecycleBoundary(
                        key=key,
                        boundary=kind,
                        at_ms=at,
                        observed_at_ms=at,
                        turn_id=payload.get("turn_id"),
                    ),
                )
            )
    for order, row in enumerate(_lines(FIXTURES / "codex" / "notify.jsonl")):
        at = _ms(row["ts"])
        out.append(
            (
                at,
                10_000 + order,
                NotifyHook(harness="codex", payload=row["payload"], at_ms=at, observed_at_ms=at),
            )
        )
    out.sort(key=lambda item: (item[0], item[1]))
    return [message for _, _, message in out]
