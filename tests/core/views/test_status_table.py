"""``paneward status``'s table (actors.core.views.status_table.format_table), over activities
decoded from the JSON the control socket returns."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.core.session.reducer import ENDED_SHOWN_MS
from actors.core.text import clip, printable
from actors.core.views.status_table import ATTENTION_WIDTH, format_table
from messages import Activity

NOW = 1_800_000_000_000


def row(
    sid: str, presence: str, turn: str, age_ms: int, attention: str | None = None,
    pane: str | None = None,
) -> Activity:
    return msgspec.convert(_json(sid, presence, turn, age_ms, attention, pane), Activity)


def _json(
    sid: str, presence: str, turn: str, age_ms: int, attention: str | None, pane: str | None
) -> dict[str, Any]:
    return {
        "type": "Activity",
        "key": {"harness": "claude-code", "session_id": sid},
        "presence": presence,
        "turn": turn,
        "attention": {"kind": attention, "reason": "r", "since_ms": NOW} if attention else None,
        "pane": pane,
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
    # A live session of any age, a recent end, and attention nobody acted on stay (the one
    # "settled" rule of actors.core.session.reducer: the store forgets by the same rule after a
    # week).
    assert sessions_of(table) == ["failed-old", "done-old", "live", "ended-now"]
    assert table.splitlines()[-1] == "(1 more ended more than a day ago: paneward status --all)"


def test_a_pane_shows_one_session_the_others_are_in_parentheses() -> None:
    table = format_table(
        [row("quiet", "running", "unknown", 10, pane="%3"),
         row("busy", "running", "working", 20, pane="%3")],
        NOW,
    )
    assert [line.split()[:3] for line in table.splitlines()[1:]] == [
        ["%3", "claude-code", "busy"],
        ["(%3)", "claude-code", "quiet"],
    ]


def test_all_lists_everything() -> None:
    table = format_table(SESSIONS, NOW, show_all=True)
    assert sorted(sessions_of(table)) == sorted(s.key.session_id for s in SESSIONS)
    assert "more ended" not in table


def test_only_old_sessions_says_so_rather_than_no_sessions() -> None:
    table = format_table([SESSIONS[2]], NOW)
    assert table.splitlines()[1:] == ["(1 more ended more than a day ago: paneward status --all)"]
    assert format_table([], NOW).splitlines()[1:] == ["(no sessions yet)"]


def test_the_attention_queue_comes_first_with_how_long_it_has_been_open() -> None:
    def open_for(sid: str, kind: str, minutes: int) -> Activity:
        a = row(sid, "running", "idle", 0, attention=kind)
        assert a.attention is not None
        since = NOW - minutes * 60_000
        return msgspec.structs.replace(
            a, attention=msgspec.structs.replace(a.attention, since_ms=since)
        )

    table = format_table(
        [open_for("done", "turn_done", 3), row("busy", "running", "working", 0),
         open_for("new", "needs_input", 1), open_for("old", "needs_input", 62)],
        NOW,
    )
    lines = table.splitlines()[1:]
    assert [line.split()[2] for line in lines] == ["old", "new", "done", "busy"]
    assert "needs you 1h: r" in lines[0] and "needs you 1m: r" in lines[1]
    assert "done 3m: r" in lines[2]
def test_a_long_reason_is_cut_with_an_ellipsis_to_a_fixed_width() -> None:
    def waiting(sid: str, reason: str) -> Activity:
        return msgspec.convert(
            {**_json(sid, "running", "needs_input", 0, "needs_input", None),
             "attention": {"kind": "needs_input", "reason": reason, "since_ms": NOW}},
            Activity,
        )

    long = "permission: Bash: " + "echo hi; " * 20
    short = "permission: Bash: ls"
    table = format_table([waiting("long", long), waiting("short", short)], NOW)
    cells = {line.split()[2]: line for line in table.splitlines()[1:]}
    assert f"needs you <1m: {short}" in cells["short"] and "…" not in cells["short"]
    cut = cells["long"][cells["long"].index("needs you"):][:ATTENTION_WIDTH]
    assert cut == f"needs you <1m: {long}"[: ATTENTION_WIDTH - 1] + "…"
    # the column is as wide as the cut: the next column starts at one place in both rows
    assert cells["long"].index("claude_hook") == cells["short"].index("claude_hook")


# ------------------------------------------------------------------ control characters


_NASTY = "\x1b]0;pwned\x07\x1b[2J\u202eevil\x9b31m\x7f\\"


def test_control_characters_are_escaped_in_the_table_and_the_cut_closes_nothing() -> None:
    nasty = msgspec.convert(
        {**_json("\x1b[2J" + "x" * 20, "running", "needs_input", 0, "needs_input", "%1\x1b[A"),
         "attention": {"kind": "needs_input", "reason": "permission: " + _NASTY,
                       "since_ms": NOW}},
        Activity,
    )
    table = format_table([nasty], NOW)
    assert all(c.isprintable() or c == "\n" for c in table), repr(table)
    assert "\\x1b[2Jxxxx" in table  # the 13-character cut is of the escaped text
    assert "%1\\x1b[A" in table


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_printable_escapes_exactly_the_unprintable(text: str) -> None:
    out = printable(text)
    assert out.isprintable()
    if text.isprintable() and "\\" not in text:
        assert out == text
    assert clip(text, 13) == out[:13]


def test_printable_is_systemd_like() -> None:
    assert printable("a\tb\nc\x1b[0m\x00\x9b\u202e\\") == "a\\tb\\nc\\x1b[0m\\x00\\x9b\\u202e\\\\"


def test_watch_summary_escapes_payload_text() -> None:
    from actors.cli.watch import summary_line

    after = {**_json(_NASTY, "running", "working", 0, None, "%9\x07"), "subagents": 0}
    line = summary_line({"type": "Transition", "seq": 3, "after": after, "cause": "Hook:\x1b[2J"})
    assert line.isprintable()
    assert line.endswith("<- Hook:\\x1b[2J")
    gap = summary_line({"type": "Gap", "next_seq": 4, "dropped": 2, "reason": "store_full",
                    "noticed_ms": NOW})
    assert gap == "# gap: 2 transitions from #4 are not in the journal (store_full)"


def test_a_reader_that_goes_away_ends_status_quietly() -> None:
    """``paneward status --proofs | head -0``: the pipe's reader is gone before the first write
    (a real pipe whose read end is closed); the command ends with exit 1 and no traceback."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from actors.cli import entry; sys.exit(entry())",
             "status", "--proofs"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (1, "")
