"""The pure NATS decisions (actors/core/fleet/nats.py): token escaping, subjects and keys, the
publish buffer's bound and its Gap records, host health, the settings."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.core.fleet.nats import (
    Heartbeat,
    PublishBuffer,
    SettingsError,
    activity_key,
    as_seen,
    escape_token,
    gap_subject,
    heartbeat_key,
    host_health,
    host_of_subject,
    last_per_session,
    msg_id,
    resolve_settings,
    session_subject,
    unescape_token,
)
from messages import Activity, Evidence, SessionKey, Transition

_TOKEN = re.compile(r"[A-Za-z0-9_=-]+")


@given(st.text())
def test_every_text_is_one_safe_token_and_comes_back(text: str) -> None:
    token = escape_token(text)
    assert _TOKEN.fullmatch(token)  # no '.', '*', '>', whitespace: one token, never a wildcard
    assert unescape_token(token) == text


@given(st.text(), st.text())
def test_different_texts_never_share_a_token(a: str, b: str) -> None:
    assert (escape_token(a) == escape_token(b)) == (a == b)


@pytest.mark.parametrize(
    ("text", "token"),
    [("gpu1", "gpu1"), ("a.b", "a=2Eb"), ("*", "=2A"), (">", "=3E"), (" x", "=20x"),
     ("=", "=3D"), ("", "="), ("é", "=C3=A9"), ("0d5f-uuid_x", "0d5f-uuid_x")],
)
def test_the_escape_rule(text: str, token: str) -> None:
    assert escape_token(text) == token


@pytest.mark.parametrize("token", ["=41", "a.b", "=4", "=zz", "", "=2a", "a b", "=FF"])
def test_tokens_we_never_make_are_refused(token: str) -> None:
    with pytest.raises(ValueError, match="not an escaped token"):
        unescape_token(token)


def test_subjects_and_keys_have_a_fixed_number_of_tokens() -> None:
    subject = session_subject("paneward", "h.x", "claude-code", "s > *")
    assert subject == "paneward.h=2Ex.claude-code.s=20=3E=20=2A"
    assert host_of_subject("paneward", subject) == "h.x"
    assert gap_subject("paneward", "h.x") == "paneward.h=2Ex.gap"
    assert host_of_subject("paneward", "paneward.h=2Ex.gap") == "h.x"
    assert host_of_subject("paneward", "other.h.a.b") is None
    assert host_of_subject("paneward", "paneward.=41.a.b") is None
    assert activity_key("h", "codex", "t.1") == "s.h.codex.t=2E1"
    assert heartbeat_key("h.x") == "h.h=2Ex"
    assert msg_id("0123456789abcdef", 42) == "0123456789abcdef:42"


def _activity(session: str, turn: str = "idle") -> Activity:
    return Activity(
        key=SessionKey(harness="claude-code", session_id=session), presence="running",
        turn=turn,  # type: ignore[arg-type]
        evidence=Evidence(source="claude_hook", observed_at_ms=1),
    )


def _transition(seq: int, session: str = "s") -> Transition:
    a = _activity(session)
    return Transition(seq=seq, key=a.key, after=a, cause="HookHint:Stop")


def test_the_buffer_drops_past_its_bound_and_says_so_in_one_gap() -> None:
    buffer = PublishBuffer(3)
    assert [buffer.push(_transition(n), 100) for n in range(1, 7)] == [True] * 3 + [False] * 3
    assert buffer.stats.dropped == 3 and buffer.stats.gaps == 1 and len(buffer) == 3
    window = buffer.window(10)
    assert [t.seq for t in window if isinstance(t, Transition)] == [1, 2, 3]
    buffer.acked(2)
    assert buffer.stats.acked_seq == 2
    # Room again: the open run of drops is queued as one Gap at once, then what comes next.
    gap = buffer.window(10)[1]
    assert not isinstance(gap, Transition)
    assert (gap.next_seq, gap.dropped, gap.reason, gap.noticed_ms) == (4, 3, "nats_buffer_full",
                                                                      100)
    assert buffer.push(_transition(7), 200)
    buffer.acked(3)
    assert buffer.stats.acked_seq == 7  # 3, the Gap of 4..6, 7
    assert len(buffer) == 0 and buffer.stats.buffered == 0


def test_a_gap_from_elsewhere_is_kept_even_when_full() -> None:
    buffer = PublishBuffer(1)
    buffer.push(_transition(1), 0)
    from messages import Gap

    buffer.push_gap(Gap(next_seq=2, dropped=5, reason="overflow", noticed_ms=0))
    assert len(buffer) == 2 and buffer.stats.gaps == 1


def test_the_buffer_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PublishBuffer(0)


def test_the_kv_gets_the_last_of_each_session_of_a_window() -> None:
    items = [_transition(1, "a"), _transition(2, "b"), _transition(3, "a")]
    assert [t.seq for t in last_per_session(items)] == [2, 3]


def test_a_host_is_stale_after_the_fleets_two_intervals_and_its_sessions_unknown() -> None:
    beat = Heartbeat(host="h", identity="i", at_ms=10_000, interval_ms=1000)
    assert host_health(beat, 12_000) == "live"
    assert host_health(beat, 12_001) == "stale"
    working = _activity("x", "working")
    assert as_seen(working, "live") is working
    seen = as_seen(working, "stale")
    assert (seen.turn, seen.presence) == ("unknown", "running")


def _resolve(cli: dict[str, object] | None = None, env: dict[str, str] | None = None,
             table: dict[str, object] | None = None) -> object:
    return resolve_settings(cli=cli or {}, env=env or {}, table=table, default_host="me")


def test_settings_come_from_the_cli_then_the_environment_then_the_file() -> None:
    assert _resolve() is None
    s = _resolve(table={"url": "nats://file:4222", "max_age": 60, "stream": "S"})
    assert s is not None and s.url == "nats://file:4222" and s.max_age_s == 60.0  # type: ignore[attr-defined]
    s = _resolve(env={"NATS_URL": "nats://env:4222"}, table={"url": "nats://file:4222"})
    assert s.url == "nats://env:4222" and s.host == "me"  # type: ignore[attr-defined]
    s = _resolve(cli={"url": "nats://cli:4222", "buffer": 7}, env={"NATS_URL": "nats://e:1"},
                 table={"buffer": 9})
    assert (s.url, s.buffer) == ("nats://cli:4222", 7)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("cli", "table", "message"),
    [
        ({"url": "nats://u:secret@h:4222"}, None, "never in the URL"),
        ({"url": "nats://tok@h:4222"}, None, "never in the URL"),
        ({"url": "http://h:1"}, None, "not a NATS URL"),
        ({"url": "nats://h:1"}, {"bogus": 1}, "unknown key 'bogus'"),
        ({"url": "nats://h:1"}, {"max_age": "1d"}, "a number"),
        ({"url": "nats://h:1"}, {"buffer": 0}, "at least 1"),
        ({"url": "nats://h:1"}, {"stream": "a.b"}, "letters, digits"),
        ({"url": "nats://h:1", "tls_cert": "c.pem"}, None, "both tls_cert and tls_key"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(
    cli: dict[str, object], table: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as caught:
        _resolve(cli=cli, table=table)
    assert "secret@" not in str(caught.value) and "tok@" not in str(caught.value)


def test_what_the_journal_gives_back_goes_in_front_within_the_bound() -> None:
    buffer = PublishBuffer(4)
    buffer.push(_transition(9), 0)
    buffer.prepend([_transition(n) for n in range(3, 9)], 500)  # 6 items, room for 3
    items = buffer.window(10)
    gap = items[0]
    assert not isinstance(gap, Transition)
    assert (gap.next_seq, gap.dropped, gap.reason, gap.noticed_ms) == (3, 4, "nats_buffer_full",
                                                                      500)
    assert [i.seq for i in items[1:] if isinstance(i, Transition)] == [7, 8, 9]
    assert buffer.first_seq() == 3 and buffer.stats.dropped == 4


def test_the_status_line_shows_the_publishers_buffer_and_a_lost_connection() -> None:
    from actors.core.views.status_table import actor_line

    states = {"supervisor": {"actor_states": {"nats": "running", "control": "running"}}}
    up = {**states, "nats": {"connected": True, "buffered": 0, "dropped": 0}}
    assert actor_line(up) == "actors: control running · nats running"
    behind = {**states, "nats": {"connected": True, "buffered": 500, "dropped": 1504}}
    assert actor_line(behind) == (
        "actors: control running · nats running (500 waiting for the server, 1504 dropped)"
    )
    down = {**states, "nats": {"connected": False, "buffered": 3, "dropped": 0,
                               "last_error": "nats://h:1: refused\x1b[31m"}}
    assert actor_line(down) == (
        "actors: nats DISCONNECTED: nats://h:1: refused\\x1b[31m (3 waiting for the server)"
        " · control running"
    )
