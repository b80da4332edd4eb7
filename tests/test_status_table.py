"""``paneward status``'s table (actors.cli.commands.format_table), over plain JSON activities as
the control socket returns them."""

from __future__ import annotations

from typing import Any

from actors.cli.commands import ENDED_SHOWN_MS, format_table

NOW = 1_800_000_000_000


def row(
    sid: str, presence: str, turn: str, age_ms: int, attention: str | None = None
) -> dict[str, Any]:
    return {
        "key": {"harness": "claude-code", "session_id": sid},
        "presence": presence,
        "turn": turn,
        "attention": {"kind": attention, "reason": "r", "since_ms": NOW} if attention else None,
        "pane": None,
        "evidence": {"source": "claude_hook", "at_ms": NOW - age_ms},
    }


SESSIONS = [
    row("live", "running", "working", 3 * ENDED_SHOWN_MS),
    row("ended-now", "persisted", "unknown", 60_000),
    row("ended-old", "persisted", "unknown", ENDED_SHOWN_MS + 1),
    row("done-old", "persisted", "unknown", ENDED_SHOWN_MS + 1, attention="turn_done"),
    row("failed-old", "persisted", "unknown", 5 * ENDED_SHOWN_MS, attention="failed"),
]


def sessions_of(table: str) -> list[str]:
    return [line.split()[2] for line in table.splitlines()[1:] if not line.startswith("(")]


def test_sessions_that_ended_more_than_a_day_ago_leave_the_table() -> None:
    table = format_table(SESSIONS, NOW)
    # A live session of any age, a recent end, and a failure nobody acknowledged stay.
    assert sessions_of(table) == ["failed-old", "live", "ended-now"]
    assert table.splitlines()[-1] == "(2 more ended more than a day ago: paneward status --all)"


def test_all_lists_everything() -> None:
    table = format_table(SESSIONS, NOW, show_all=True)
    assert sorted(sessions_of(table)) == sorted(s["key"]["session_id"] for s in SESSIONS)
    assert "more ended" not in table


def test_only_old_sessions_says_so_rather_than_no_sessions() -> None:
    table = format_table([SESSIONS[2]], NOW)
    assert table.splitlines()[1:] == ["(1 more ended more than a day ago: paneward status --all)"]
    assert format_table([], NOW).splitlines()[1:] == ["(no sessions yet)"]
