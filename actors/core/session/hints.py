"""Shared helpers for turning native hook payloads into normalized hints.

Pure functions, no I/O. Used by every harness package under :mod:`actors.harnesses`: a rule
two harnesses share lives here, never in one of them (harness packages do not import each
other).
"""

from __future__ import annotations

import re
from typing import Any, Final

from messages.activity import Unmapped
from messages.common import MAX_ID_LEN, MAX_TEXT_LEN, Harness

__all__ = [
    "GENERIC_REASONS",
    "MAX_UNMAPPED_KEYS",
    "NEEDS_INPUT_NOTIFICATIONS",
    "blocked_reason",
    "first_str",
    "fold_name",
    "permission_reason",
    "reason_detail",
    "text",
    "unmapped",
]

MAX_UNMAPPED_KEYS: Final = 6
_NON_ALNUM: Final = re.compile(r"[^a-z0-9]+")
#: Notification types (as :func:`fold_name` spells them) that mean "blocked on the user" at once,
#: in every harness that sends such notifications (Claude Code, Cursor).
NEEDS_INPUT_NOTIFICATIONS: Final = frozenset(
    {"permissionrequest", "approvalrequest", "approvalrequired", "inputrequired"}
)


def fold_name(value: str) -> str:
    """``value`` (an event or type name) folded to the form names are compared in:
    lower-cased, non-alphanumerics stripped.

    ``PermissionRequest``, ``permission_request`` and ``permission-request`` all fold
    to ``permissionrequest``.
    """
    # Every hook folds its event's name, and the names are few: a dict hit is a fifth of
    # the regex. Bounded, since the names come from payloads.
    known = _FOLDED.get(value)
    if known is None:
        known = _NON_ALNUM.sub("", value.lower())
        if len(_FOLDED) >= _FOLDED_KEPT:
            _FOLDED.clear()
        _FOLDED[value] = known
    return known


_FOLDED: dict[str, str] = {}
_FOLDED_KEPT: Final = 1024


def first_str(payload: dict[str, Any], *names: str, limit: int = MAX_ID_LEN) -> str | None:
    """The first of ``names`` whose value is a non-empty string within ``limit`` holding no NUL
    (ids become :data:`messages.common.Id`, which refuses NUL)."""
    for name in names:
        value = payload.get(name)
        if isinstance(value, str) and value and len(value) <= limit and "\x00" not in value:
            return value
    return None


def text(value: object, limit: int = 200) -> str | None:
    """A short single-line summary of ``value`` for reasons, or None if not text."""
    if not isinstance(value, str) or not value:
        return None
    line = " ".join(value.split())
    limit = min(limit, MAX_TEXT_LEN)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def unmapped(harness: Harness, payload: dict[str, Any], event: str | None, at_ms: int) -> Unmapped:
    """A counted ``unmapped`` event naming at most six of the payload's keys."""
    keys = tuple(sorted(str(k)[:64] for k in payload)[:MAX_UNMAPPED_KEYS])
    return Unmapped(harness=harness, event=event[:128] if event else None, keys=keys, at_ms=at_ms)


#: How long the command part of a permission reason may be (the whole reason stays one line).
COMMAND_LIMIT: Final = 500
# Claude Code's OSC 7501 `blocked` message: "approve <Tool>: <what>" or "approve <Tool>".
_APPROVE: Final = re.compile(r"approve ([A-Za-z0-9_.:-]+?)(?:: (.*))?", re.DOTALL)


def permission_reason(tool: str | None, command: object = None) -> str:
    """The one spelling of a permission wait, whoever saw it (docs/design.md §4, needs_input).

    ``permission: Bash: echo hi > hi.txt`` when the tool and its command are known,
    ``permission: Bash`` with the tool only, ``permission`` with neither: a hook's
    ``PermissionRequest`` and the OSC 7501 ``blocked`` record of the same dialog give the same
    reason.
    """
    if not tool:
        return "permission"
    detail = text(command, COMMAND_LIMIT)
    return f"permission: {tool}: {detail}" if detail else f"permission: {tool}"


def blocked_reason(kind: str | None, message: str | None) -> str:
    """The reason of an OSC 7501 ``blocked`` record (``kind``, decoded ``msg``).

    Claude Code's ``approve Bash: echo hi`` becomes :func:`permission_reason` of that tool and
    command; another message is kept as the program wrote it; without a message the kind is
    the reason (``permission`` for Codex's record, which names neither tool nor command).
    """
    if message:
        found = _APPROVE.fullmatch(" ".join(message.split()))
        if found is not None:
            return permission_reason(found.group(1), found.group(2))
        return text(message, COMMAND_LIMIT + 100) or message
    return kind or "blocked"


#: The words a source says when it cannot name what the user is asked (Claude's registry
#: ``waitingFor``, Codex's daemon and OSC 7501 record without a call, the reducer's fallbacks).
GENERIC_REASONS: Final = frozenset(
    {
        "permission",
        "permission prompt",
        "dialog open",
        "waiting",
        "blocked",
        "input required",
        "input requested",
    }
)


def reason_detail(reason: str | None) -> int:
    """How much a ``needs_input`` reason says, higher is more specific (pure).

    4: ``permission: TOOL: command``; 3: ``permission: TOOL``; 2: any other text (a harness's
    own message); 1: a generic word (:data:`GENERIC_REASONS`); 0: no reason. Two records of one
    wait keep the reason that says most (:func:`actors.core.session.reducer.reduce`), whatever order
    they arrive in.
    """
    if not reason:
        return 0
    if reason in GENERIC_REASONS:
        return 1
    if reason.startswith("permission: "):
        return 4 if ": " in reason[len("permission: ") :] else 3
    return 2
