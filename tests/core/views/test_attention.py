"""Acting on attention, the pure parts: the queue, elapsed times, ``wait`` predicates,
redaction, the notification decisions, the jump/menu commands and the badge ages."""

from __future__ import annotations

import pytest

from actors.core.tmux.badges import BadgeBook
from actors.core.views.attention import (
    WaitTarget,
    attention_label,
    attention_queue,
    elapsed,
    next_change_ms,
    parse_kinds,
    parse_predicate,
)
from actors.core.views.jump import (
    JumpClient,
    choose_client,
    jump_commands,
    menu_command,
    menu_label,
    parse_jump_clients,
    parse_locations,
)
from actors.core.views.notify import (
    Client,
    NotifyBook,
    NotifySettings,
    display_commands,
    message_text,
    osc_notification,
    parse_channels,
    parse_clients,
    watched,
)
from actors.core.views.redact import redact, shown_reason
from messages import Activity, Attention, Evidence, SessionKey, Snapshot, Transition

NOW = 1_800_000_000_000
MIN = 60_000


def act(
    sid: str,
    pane: str | None = None,
    *,
    kind: str | None = None,
    since: int = NOW,
    reason: str = "why",
    turn: str = "idle",
    presence: str = "running",
    at: int = NOW,
) -> Activity:
    return Activity(
        key=SessionKey("claude-code", sid),
        presence=presence,  # type: ignore[arg-type]
        turn=("needs_input" if kind == "needs_input" else turn),  # type: ignore[arg-type]
        evidence=Evidence(source="claude_hook", at_ms=at),
        attention=(
            Attention(kind, reason, since)  # type: ignore[arg-type]
            if kind is not None
            else None
        ),
        pane=pane,
    )


def tr(seq: int, after: Activity) -> Transition:
    return Transition(seq=seq, key=after.key, after=after, cause="test")


# ------------------------------------------------------------------------------ the queue


def test_queue_is_needs_input_then_failed_then_done_oldest_first() -> None:
    items = [
        act("done-old", "%1", kind="turn_done", since=NOW - 50 * MIN),
        act("needs-new", "%2", kind="needs_input", since=NOW - 1 * MIN),
        act("working", "%3", turn="working"),
        act("failed", "%4", kind="failed", since=NOW - 9 * MIN, presence="persisted"),
        act("needs-old", "%5", kind="needs_input", since=NOW - 5 * MIN),
        act("nowhere", None, kind="turn_done", since=NOW - 60 * MIN),
    ]
    queue = attention_queue(items)
    assert [a.key.session_id for a in queue] == [
        "needs-old", "needs-new", "failed", "nowhere", "done-old",
    ]
    kinds = attention_queue(items, ("needs_input",))
    assert [a.key.session_id for a in kinds] == ["needs-old", "needs-new"]


def test_a_pane_is_in_the_queue_once_through_the_session_it_shows() -> None:
    # An ended session's done under a live agent that needs you: the pane shows the live one.
    old = act("old", "%7", kind="turn_done", since=NOW - 90 * MIN, presence="persisted",
              at=NOW - 90 * MIN)
    live = act("live", "%7", kind="needs_input", since=NOW - MIN)
    assert [a.key.session_id for a in attention_queue([old, live])] == ["live"]
    # The live one shows working: nothing of this pane is queued (the badge says working).
    busy = act("live", "%7", turn="working")
    assert attention_queue([old, busy]) == []


def test_elapsed_changes_at_most_once_a_minute() -> None:
    assert [elapsed(NOW - d, NOW) for d in (0, 59_999, MIN, 59 * MIN, 60 * MIN, 25 * 60 * MIN)] \
        == ["<1m", "<1m", "1m", "59m", "1h", "1d"]
    assert elapsed(NOW + 5_000, NOW) == "<1m"  # a clock step backwards is not negative
    assert next_change_ms(NOW, NOW + 30_000) == NOW + MIN
    assert next_change_ms(NOW, NOW + MIN) == NOW + 2 * MIN
    assert next_change_ms(NOW, NOW + 61 * MIN) == NOW + 120 * MIN  # hours: once an hour
    assert attention_label(act("a", kind="needs_input", since=NOW - 2 * MIN), NOW) == "needs you 2m"
    assert attention_label(act("a"), NOW) == ""


def test_kinds_parse_and_refuse() -> None:
    assert parse_kinds("failed,needs_input") == ("needs_input", "failed")
    assert parse_kinds("all") == ("needs_input", "failed", "turn_done")
    assert parse_kinds("none") == ()
    with pytest.raises(ValueError, match="unknown attention kind 'done'"):
        parse_kinds("needs_input,done")


# ------------------------------------------------------------------------------ wait


@pytest.mark.parametrize(
    ("text", "matches", "misses"),
    [
        ("attention", act("a", kind="turn_done"), act("a")),
        ("needs_input", act("a", kind="needs_input"), act("a", kind="failed")),
        ("attention=failed", act("a", kind="failed"), act("a", kind="turn_done")),
        ("attention=none", act("a"), act("a", kind="turn_done")),
        ("turn=idle", act("a"), act("a", turn="working")),
        ("presence=persisted", act("a", presence="persisted"), act("a")),
    ],
)
def test_predicates(text: str, matches: Activity, misses: Activity) -> None:
    predicate = parse_predicate(text)
    assert predicate(matches) and not predicate(misses)


@pytest.mark.parametrize("text", ["turn=busy", "idle", "presence", "attention=yes", ""])
def test_bad_predicates_say_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match="expected attention"):
        parse_predicate(text)


def test_wait_target_by_session_snapshot_then_update() -> None:
    target = WaitTarget([parse_predicate("needs_input")], session="claude-code:b")
    assert target.snapshot([act("a", kind="needs_input"), act("b", turn="working")]) is None
    assert target.update(act("a", kind="needs_input", since=NOW + 1)) is None  # another one
    hit = target.update(act("b", kind="needs_input"))
    assert hit is not None and hit.key.session_id == "b"
    # already true in the snapshot: found at once
    again = WaitTarget([parse_predicate("needs_input")], session="b")
    assert again.snapshot([act("b", kind="needs_input")]) is not None


def test_wait_target_by_pane_follows_the_pane_winner() -> None:
    predicates = [parse_predicate("turn=idle"), parse_predicate("presence=running")]
    target = WaitTarget(predicates, pane="%4")
    assert target.snapshot([act("a", "%4", turn="working")]) is None
    assert target.update(act("z", "%9")) is None  # idle, but in another pane
    hit = target.update(act("a", "%4", at=NOW + 1))
    assert hit is not None and hit.key.session_id == "a"
    with pytest.raises(ValueError, match="not both"):
        WaitTarget([], session="a", pane="%1")


# ------------------------------------------------------------------------------ redaction


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("approve Bash: echo hi > hi.txt", "approve Bash: echo …"),
        ("approve Bash: curl -s https://api.example/v1?token=sekrit", "approve Bash: curl …"),
        ("Bash(rm -rf /home/me/project)", "Bash(rm …)"),
        ("approve Bash: TOKEN=abc make deploy", "approve Bash: …"),
        ("approve Bash: /usr/local/bin/deploy --prod", "approve Bash: deploy …"),
        ("permission: Bash", "permission: Bash"),
        # the one permission reason of hooks and OSC 7501
        # (actors.core.session.hints.permission_reason)
        ("permission: Bash: rm -rf /srv/data", "permission: Bash: rm …"),
        ("permission: Bash: TOKEN=x make", "permission: Bash: …"),
        ("turn done (Stop)", "turn done (Stop)"),
        ("exited with code 2", "exited with code 2"),
        ("fetch https://u:pw@example.com/a/b?c=d failed", "fetch https://example.com/… failed"),
        ("cannot read /home/me/.ssh/id_ed25519", "cannot read …/id_ed25519"),
        ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "key …"),
        ("dialog\nopen", "dialog open"),
    ],
)
def test_redaction_shows_the_tool_and_a_shortened_command(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert shown_reason(text, full_text=True) == text


def test_redaction_is_bounded() -> None:
    shown = redact("the agent says " + "word " * 40)
    assert len(shown) == 60 and shown.endswith("…")


# ------------------------------------------------------------------------------ notifications


def test_notify_book_alerts_on_edges_seen_live_only() -> None:
    book = NotifyBook(NotifySettings(min_interval_ms=0))
    # the snapshot (daemon start) records, alerts nothing
    assert book.opened(Snapshot(seq=1, activities=(act("a", "%1", kind="needs_input"),))) == []
    # the same item again: no edge
    assert book.opened(tr(2, act("a", "%1", kind="needs_input"))) == []
    [alert] = book.opened(tr(3, act("b", "%2", kind="needs_input",
                                    reason="approve Bash: curl -s https://x/y")))
    assert (alert.pane, alert.kind, alert.reason) == ("%2", "needs_input", "approve Bash: curl …")
    assert alert.title == "claude-code needs you"
    assert alert.body("main:1.0") == "approve Bash: curl … · main:1.0 (%2)"
    # closed, then a new item (new since): an edge again
    assert book.opened(tr(4, act("b", "%2", turn="working"))) == []
    assert not book.still_open(alert)
    assert len(book.opened(tr(5, act("b", "%2", kind="needs_input", since=NOW + 9)))) == 1


def test_notify_book_kinds_and_rate_limit() -> None:
    book = NotifyBook(NotifySettings(kinds=("needs_input",), min_interval_ms=30_000))
    book.opened(Snapshot(seq=1, activities=()))
    assert book.opened(tr(2, act("a", "%1", kind="turn_done"))) == []
    assert book.statistics().ignored_kind == 1
    [first] = book.opened(tr(3, act("a", "%1", kind="needs_input", since=NOW + 1)))
    assert book.admit(first, NOW)
    [second] = book.opened(tr(4, act("a", "%1", kind="needs_input", since=NOW + 2)))
    assert book.rate_limited(second, NOW + 29_999)  # the check alone, before asking tmux
    assert not book.admit(second, NOW + 29_999)  # same session within the window
    [other] = book.opened(tr(5, act("b", "%2", kind="needs_input")))
    assert book.admit(other, NOW + 29_999)  # per session
    assert not book.rate_limited(second, NOW + 30_000)
    assert book.admit(second, NOW + 30_000)
    stats = book.statistics()
    assert (stats.alerts, stats.rate_limited, stats.opened) == (3, 2, 3)


def test_full_text_setting_keeps_the_reason() -> None:
    book = NotifyBook(NotifySettings(full_text=True))
    book.opened(Snapshot(seq=1, activities=()))
    [alert] = book.opened(tr(2, act("a", kind="needs_input", reason="approve Bash: rm -rf x")))
    assert alert.reason == "approve Bash: rm -rf x"


def test_who_is_looking() -> None:
    clients = parse_clients(
        ["1|client-9|%1|/dev/pts/1", "0|/dev/pts/5|%3|/dev/pts/7", "garbage", "2|x|%1|y"]
    )
    assert clients == [
        Client(True, "client-9", "%1", "/dev/pts/1"),
        Client(False, "/dev/pts/5", "%3", "/dev/pts/7"),
    ]
    assert watched("%3", clients)
    assert not watched("%1", clients)  # only a control-mode client (paneward's own) shows it
    assert not watched(None, clients)


def test_message_texts() -> None:
    book = NotifyBook(NotifySettings())
    book.opened(Snapshot(seq=1, activities=()))
    [alert] = book.opened(tr(2, act("a", "%2", kind="failed", reason="exited with code 2#1")))
    text = message_text(alert, "main:1.0")
    assert text == "paneward: claude-code failed in main:1.0 (%2): exited with code 2#1"
    clients = [Client(True, "c0", "%1", "/dev/pts/1"), Client(False, "/dev/pts/5", "%3", "t")]
    assert display_commands(text, clients) == [
        'display-message -c "/dev/pts/5" '
        '"paneward: claude-code failed in main:1.0 (%2): exited with code 2##1"'
    ]
    assert osc_notification("osc9", "t\x07", "b") == b"\x1bPtmux;\x1b\x1b]9;t\\a: b\x07\x1b\\"
    assert osc_notification("osc777", "a;b", "c") == (
        b"\x1bPtmux;\x1b\x1b]777;notify;a b;c\x07\x1b\\"
    )
    with pytest.raises(ValueError):
        osc_notification("desktop", "t", "b")
    assert parse_channels("desktop,tmux") == ("tmux", "desktop")
    with pytest.raises(ValueError, match="unknown notification channel 'bell'"):
        parse_channels("bell")


# ------------------------------------------------------------------------------ jump and pick


def test_jump_commands_and_client_choice() -> None:
    clients = parse_jump_clients("1|client-1|900\n0|/dev/pts/3|100\n0|/dev/pts/4|200\nbad\n")
    assert clients[0] == JumpClient(True, "client-1", 900)
    assert choose_client(clients) == "/dev/pts/4"  # the one used last, never control mode
    assert choose_client([JumpClient(True, "c", 1)]) is None
    assert jump_commands("%3", "/dev/pts/4") == [["switch-client", "-c", "/dev/pts/4", "-t", "%3"]]
    assert jump_commands("%3", None, current=True) == [["switch-client", "-t", "%3"]]
    assert jump_commands("%3", None) == [["select-window", "-t", "%3"], ["select-pane", "-t", "%3"]]
    assert parse_locations("%1|main:0.0\n%2|w x:1.1\n") == {"%1": "main:0.0", "%2": "w x:1.1"}


def test_menu_lists_the_queue_in_order() -> None:
    queue = attention_queue([
        act("d", "%4", kind="turn_done", since=NOW - 3 * MIN),
        act("n", "%2", kind="needs_input", since=NOW - 2 * MIN,
            reason="approve Bash: curl https://x/?t=1"),
    ])
    argv = menu_command("/dev/pts/4", queue, {"%2": "main:1.0"}, ["pw", "next", "--client", "c"],
                        NOW)
    assert argv[:9] == ["display-menu", "-c", "/dev/pts/4", "-T",
                        "#[align=centre] paneward: attention ", "-x", "C", "-y", "C"]
    assert argv[9:] == [
        "needs you 2m  claude-code  main:1.0 (%2)  approve Bash: curl …",
        "1",
        'run-shell -b "pw next --client c --pane %2"',
        "done 3m  claude-code  %4  why",
        "2",
        'run-shell -b "pw next --client c --pane %4"',
    ]
    label = menu_label(act("x", "%1", kind="failed", reason="#{pane_id}"), None, NOW)
    assert label == "failed <1m  claude-code  %1  ##{pane_id}"


# ------------------------------------------------------------------------------ badge ages


def test_badge_ages_tick_at_the_next_minute_only() -> None:
    now = [NOW]
    book = BadgeBook(clock=lambda: now[0])
    book.apply(Snapshot(seq=1, activities=(act("w", "%1", turn="working"),)))
    assert book.next_tick_ms() is None  # no attention open: no timer at all
    book.apply(tr(2, act("a", "%2", kind="needs_input", since=NOW - 30_000)))
    assert book.shown["%2"].age == "<1m"
    assert book.next_tick_ms() == NOW + 30_000
    now[0] = NOW + 29_999
    assert book.tick() == []  # not due: nothing rewritten
    now[0] = NOW + 30_000
    [change] = book.tick()
    assert change.pane == "%2" and change.options is not None and change.options.age == "1m"
    assert book.next_tick_ms() == NOW + 90_000
    marks = book.aging_changes
    book.apply(tr(3, act("a", "%2", turn="working")))
    assert book.aging_changes == marks + 1 and book.next_tick_ms() is None
    assert book.shown["%2"].age == "" and book.shown["%2"].reason == ""


def test_the_age_deadline_costs_nothing_per_change() -> None:
    """The next age deadline is kept as panes start aging, never found by walking every pane on
    each change (200 sessions changing once a second walked 100 aging panes per change): a pane
    due later does not move it (no re-arm), an earlier one does; a pane that stops aging leaves
    it (the wake-up then finds nothing due, and the tick recomputes it exactly)."""
    now = [NOW]
    book = BadgeBook(clock=lambda: now[0])
    book.apply(Snapshot(seq=1, activities=()))
    book.apply(tr(2, act("a", "%1", kind="needs_input", since=NOW - 30_000)))
    assert book.next_tick_ms() == NOW + 30_000
    marks = book.aging_changes
    book.apply(tr(3, act("b", "%2", kind="turn_done", since=NOW)))  # due at NOW + 60 s
    assert (book.aging_changes, book.next_tick_ms()) == (marks, NOW + 30_000)
    book.apply(tr(4, act("c", "%3", kind="needs_input", since=NOW - 50_000)))  # NOW + 10 s
    assert (book.aging_changes, book.next_tick_ms()) == (marks + 1, NOW + 10_000)
    book.apply(tr(5, act("c", "%3", turn="working")))  # stops aging: the deadline stays
    assert (book.aging_changes, book.next_tick_ms()) == (marks + 1, NOW + 10_000)
    now[0] = NOW + 10_000
    assert book.tick() == []  # nothing was due after all
    assert book.next_tick_ms() == NOW + 30_000  # recomputed exactly


def test_badge_reason_is_redacted_unless_full_text() -> None:
    item = tr(2, act("a", "%2", kind="needs_input", reason="approve Bash: rm -rf /"))
    book = BadgeBook(clock=lambda: NOW)
    book.apply(item)
    assert book.shown["%2"].reason == "approve Bash: rm …"
    full = BadgeBook(clock=lambda: NOW, full_text=True)
    full.apply(item)
    assert full.shown["%2"].reason == "approve Bash: rm -rf /"
