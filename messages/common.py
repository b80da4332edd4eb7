"""Plain value types shared by every direction of the vocabulary.

Nothing here does I/O. The literal types are the public words of the three axes
(docs/design.md §1); the constrained aliases are what the wire codec enforces on every
inbound message (absurd timestamps, empty or enormous ids are rejected there).
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

import msgspec

__all__ = [
    "HARNESSES",
    "MAX_ID_LEN",
    "MAX_TEXT_LEN",
    "Attention",
    "AttentionKind",
    "Evidence",
    "ExitInfo",
    "Harness",
    "Message",
    "Id",
    "Pid",
    "Presence",
    "SessionKey",
    "Source",
    "Text",
    "TimeMs",
    "Turn",
]

#: The harness ids on the wire: every package of ``actors.harnesses.catalog`` and ``terminal``
#: (any other program under ``paneward wrap``). The catalog is where a harness is declared; this
#: type is the codec's and the type checker's view of it, and tests/test_design.py checks that
#: the two hold the same ids (``messages`` imports nothing of ``actors``).
Harness = Literal[
    "claude-code", "codex", "cursor", "hermes", "gemini", "opencode", "pi", "terminal"
]
HARNESSES: tuple[Harness, ...] = get_args(Harness)

Presence = Literal["persisted", "running", "shutting_down"]
Turn = Literal["unknown", "idle", "working", "needs_input"]
AttentionKind = Literal["needs_input", "failed", "turn_done"]
#: Every evidence source: each harness's own (its spec's ``sources``; tests/test_design.py checks
#: that every word here is one harness's or shared) and the shared ones -- the host's PTY and
#: OSC 7501 status, process identity, the pane mapper, the store, supervision, the host.
Source = Literal[
    "claude_registry",
    "claude_hook",
    "codex_rollout",
    "codex_notify",
    "codex_hook",
    "codex_daemon",
    "cursor_hook",
    "hermes_executions",
    "hermes_hook",
    "gemini_hook",
    "opencode_plugin",
    "pi_extension",
    "pty_host",
    "pty_status",
    "tmux_output",
    "pid_probe",
    "pane_mapper",
    "persisted_store",
    "supervisor",
    "host",
]

MAX_ID_LEN = 256
MAX_TEXT_LEN = 4096

# Epoch milliseconds between 2000-01-01 and 2100-01-01: anything outside is an
# absurd clock (or seconds passed where milliseconds belong) and is rejected.
TimeMs = Annotated[int, msgspec.Meta(ge=946_684_800_000, le=4_102_444_800_000)]
# An id never holds NUL (it would end the string for any C consumer, tmux included, and no
# harness writes one); other control characters are escaped where ids are printed.
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_LEN, pattern=r"^[^\x00]*$")]
Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT_LEN)]
Pid = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]

class Message(
    msgspec.Struct,
    frozen=True,
    gc=False,
    tag_field="type",
    tag=True,
    forbid_unknown_fields=True,
):
    """The settings every message shares: frozen, tagged by class name in ``type``, unknown
    fields refused, and not tracked by the cyclic garbage collector.

    The bases of the three families (:class:`~messages.activity.OutboundMessage`,
    :class:`~messages.evidence.EvidenceMessage`, :class:`~messages.control.ControlMessage`)
    derive from it. ``gc=False`` is also set on the value structs the hot path makes per
    message (``SessionKey`` and its siblings here, the reducer's state and step, routing's
    delivery, the store's pending row). They are frozen values holding scalars, strings, tuples,
    decoded JSON and other such structs, so they can never be part of a reference cycle, and the
    collector need not track them. Tracked, the handful made per hook set off a collection every
    ~120 hooks: 4-5 us a hook, with the tracking itself 5-10 % of the loop's CPU per hook
    (bench/bench_hotpath.py). Never store anything but such values
    in one: a cycle through an untracked struct would never be collected.
    """


class SessionKey(
    msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True, omit_defaults=True
):
    """``(harness, session_id)``: the identity of one agent session.

    Claude Code: the registry ``sessionId`` / hook ``session_id``; Codex: the
    thread id; Hermes: the cron session id, or ``HERMES_SESSION_ID`` of an interactive run;
    Gemini CLI: ``GEMINI_SESSION_ID``; OpenCode: ``ses_…``; Pi: the session manager's id;
    ``terminal``: an id the host chose.

    ``host`` names the fleet host a remote session runs on (docs/fleet.md); it is absent
    (``None``, left out of the JSON) for every session of this machine, so local keys are
    exactly ``{"harness", "session_id"}``. Only a fleet follower makes a key with a host
    (:mod:`actors.core.fleet.follow`); an inbound message naming one is refused
    (:func:`messages.codec.decode_inbound`): evidence for a remote session goes to its host.
    """

    harness: Harness
    session_id: Id
    host: Id | None = None

    def __str__(self) -> str:
        if self.host is not None:
            return f"{self.host}/{self.harness}:{self.session_id}"
        return f"{self.harness}:{self.session_id}"


class Attention(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """The one open attention item of a session (docs/design.md §4, Attention)."""

    kind: AttentionKind
    reason: Text
    since_ms: TimeMs


class Evidence(
    msgspec.Struct, frozen=True, kw_only=True, gc=False, forbid_unknown_fields=True
):
    """What proved the current state. Never a pid, path, socket or token."""

    source: Source
    native_state: str | None = None
    observed_at_ms: TimeMs | None = None
    at_ms: TimeMs | None = None
    harness_version: str | None = None


class ExitInfo(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """How the owning program ended, when a host PTY reported it."""

    code: int | None = None
    signal: int | None = None
