"""Pure parts of the tmux integration, without an event loop or tmux: the control-mode parser,
the badge book (Activity -> pane options), option diffs, quoting and the pane table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.core.tmux.badges import (
    BADGES,
    OPTION_NAMES,
    BadgeBook,
    PaneChange,
    PaneOptions,
    WindowMarks,
    badge_word,
    option_commands,
    pane_options,
    summary_command,
    summary_text,
    window_badge,
    window_command,
)
from actors.core.tmux.panes import (
    PaneRow,
    PaneTable,
    parse_pane_rows,
    unescape_path,
    viewed_pane,
)
from actors.core.tmux.protocol import (
    ControlParser,
    Reply,
    TmuxError,
    TmuxNotification,
    TmuxTarget,
    argv_word,
    commands_argv,
    format_literal,
    quote,
    quote_exact,
)
from messages import (
    Activity,
    Overflow,
    PaneClosed,
    PaneFocused,
    PaneOpened,
    PtyExit,
    Snapshot,
    Transition,
    revalidate,
)
from tests.support.tmux import T0, activity

# -- control-mode parser ---------------------------------------------------------------------


def test_parser_frames_replies_and_notifications_in_any_chunking() -> None:
    data = (
        b"%begin 1 10 0\n%end 1 10 0\n%session-changed $0 main\n"
        b"%begin 2 11 1\n%0|123\n%end 2 11 1\n"
        b"%begin 2 12 1\nparse error: unknown command: x\n%error 2 12 1\n"
        b"%layout-change @0 abc\n%exit server exited\n"
    )
    for size in (1, 3, 7, len(data)):
        parser = ControlParser()
        events = []
        for i in range(0, len(data), size):
            events += parser.feed(data[i : i + size])
        assert events[:5] == [
            Reply(10, True, (), from_client=False),
            TmuxNotification("session-changed", "$0 main"),
            Reply(11, True, ("%0|123",), from_client=True),
            Reply(12, False, ("parse error: unknown command: x",), from_client=True),
            TmuxNotification("layout-change", "@0 abc"),
        ]
        assert len(events) == 6 and type(events[5]).__name__ == "Exit"


def test_parser_block_output_that_looks_like_protocol_stays_output() -> None:
    parser = ControlParser()
    events = parser.feed(
        b"%begin 5 20 1\n%end 5 19 1\n%window-add @3\n%exit\n\xff\xfe\r\n%end 5 20 1\n"
    )
    assert events == [
        Reply(20, True, ("%end 5 19 1", "%window-add @3", "%exit", "\ufffd\ufffd"), True)
    ]


def test_parser_keeps_partial_line_until_newline() -> None:
    parser = ControlParser()
    assert parser.feed(b"%window-pane-ch") == []
    assert parser.feed(b"anged @1 %2\n") == [TmuxNotification("window-pane-changed", "@1 %2")]


# -- quoting and targets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("plain", '"plain"'),
        ('a"b', '"a\\"b"'),
        ("$HOME", '"\\$HOME"'),
        ("back\\slash", '"back\\\\slash"'),
        ("line\nbreak\ttab", '"line break tab"'),
        ("; #{x} '~", "\"; #{x} '~\""),
        ("▲ needs you", '"▲ needs you"'),
    ],
)
def test_quote(value: str, quoted: str) -> None:
    assert quote(value) == quoted


def test_quote_exact_keeps_controls_as_octal_escapes() -> None:
    assert quote_exact('a\nb\r\t\x7f"$\\ #{x};') == '"a\\012b\\015\\011\\177\\"\\$\\\\ #{x};"'


def test_argv_words_and_format_literals() -> None:
    assert [argv_word(w) for w in ("ls;", ";", "x\\;", "a;b", "")] == [
        "ls\\;", "\\;", "x\\\\;", "a;b", ""
    ]
    assert commands_argv([["a", "x;"], ["b"]]) == ["a", "x\\;", ";", "b"]
    assert commands_argv([]) == []
    assert format_literal("#S #(x)") == "##S ##(x)"
    assert format_literal("#S", 2) == "####S"
    assert format_literal("plain", 2) == "plain"


def test_target_argv() -> None:
    assert TmuxTarget("x").argv({}) == ["tmux", "-L", "x"]
    assert TmuxTarget(None, "/s").argv({}) == ["tmux", "-S", "/s"]
    assert TmuxTarget().argv({"TMUX": "/tmp/tmux-0/default,42,0"}) == [
        "tmux", "-S", "/tmp/tmux-0/default",
    ]
    assert TmuxTarget().argv({}) == ["tmux"]
    with pytest.raises(TmuxError, match="not both"):
        TmuxTarget("x", "/s").argv({})


# -- Activity -> badge -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"turn": "working"}, "working"),
        ({"turn": "idle"}, "idle"),
        ({"turn": "unknown"}, "unknown"),
        ({"turn": "needs_input"}, "needs you"),
        ({"turn": "needs_input", "attention": "needs_input"}, "needs you"),
        ({"turn": "idle", "attention": "turn_done"}, "done"),
        ({"turn": "unknown", "presence": "persisted", "attention": "failed"}, "failed"),
        ({"turn": "unknown", "presence": "persisted"}, "exited"),
        # an agent gone after a finished turn nobody saw: gone, with the done still to see
        ({"turn": "unknown", "presence": "persisted", "attention": "turn_done"}, "exited · done"),
        ({"turn": "working", "presence": "shutting_down"}, "working"),
    ],
)
def test_badge_word(kwargs: dict[str, str], word: str) -> None:
    assert badge_word(activity("s", "%1", **kwargs)) == word


def test_pane_options_are_the_full_set() -> None:
    done = activity("s", "%1", turn="idle", attention="turn_done", harness="codex")
    options = pane_options(done, T0 + 2 * 60_000 + 5)
    assert options.as_dict() == {
        "@paneward_presence": "running",
        "@paneward_turn": "idle",
        "@paneward_attention": "turn_done",
        "@paneward_harness": "codex",
        "@paneward_badge": BADGES["done"],
        "@paneward_reason": "test",
        "@paneward_age": "2m",
    }
    assert list(options.as_dict()) == list(OPTION_NAMES)
    # no attention open: the options are set, empty
    idle = pane_options(activity("s", "%1"))
    assert (idle.attention, idle.reason, idle.age) == ("", "", "")


def _t(seq: int, **kwargs: object) -> Transition:
    after = activity(**kwargs)  # type: ignore[arg-type]
    return Transition(seq=seq, key=after.key, after=after, cause="test")


def test_book_snapshot_then_transitions() -> None:
    book = BadgeBook()
    changes = book.apply(
        Snapshot(seq=5, activities=(activity("a", "%1"), activity("b", None, turn="working")))
    )
    assert changes == [PaneChange("%1", pane_options(activity("a", "%1")))]
    # b binds to %2, a starts working: both panes change, in pane order.
    assert [c.pane for c in book.apply(_t(6, sid="b", pane="%2", turn="working"))] == ["%2"]
    assert book.apply(_t(7, sid="a", pane="%1", turn="working"))[0].options == pane_options(
        activity("a", "%1", turn="working")
    )
    assert book.summary() == "2 working"
    # a repeat that changes nothing visible on the pane is no change
    assert book.apply(_t(8, sid="a", pane="%1", turn="working")) == []
    # a moves from %1 to %3: %1 is cleared, %3 gets it
    assert book.apply(_t(9, sid="a", pane="%3", turn="working")) == [
        PaneChange("%1", None),
        PaneChange("%3", pane_options(activity("a", "%3", turn="working"))),
    ]
    assert set(book.shown) == {"%2", "%3"}


def test_book_ignores_stale_and_foreign_items() -> None:
    book = BadgeBook()
    book.apply(Snapshot(seq=10, activities=(activity("a", "%1", turn="working"),)))
    assert book.apply(_t(10, sid="a", pane="%1", turn="idle")) == []
    assert book.apply(_t(3, sid="a", pane="%1", turn="idle")) == []
    assert book.apply(Overflow(next_seq=1, dropped=1, reason="x")) == []
    stats = book.statistics()
    assert (stats.stale, stats.ignored, stats.transitions, stats.snapshots) == (2, 1, 0, 1)
    assert book.shown["%1"].turn == "working"


def test_book_snapshot_replaces_everything() -> None:
    book = BadgeBook()
    book.apply(Snapshot(seq=1, activities=(activity("a", "%1"), activity("b", "%2"))))
    changes = book.apply(Snapshot(seq=9, activities=(activity("b", "%2"),)))
    assert changes == [PaneChange("%1", None)]
    assert book.statistics().sessions == 1


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        # the one rule (actors.core.session.reducer.pane_rank): a proven turn first, ...
        ({"attention": "failed", "presence": "persisted"}, {"attention": "needs_input"}, "b"),
        # (an ended session's failure never hides the live agent now in the pane; it stays
        # in `paneward status`)
        ({"attention": "failed", "presence": "persisted"}, {"attention": "turn_done"}, "b"),
        ({"turn": "idle"}, {"presence": "persisted", "turn": "unknown"}, "a"),
        ({"turn": "unknown"}, {"turn": "idle"}, "b"),
        # ... then attention: needs_input > failed > turn_done > none, whatever the order
        ({"attention": "needs_input"}, {"attention": "failed"}, "a"),
        ({"attention": "turn_done"}, {"turn": "working"}, "a"),
        # ... then the newest evidence (here equal: then the key)
        ({"turn": "working"}, {"turn": "idle"}, "b"),
    ],
)
def test_book_several_sessions_one_pane(
    first: dict[str, str], second: dict[str, str], winner: str
) -> None:
    book = BadgeBook()
    a = activity("a", "%4", **first)
    b = activity("b", "%4", **second)
    book.apply(Snapshot(seq=1, activities=()))
    book.apply(Transition(seq=2, key=a.key, after=a, cause="t"))
    book.apply(Transition(seq=3, key=b.key, after=b, cause="t"))
    assert book.shown["%4"] == pane_options(a if winner == "a" else b)
    # Unbinding the winner hands the pane to the other; unbinding both clears it.
    loser = b if winner == "a" else a
    win = a if winner == "a" else b
    book.apply(Transition(seq=4, key=win.key, after=activity(win.key.session_id, None), cause="t"))
    assert book.shown["%4"] == pane_options(loser)
    assert book.apply(
        Transition(seq=5, key=loser.key, after=activity(loser.key.session_id, None), cause="t")
    ) == [PaneChange("%4", None)]


def test_summary_text() -> None:
    assert summary_text([]) == ""
    assert summary_text(["idle", "exited", "unknown"]) == ""
    words = ["working", "needs you", "done", "working", "needs you", "failed", "idle"]
    assert summary_text(words) == "2 need you · 1 failed · 1 done · 2 working"
    assert summary_text(["done", "exited · done", "exited"]) == "2 done"


_WORD_OF_BADGE = {text: word for word, text in BADGES.items()}

_steps = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from([None, "%1", "%2", "%3"]),
        st.sampled_from(["unknown", "idle", "working", "needs_input"]),
        st.sampled_from([None, "needs_input", "failed", "turn_done"]),
        st.sampled_from(["running", "persisted"]),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_steps, st.integers(min_value=0, max_value=39))
def test_book_summary_and_options_match_a_recomputation(
    steps: list[tuple[str, str | None, str, str | None, str]], snapshot_at: int
) -> None:
    """The book keeps the summary counts and the shown options incrementally (and takes a fast
    path for a session staying on its pane); after every item both must equal what a fresh
    computation from the newest activity per session gives."""
    book = BadgeBook()
    newest: dict[str, tuple[int, Activity]] = {}
    book.apply(Snapshot(seq=1, activities=()))
    for seq, (sid, pane, turn, attention, presence) in enumerate(steps, start=2):
        after = activity(sid, pane, turn=turn, attention=attention, presence=presence)
        if seq == snapshot_at:
            # A re-subscription: everything so far, as of the previous item.
            book.apply(Snapshot(seq=seq - 1, activities=tuple(a for _, a in newest.values())))
        book.apply(Transition(seq=seq, key=after.key, after=after, cause="t"))
        newest[sid] = (seq, after)
        fresh = BadgeBook()
        fresh.apply(Snapshot(seq=1, activities=()))
        for s, a in sorted(newest.values(), key=lambda pair: pair[0]):
            fresh.apply(Transition(seq=s, key=a.key, after=a, cause="t"))
        assert dict(book.shown) == dict(fresh.shown)
        words = [_WORD_OF_BADGE[options.badge] for options in book.shown.values()]
        assert book.summary() == summary_text(words) == fresh.summary()


def test_option_commands_hand_out_copies_of_cached_lines() -> None:
    idle = pane_options(activity("a", "%1"))
    working = pane_options(activity("a", "%1", turn="working"))
    first = option_commands("%1", working, idle)
    first.append("garbage")
    assert option_commands("%1", working, idle) == [
        'set-option -p -t "%1" @paneward_turn "working"',
        'set-option -p -t "%1" @paneward_badge "● working"',
    ]


def test_option_commands_write_only_differences() -> None:
    idle = pane_options(activity("a", "%1"))
    working = pane_options(activity("a", "%1", turn="working"))
    assert option_commands("%1", working, idle) == [
        'set-option -p -t "%1" @paneward_turn "working"',
        'set-option -p -t "%1" @paneward_badge "● working"',
    ]
    assert option_commands("%1", idle, idle) == []
    assert option_commands("%1", None, None) == []
    assert option_commands("%1", None, idle) == [
        f'set-option -p -u -t "%1" {name}' for name in OPTION_NAMES
    ]
    assert len(option_commands("%1", idle, None)) == len(OPTION_NAMES)
    assert summary_command("") == "set-option -g -u @paneward_summary"
    assert summary_command("1 done") == 'set-option -g @paneward_summary "1 done"'


def test_window_badge_is_the_most_urgent() -> None:
    order = ["▲ needs you", "✖ failed", "✔ done", "■ exited · done", "● working", "? unknown",
             "○ idle", "■ exited"]
    assert sorted(BADGES.values(), key=order.index) == order  # every badge is ranked
    for i, badge in enumerate(order):
        assert window_badge(order[i:][::-1]) == badge
    assert window_badge([]) == ""


def test_window_marks_follow_panes_between_windows() -> None:
    marks = WindowMarks()
    shown = {
        "%1": PaneOptions("running", "working", "", "codex", BADGES["working"]),
        "%2": PaneOptions("running", "needs_input", "needs_input", "codex", BADGES["needs you"]),
    }
    assert marks.place({"%1": "@1", "%2": "@1", "%3": "@2"}) == {"@1", "@2"}
    assert marks.place({"%1": "@1", "%2": "@1", "%3": "@2"}) == set()
    assert marks.windows_of(["%2", "%9"]) == {"@1"}
    assert (marks.marker("@1", shown), marks.marker("@2", shown)) == ("▲ needs you", "")
    assert marks.place({"%1": "@1", "%2": "@2", "%3": "@2"}) == {"@1", "@2"}  # %2 moved
    assert (marks.marker("@1", shown), marks.marker("@2", shown)) == ("● working", "▲ needs you")
    assert marks.place({"%1": "@1"}) == {"@2"}
    assert marks.marker("@2", shown) == ""
    assert window_command("@2", "") == "set-option -w -u -t \"@2\" @paneward_window"
    assert window_command("@1", "✔ done") == 'set-option -w -t "@1" @paneward_window "✔ done"'


# -- panes -----------------------------------------------------------------------------------


def _row(pane: str, pid: int = 100, **kw: object) -> PaneRow:
    base = PaneRow(pane, pid, False, None, None, False, "/w")
    return base._replace(**kw)  # type: ignore[arg-type]


def test_parse_pane_rows() -> None:
    rows, errors = parse_pane_rows(
        [
            "%0|101|0|||1|@0|/home/u/a|b",
            "%1|102|1|3||0|@1|",
            "%2|103|1||9|0|@1|/x",
            "%0|101|0|||0|@0|/home/u/a|b",  # linked window: same pane again, merged
            "garbage",
            "%x|1|0|||0|@0|/",
            "%4|0|0|||0|@0|/",
        ]
    )
    assert rows == [
        PaneRow("%0", 101, False, None, None, True, "/home/u/a|b", "@0"),
        PaneRow("%1", 102, True, 3, None, False, None, "@1"),
        PaneRow("%2", 103, True, None, 9, False, "/x", "@1"),
    ]
    assert len(errors) == 3 and "8 fields" in errors[0]
    # the path as tmux escapes it (q:, then line feeds and carriage returns)
    rows, errors = parse_pane_rows(["%5|105|0|||0|x|/t/x\\n\\%0\\|1\\ a\\\\n\\r"])
    assert errors == [] and rows[0].cwd == "/t/x\n%0|1 a\\n\r" and rows[0].window is None
    assert unescape_path("/plain") == "/plain"


def test_pane_table_diffs() -> None:
    table = PaneTable()
    first = table.update("s1", [_row("%0", focused=True), _row("%1", 200)], 1_800_000_000_000)
    assert first == [
        PaneOpened(pane="%0", root_pid=100, at_ms=1_800_000_000_000, cwd="/w", focused=True),
        PaneOpened(pane="%1", root_pid=200, at_ms=1_800_000_000_000, cwd="/w", focused=False),
    ]
    for message in first:
        assert revalidate(message) == message
    t = 1_800_000_000_100
    # focus moves to %1; %0's loss of focus is not a message
    assert table.update("s1", [_row("%0"), _row("%1", 200, focused=True)], t) == [
        PaneFocused(pane="%1", at_ms=t)
    ]
    # %1 dies before tmux knows the status: nothing yet; then the status: one PtyExit
    assert table.update("s1", [_row("%0"), _row("%1", 200, focused=True, dead=True)], t) == []
    dead = _row("%1", 200, focused=True, dead=True, dead_status=3)
    assert table.update("s1", [_row("%0"), dead], t) == [
        PtyExit(at_ms=t, observed_at_ms=t, pane="%1", code=3)
    ]
    assert table.update("s1", [_row("%0"), dead], t) == []
    # respawn-pane: same id, new root pid
    assert table.update("s1", [_row("%0"), _row("%1", 300)], t) == [
        PaneOpened(pane="%1", root_pid=300, at_ms=t, cwd="/w")
    ]
    # %1 closed, %2 opened already dead by a signal
    assert table.update(
        "s1", [_row("%0"), _row("%2", 400, dead=True, dead_signal=9)], t
    ) == [
        PaneClosed(pane="%1", at_ms=t),
        PaneOpened(pane="%2", root_pid=400, at_ms=t, cwd="/w"),
        PtyExit(at_ms=t, observed_at_ms=t, pane="%2", signal=9),
    ]
    # a new server: every old pane is closed, even if its id is reused
    assert table.update("s2", [_row("%0", 999)], t) == [
        PaneClosed(pane="%0", at_ms=t),
        PaneClosed(pane="%2", at_ms=t),
        PaneOpened(pane="%0", root_pid=999, at_ms=t, cwd="/w"),
    ]
    stats = table.statistics()
    assert (stats.server_changes, stats.exited, stats.focused, stats.panes) == (1, 2, 1, 1)


def test_pane_table_names_each_unreaped_dead_pane_once() -> None:
    table = PaneTable()
    t = 1_800_000_000_000
    table.update("s1", [_row("%0"), _row("%1", 200)], t)
    assert table.take_unreaped() == []
    # %1 dead, tmux has no status for it (SIGCHLD not yet handled, or lost): ask once
    table.update("s1", [_row("%0"), _row("%1", 200, dead=True)], t)
    assert table.take_unreaped() == ["%1"]
    table.update("s1", [_row("%0"), _row("%1", 200, dead=True)], t)
    assert table.take_unreaped() == []
    # a dead pane whose status is known needs nothing
    table.update("s1", [_row("%0"), _row("%1", 200, dead=True, dead_signal=9)], t)
    assert table.take_unreaped() == []
    # respawned (new pid) and dead again without status: a new incarnation, asked again
    table.update("s1", [_row("%0"), _row("%1", 300, dead=True), _row("%2", 400, dead=True)], t)
    assert table.take_unreaped() == ["%1", "%2"]
    assert table.statistics().unreaped == 3


def test_the_snippet_binds_next_and_pick_to_this_paneward() -> None:
    from actors.sinks.tmux import tmux_config_snippet

    lines = tmux_config_snippet("/opt/pw/bin/paneward").splitlines()
    assert 'bind-key a run-shell -b "/opt/pw/bin/paneward next -q --client \'#{client_name}\'' \
        ' || true"' in lines
    assert 'bind-key A run-shell -b "/opt/pw/bin/paneward pick -q --client \'#{client_name}\'' \
        ' || true"' in lines
    assert any("#{@paneward_age}" in line for line in lines)


def test_the_pane_the_users_client_shows_is_focused_last_and_once() -> None:
    # paneward's own control client and malformed rows never count; the client touched last
    # wins.
    lines = ["1|1800000009|%9", "0|1800000001|%1", "0|1800000005|%2", "0|x|%3", "0|7|pane"]
    assert viewed_pane(lines) == "%2"
    assert viewed_pane(["1|1800000009|%9"]) is None
    table = PaneTable()
    t = 1_800_000_000_000
    # At start-up every session has an active pane (%0 and %1 here); the user looks at %0.
    rows = [_row("%0", focused=True), _row("%1", 200, focused=True), _row("%3", 300)]
    first = table.update("s1", rows, t, viewed="%0")
    assert [type(m) for m in first] == [PaneOpened] * 3 + [PaneFocused]
    assert first[-1] == PaneFocused(pane="%0", at_ms=t)
    assert table.update("s1", rows, t, viewed="%0") == []  # the same view: nothing
    # The user's client moves to %1 (another session, whose active pane did not change).
    assert table.update("s1", rows, t, viewed="%1") == [PaneFocused(pane="%1", at_ms=t)]
    # %3 becomes active in %1's session as the user's client shows it: focused once.
    rows = [_row("%0", focused=True), _row("%1", 200), _row("%3", 300, focused=True)]
    assert table.update("s1", rows, t, viewed="%3") == [PaneFocused(pane="%3", at_ms=t)]
    # A client gone (viewed None), then back on the same pane: focused again.
    assert table.update("s1", rows, t, viewed=None) == []
    assert table.update("s1", rows, t, viewed="%3") == [PaneFocused(pane="%3", at_ms=t)]
    # A viewed pane the listing does not have is no focus.
    assert table.update("s1", rows, t, viewed="%7") == []


def test_the_daemon_hold_and_the_down_hook_texts() -> None:
    from actors.core.tmux.hold import (
        DOWN_HOOK,
        Holder,
        down_hook_commands,
        hold_commands,
        operand_literal,
        parse_holder,
        refusal,
    )

    assert parse_holder("123 4567") == Holder(123, "4567")
    for bad in ("", "x 1", "0 1", "123", "123 4 5", f"{2**31} 1"):
        assert parse_holder(bad) is None, bad
    assert operand_literal("a,b}#{c") == "a#,b#}##{c"
    # One compare-and-swap command: the value only changes when it reads what was expected.
    cas, *reads = hold_commands(Holder(7, "8"), "1 2")
    assert cas == (
        'set-option -s -F @paneward_daemon '
        '"#{?#{==:#{@paneward_daemon},1 2},7 8,#{@paneward_daemon}}"'
    )
    assert reads == ["show-options -sqv @paneward_daemon",
                     "show-options -sqv @paneward_daemon_state"]
    assert refusal("tmux -L w", Holder(7, "8"), "/s") == (
        "tmux -L w is driven by another paneward daemon (pid 7, state dir /s); leaving it alone"
    )
    state, hook = down_hook_commands("client-9", '/a "$b"', badges=True)
    assert state == 'set-option -s @paneward_daemon_state "/a \\"\\$b\\""'
    assert hook.startswith(f'set-hook -g "{DOWN_HOOK}" "if-shell -F ')
    assert "#{==:#{hook_client},client-9}" in hook and "paneward: down" in hook
    # Without badges the hook only releases the hold and removes itself.
    _, bare = down_hook_commands("client-9", "/s", badges=False, panes=["%1"], windows=["@2"])
    assert "paneward: down" not in bare and "%1" not in bare and "@2" not in bare
    assert "set-option -su @paneward_daemon" in bare
    # It names each pane and window it marks, each behind a guard that the pane (window) still
    # exists and holds the option; nothing in it waits (no run-shell: docs/tmux.md).
    _, named = down_hook_commands("client-9", "/s", badges=True, panes=["%1", "%3"],
                                  windows=["@2"])
    assert "run-shell" not in hook + named
    for guard in ("#{==:#{pane_id},%1}", "#{==:#{pane_id},%3}", "#{==:#{window_id},@2}"):
        assert guard in named, guard
    assert named.count("set-option -p -F -t") == 2 and named.count("set-option -w -F -t") == 1
