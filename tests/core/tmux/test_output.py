"""The tmux output reader's pure decisions (``actors/core/tmux/output.py``), no event loop, no tmux.

tmux's escaping of pane output is reproduced here from tmux(1) (CONTROL MODE: "characters with
a value below 32 and the backslash are replaced by their octal escape"); the real Codex
recording (tests/fixtures/pty/codex-basic/raw.bin) escaped that way and split into lines as tmux
writes them gives, through :class:`OutputParser` and the one OSC parser, exactly the records the
parser finds in the raw bytes.
"""

from __future__ import annotations

import pytest

from actors.core.ingress.osc import OscParser, StatusRecord
from actors.core.tmux.output import (
    PROOF,
    OutputParser,
    PaneOutput,
    PanePaused,
    RecordTarget,
    Transport,
    find_transport,
    needs_output,
    output_command,
    pane_sessions,
    record_target,
    remote_key,
    transport_of,
    unescape_output,
)
from actors.core.tmux.protocol import Reply, TmuxNotification
from messages import SessionKey
from tests.support import FIXTURES

PTY = FIXTURES / "pty"
HARNESSES = frozenset({"codex", "claude-code"})


def tmux_escape(data: bytes) -> bytes:
    """What tmux writes for ``data`` in ``%output``."""
    return b"".join(b"\\%03o" % b if b < 32 or b == 92 else bytes([b]) for b in data)


def records(data: bytes, chunk: int = 4096) -> list[StatusRecord]:
    parser = OscParser()
    out: list[StatusRecord] = []
    for i in range(0, len(data), chunk):
        out += [e for e in parser.feed(data[i : i + chunk])[1] if isinstance(e, StatusRecord)]
    return out


@pytest.mark.parametrize(
    "raw",
    [b"", b"plain", b"\x1b[0m", b"\\033 is not ESC", b"\\", b"\x00\x01\x1f\x7f\x80\xff",
     b"\x1b]7501;state=idle:app=codex\x1b\\", b"a\nb\r\n", bytes(range(256)), b"\\\x1b\\\\033"],
)
def test_unescape_undoes_tmuxs_escaping(raw: bytes) -> None:
    assert unescape_output(tmux_escape(raw)) == raw


def test_output_lines_in_both_forms_pauses_and_other_lines() -> None:
    parser = OutputParser()
    record = b"\x1b]7501;state=working:app=codex\x1b\\"
    stream = (
        b"%begin 1 2 1\n%end 1 2 1\n"
        + b"%output %3 " + tmux_escape(b"hi" + record) + b"\n"
        + b"%extended-output %4 17 : " + tmux_escape(record) + b"\n"
        + b"%pause %4\n%continue %4\n%window-renamed @1 x\n%exit\n"
    )
    events = []
    for i in range(len(stream)):  # a byte at a time: a line waits for its end
        events += parser.feed(stream[i : i + 1])
    assert events[0] == Reply(2, True, (), from_client=True)
    assert events[1:5] == [
        PaneOutput("%3", b"hi" + record),
        PaneOutput("%4", record, 17),
        PanePaused("%4"),
        PanePaused("%4", continued=True),
    ]
    assert events[5] == TmuxNotification("window-renamed", "@1 x")
    assert len(events) == 7  # and the %exit
    assert parser.lines == 8 and parser.bad_lines == 0


def test_a_broken_extended_output_line_is_counted_and_dropped() -> None:
    parser = OutputParser()
    assert parser.feed(b"%extended-output %4 notanage : x\n%extended-output %4\n") == []
    assert parser.bad_lines == 2


@pytest.mark.parametrize("run", ["codex-basic", "codex-silent", "claude-osc7501"])
def test_a_real_recording_through_tmux_gives_the_same_records(run: str) -> None:
    raw = (PTY / run / "raw.bin").read_bytes()
    # tmux writes a pane's output in pieces of whatever it read (a line each, escaped).
    stream = b"".join(
        b"%output %0 " + tmux_escape(raw[i : i + 700]) + b"\n" for i in range(0, len(raw), 700)
    )
    parser, feed = OutputParser(), OscParser()
    seen: list[StatusRecord] = []
    for i in range(0, len(stream), 4096):
        for event in parser.feed(stream[i : i + 4096]):
            assert isinstance(event, PaneOutput) and event.pane == "%0"
            seen += [e for e in feed.feed(event.data)[1] if isinstance(e, StatusRecord)]
    expected = records(raw)
    assert expected and seen == expected


@pytest.mark.parametrize(
    ("comm", "argv", "kind"),
    [
        ("ssh", ["ssh", "host", "codex"], "ssh"),
        ("ssh", ["ssh"], "ssh"),
        ("docker", ["docker", "exec", "-it", "c", "codex"], "docker"),
        ("docker", ["docker", "container", "exec", "c", "sh"], "docker"),
        ("docker", ["docker", "run", "img", "--", "exec"], None),
        ("docker", ["docker", "logs", "c"], None),
        ("podman", ["podman", "exec", "c", "codex"], "podman"),
        ("kubectl", ["kubectl", "-n", "ns", "exec", "-it", "pod", "--", "codex"], "kubectl"),
        ("kubectl", ["kubectl", "logs", "pod"], None),
        ("mosh-client", ["mosh-client", "-#", "host"], None),
        ("mosh", ["mosh", "host"], None),
        ("bash", ["bash"], None),
    ],
)
def test_which_processes_are_transports(comm: str, argv: list[str], kind: str | None) -> None:
    assert transport_of(comm, argv) == kind


def test_the_nearest_transport_in_a_pane_tree() -> None:
    # 1 shell -> 2 git -> 4 ssh (git's own); 1 -> 3 ssh (the user's): 3 is nearer.
    tree = {1: [2, 3], 2: [4], 3: [5], 4: [], 5: []}
    names = {1: "bash", 2: "git", 3: "ssh", 4: "ssh", 5: "sh"}
    reads: list[int] = []

    def argv(pid: int) -> list[str]:
        reads.append(pid)
        return [names[pid], "host"]

    def ident(pid: int) -> tuple[str, str] | None:
        return (names[pid], f"t{pid}") if pid in names else None

    found = find_transport(1, tree.__getitem__, ident, argv)
    assert found == Transport("ssh", 3, "t3")
    assert reads == [3]  # only a process named like a transport has its command line read
    assert find_transport(2, tree.__getitem__, ident, argv) == Transport("ssh", 4, "t4")
    assert find_transport(5, tree.__getitem__, ident, argv) is None
    # a vanished process is skipped, the walk is bounded
    assert find_transport(1, tree.__getitem__, lambda pid: None, argv) is None
    assert find_transport(1, tree.__getitem__, ident, argv, max_visit=2) is None


def test_which_panes_need_output() -> None:
    assert needs_output({"%1": 1}, {"%2": 2}) == {"%1", "%2"}
    assert needs_output((), ()) == frozenset()


def test_output_commands() -> None:
    assert output_command("%3", "on") == 'refresh-client -A "%3:on"'
    assert output_command("%3", "continue") == 'refresh-client -A "%3:continue"'
    with pytest.raises(ValueError):
        output_command("%3", "pause")


def test_whom_a_record_is_about() -> None:
    tui = SessionKey("codex", "tui-10-99")
    ssh = Transport("ssh", 42, "777")
    # the session the pane shows, whatever the pane runs
    assert record_target("codex", shown=tui, transport=ssh, bound=None,
                         harnesses=HARNESSES) == RecordTarget(tui)
    # nothing shown, no transport: nobody
    assert record_target("codex", shown=None, transport=None, bound=None,
                         harnesses=HARNESSES) is None
    # behind ssh: the transport's own session, bound by the first record, present by ssh
    key = SessionKey("codex", "ssh-42-777")
    assert remote_key("codex", ssh) == key
    first = record_target("codex", shown=None, transport=ssh, bound=None, harnesses=HARNESSES)
    assert first == RecordTarget(key, bind=True, owner=(42, "777"))
    assert record_target("codex", shown=None, transport=ssh, bound=key,
                         harnesses=HARNESSES) == RecordTarget(key)
    # an app no harness is: the terminal harness's
    other = record_target("vim", shown=None, transport=ssh, bound=None, harnesses=HARNESSES)
    assert other is not None and other.key == SessionKey("terminal", "ssh-42-777")
    assert PROOF == "tmux_output"


def test_pane_rows() -> None:
    rows = ["$1|%0|100|bash", "$2|%0|100|bash", "$1|%3|200|ssh", "bad", "$1|%4|x|sh",
            "$1|%5|300|a|b"]
    assert pane_sessions(rows) == {
        "%0": ("$1", 100, "bash"), "%3": ("$1", 200, "ssh"), "%5": ("$1", 300, "a|b")
    }
