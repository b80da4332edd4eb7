"""OSC parser (actors.core.ingress.osc) and host entry point (actors.sources.pty_status), no event
loop.

The recordings in tests/fixtures/pty/ are real Claude Code 2.1.332 / Codex 0.171.0 output;
their seqs.jsonl (written by the recorder, an independent parser) is the expected answer.
"""

from __future__ import annotations

import base64
import json
import os
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import messages
from actors.core.ingress.osc import (
    MAX_SEQUENCE,
    PROBE_ANSWER,
    OscEvent,
    OscNotification,
    OscParser,
    OscProbe,
    Progress,
    StatusRecord,
    Title,
    parse_status_fields,
)
from actors.harnesses import catalog
from actors.sources.pty_status import PtyStatusFeed
from tests import support
from tests.support.daemon import start_token
from tests.support.reference_model import SessionTable
from tests.support.sinks import ListSink

FIXTURES = support.FIXTURES / "pty"
RUNS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
_STATUS_RE = re.compile(rb"\x1b\]7501;state[^\x07\x1b]*(?:\x07|\x1b\\)")


def _unescape(seq: str) -> bytes:
    # seqs.jsonl stores sequences as Python-escaped text (\x1b, \u2733).
    return seq.encode("ascii").decode("unicode_escape").encode("utf-8")


def _expected(run: str) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for line in (FIXTURES / run / "seqs.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["type"] != "OSC":
            continue
        seq = _unescape(row["seq"])
        if seq.startswith(b"\x1b]7501;?"):
            out.append(("probe",))
        elif seq.startswith(b"\x1b]7501;"):
            f = row["fields"]
            out.append(("status", f["state"], f.get("app"), f.get("kind"), f.get("id"),
                        f.get("msg"), f.get("title"), row["term"]))
        elif seq.startswith((b"\x1b]0;", b"\x1b]2;")):
            body = seq[4:-1] if row["term"] == "BEL" else seq[4:-2]
            out.append(("title", body.decode()))
        elif seq.startswith(b"\x1b]9;4;"):
            out.append(("progress",))
        elif seq.startswith((b"\x1b]9;", b"\x1b]777;")):
            out.append(("notify",))
    return out


def _shape(event: OscEvent) -> tuple[object, ...]:
    if isinstance(event, StatusRecord):
        return ("status", event.state, event.app, event.kind, event.child_id, event.message,
                event.title, event.terminator)
    if isinstance(event, OscProbe):
        return ("probe",)
    if isinstance(event, Title):
        return ("title", event.text)
    if isinstance(event, Progress):
        return ("progress",)
    return ("notify",)


def _replay(raw: bytes, cuts: list[int], parser: OscParser) -> tuple[bytes, list[OscEvent]]:
    out: list[bytes] = []
    events: list[OscEvent] = []
    last = 0
    for cut in [*sorted(set(cuts)), len(raw)]:
        chunk_out, chunk_events = parser.feed(raw[last:cut])
        assert parser.carry_bytes <= MAX_SEQUENCE
        out.append(chunk_out)
        events.extend(chunk_events)
        last = cut
    out.append(parser.flush())
    return b"".join(out), events


@pytest.mark.parametrize("run", RUNS)
def test_recording_whole_yields_exactly_its_records(run: str) -> None:
    raw = (FIXTURES / run / "raw.bin").read_bytes()
    parser = OscParser(strip_status=True)
    out, events = _replay(raw, [], parser)
    assert [_shape(e) for e in events] == _expected(run)
    assert out == _STATUS_RE.sub(b"", raw)
    stats = parser.statistics()
    assert (stats.malformed, stats.unterminated, stats.carry_bytes) == (0, 0, 0)


def test_recordings_cover_what_the_issue_names() -> None:
    everything = [shape for run in RUNS for shape in _expected(run)]
    kinds = {s[0] for s in everything}
    assert kinds == {"probe", "status", "title", "progress", "notify"}
    assert {s[7] for s in everything if s[0] == "status"} == {"BEL", "ST"}
    assert any(s[0] == "status" and s[4] for s in everything)  # a child id
    assert any(s[0] == "status" and s[1] == "clear" for s in everything)
    blocked = [s for s in everything if s[0] == "status" and s[1] == "blocked" and s[5]]
    assert blocked[0][5] == "approve Bash: echo hi > hi.txt"


@pytest.mark.parametrize("run", ["claude-osc7501-agent", "codex-notify-osc777"])
def test_recording_one_byte_at_a_time(run: str) -> None:
    raw = (FIXTURES / run / "raw.bin").read_bytes()
    parser = OscParser(strip_status=True)
    out, events = _replay(raw, list(range(1, len(raw))), parser)
    assert [_shape(e) for e in events] == _expected(run)
    assert out == _STATUS_RE.sub(b"", raw)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), run=st.sampled_from(RUNS), strip=st.booleans(), probe=st.booleans())
def test_recording_in_random_chunks_yields_the_same(
    data: st.DataObject, run: str, strip: bool, probe: bool
) -> None:
    raw = (FIXTURES / run / "raw.bin").read_bytes()
    sizes = data.draw(st.lists(st.integers(1, 64 * 1024), min_size=1, max_size=400))
    cuts, pos = [], 0
    for size in sizes:
        pos += size
        if pos >= len(raw):
            break
        cuts.append(pos)
    parser = OscParser(strip_status=strip, strip_probe=probe)
    out, events = _replay(raw, cuts, parser)
    assert [_shape(e) for e in events] == _expected(run)
    expected_out = _STATUS_RE.sub(b"", raw) if strip else raw
    if probe:
        expected_out = expected_out.replace(b"\x1b]7501;?\x07", b"")
    assert out == expected_out


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=300),
            st.sampled_from([b"\x1b", b"\x1b]", b"\x1b]7501;", b"\x07", b"\x1b\\",
                             b"state=working", b"7501;?", b":msg=", b"\x1b]0;", b"\x1b]9;4;"]),
        ),
        max_size=60,
    ),
    strip=st.booleans(),
)
def test_arbitrary_bytes_never_raise_and_carry_stays_bounded(
    chunks: list[bytes], strip: bool
) -> None:
    parser = OscParser(strip_status=strip, strip_probe=strip)
    out = []
    for chunk in chunks:
        passed, _ = parser.feed(chunk)
        out.append(passed)
        assert parser.carry_bytes <= MAX_SEQUENCE
    out.append(parser.flush())
    if not strip:
        # Nothing is ever lost or invented when nothing is stripped.
        assert b"".join(out) == b"".join(chunks)


def test_overlong_unterminated_osc_is_plain_bytes_and_bounded() -> None:
    parser = OscParser(strip_status=True)
    junk = b"\x1b]7501;state=working" + b"A" * (3 * MAX_SEQUENCE)
    out = []
    for i in range(0, len(junk), 1000):
        passed, events = parser.feed(junk[i : i + 1000])
        assert events == []
        assert parser.carry_bytes <= MAX_SEQUENCE
        out.append(passed)
    tail, events = parser.feed(b"\x07plain")
    assert events == []  # the BEL terminates nothing: the opening was abandoned
    assert b"".join(out) + tail == junk + b"\x07plain"
    assert parser.statistics().unterminated == 1


def test_held_back_only_while_a_status_record_may_be_open() -> None:
    parser = OscParser(strip_status=True)
    # A title split mid-way is passed on at once (it is never stripped)...
    assert parser.feed(b"a\x1b]0;ti") == (b"a\x1b]0;ti", [])
    assert parser.feed(b"tle\x07b") == (b"tle\x07b", [Title("title")])
    # ...a possible 7501 record is held until it completes, then stripped.
    assert parser.feed(b"c\x1b]75") == (b"c", [])
    out, events = parser.feed(b"01;state=done:app=x\x07d")
    assert (out, events) == (b"d", [StatusRecord(state="done", app="x", serial=1)])
    # A trailing lone ESC is held; it turns out to be a CSI.
    assert parser.feed(b"e\x1b") == (b"e", [])
    assert parser.feed(b"[0m") == (b"\x1b[0m", [])
    # ESC inside an OSC that is not ST abandons it; the next sequence still parses.
    out, events = parser.feed(b"\x1b]0;x\x1b]7501;state=idle\x1b\\z")
    assert (out, events) == (
        b"\x1b]0;x" + b"z", [StatusRecord(state="idle", terminator="ST", serial=2)]
    )


@pytest.mark.parametrize(
    "payload",
    [
        b"state=sleeping",  # unknown state
        b"app=claude-code",  # no state
        b"state=working:msg=***",  # bad base64
        b"state=working:state=idle",  # repeated key
        b"state=working:progress=101",
        b"state=working:novalue",
        b"state=working:id=",
        b"state=\xff",
    ],
)
def test_malformed_records_pass_through_and_are_counted(payload: bytes) -> None:
    assert parse_status_fields(payload) is None
    parser = OscParser(strip_status=True)
    seq = b"\x1b]7501;" + payload + b"\x07"
    assert parser.feed(seq) == (seq, [])
    assert parser.statistics().malformed == 1


def test_record_fields_decode() -> None:
    msg = base64.b64encode("approve Bash: rm -rf ä".encode()).decode()
    title = base64.b64encode(b"Say hello").decode()
    record = parse_status_fields(
        f"state=blocked:app=claude-code:id=a1:kind=permission:progress=40:title={title}"
        f":msg={msg}:future=1".encode()
    )
    assert record == StatusRecord(
        state="blocked", app="claude-code", kind="permission", child_id="a1",
        message="approve Bash: rm -rf ä", title="Say hello", progress=40,
    )


def test_notifications_and_progress() -> None:
    parser = OscParser()
    _, events = parser.feed(
        b"\x1b]9;Hello\x07\x1b]777;notify;Codex;Approval requested\x1b\\"
        b"\x1b]9;4;3;\x07\x1b]9;4;1;40\x07\x1b]777;other\x07\x1b]2;t\x07"
    )
    assert events == [
        OscNotification(body="Hello"),
        OscNotification(body="Approval requested", title="Codex", code=777),
        Progress(state=3),
        Progress(state=1, value=40),
        Title("t", code=2),
    ]
    assert parser.statistics().malformed == 1


def test_pty_status_feed_on_a_claude_recording() -> None:
    sink = ListSink()
    key = messages.SessionKey("claude-code", "pty-1-2")
    feed = PtyStatusFeed(key, "%3", sink)
    raw = (FIXTURES / "claude-osc7501" / "raw.bin").read_bytes()
    answers = [feed.feed(raw[i : i + 97]) for i in range(0, len(raw), 97)]
    assert [a for a in answers if a is not None] == [PROBE_ANSWER]
    states = [(m.state, m.kind, m.message) for m in sink.items
              if isinstance(m, messages.ProgramStatus)]
    assert states == [
        ("idle", None, None),
        ("working", None, None),
        ("done", None, None),
        ("working", None, None),
        ("working", None, "Writing hi.txt"),
        ("blocked", "permission", "approve Bash: echo hi > hi.txt"),
        ("working", None, None),
        ("done", None, None),
        ("working", None, None),
        ("idle", None, None),
        ("clear", None, None),
        ("clear", None, None),
    ]
    assert all(m.key == key and m.pane == "%3" for m in sink.items)  # type: ignore[union-attr]
    stats = feed.statistics()
    assert (stats.emitted, stats.rejected, stats.probes_answered) == (12, 0, 1)


def test_a_flip_and_back_in_one_read_is_three_records_not_a_duplicate() -> None:
    # working, done, working in one write: one PTY read, one millisecond. The reducer drops a
    # record identical to one it has seen, so the parser's serial keeps the third its own.
    sink = ListSink()
    key = messages.SessionKey("codex", "pty-7-7")
    feed = PtyStatusFeed(key, None, sink)
    feed.feed(b"".join(b"\x1b]7501;state=%s\x07" % s for s in (b"working", b"done", b"working")))
    records = [m for m in sink.items if isinstance(m, messages.ProgramStatus)]
    assert [(m.state, m.serial) for m in records] == [("working", 1), ("done", 2), ("working", 3)]
    assert len({m.at_ms for m in records}) == 1
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    at = records[0].at_ms
    spawned = messages.PtySpawned(key=key, pid=os.getpid(), start_token=start_token(os.getpid()),
                                  at_ms=at, observed_at_ms=at)
    assert [t.after.turn for t in table.apply(spawned)] == ["unknown"]
    published = [t for m in records for t in table.apply(m)]
    assert [(t.after.turn, t.after.attention.kind if t.after.attention else None)
            for t in published] == [("working", None), ("idle", "turn_done"), ("working", None)]
    # The same record delivered twice (two feeds of one stream) still counts once.
    assert table.apply(records[-1]) == []
    assert table.ignored == {"duplicate": 1}


def test_pty_status_feed_counts_what_the_sink_rejects() -> None:
    feed = PtyStatusFeed(None, "%1", ListSink(refuse=True))
    assert feed.feed(b"\x1b]7501;state=working\x07\x1b]0;hi\x07") is None
    stats = feed.statistics()
    assert (stats.emitted, stats.rejected, stats.last_title) == (0, 1, "hi")
    with pytest.raises(ValueError, match="key or a pane"):
        PtyStatusFeed(None, None, ListSink(refuse=True))


def test_program_status_wire_shape() -> None:
    sink = ListSink()
    PtyStatusFeed(messages.SessionKey("codex", "pty-9-9"), None, sink).feed(
        b"\x1b]7501;state=blocked:app=codex:kind=permission\x1b\\"
    )
    (msg,) = sink.items
    wire = msgspec.json.decode(messages.encode(msg))
    assert wire["type"] == "ProgramStatus"
    assert (wire["state"], wire["app"], wire["kind"]) == ("blocked", "codex", "permission")
    assert wire["key"] == {"harness": "codex", "session_id": "pty-9-9"}
