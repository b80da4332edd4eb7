"""Redaction, pure: what sinks that others can see show of an attention reason.

A reason can carry a whole shell command, a path or a URL: Claude Code's OSC 7501 ``msg``
(``approve Bash: curl -H 'Authorization: …' https://…``), a registry ``waitingFor``, a hook's
message. tmux options are visible to anyone attached to the server and desktop notifications
to anyone near the screen, so those sinks (:mod:`actors.core.tmux.badges`,
:mod:`actors.core.views.notify`) show :func:`redact` of it by default: the tool and the command's
program name, URLs cut to their host, paths to their last component, long tokens dropped.
``paneward status`` / ``watch`` (the user's own view) and the store keep the full text; the
daemon's ``--full-text`` setting shows the full text everywhere.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["REDACTED_LIMIT", "redact", "shown_reason"]

#: The longest reason a shared sink shows (characters, an ellipsis included).
REDACTED_LIMIT: Final = 60

# "<short head>: <command>" or "<short head>(<command>)": a tool and what it runs
# ("approve Bash: echo hi > hi.txt", "Bash(rm -rf build)", "permission: Bash"); the head may
# name the tool in a second part ("permission: Bash: rm -rf build", the one reason format of a
# permission wait, actors.core.session.hints.permission_reason).
_TOOL_AND_COMMAND: Final = re.compile(r"^(?P<head>[^:()]{1,40}?)(?P<sep>: |\()(?P<rest>.+)$", re.S)
_TOOL: Final = re.compile(r"[A-Za-z][\w.-]{0,39}")
_URL: Final = re.compile(r"\b(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?:[^\s/@]*@)?(?P<host>[^\s/?#]*)\S*")
_PATH: Final = re.compile(r"(?<![\w/.~:-])(?:~|\.{1,2})?/[^\s:'\"()]*")
_TOKEN: Final = re.compile(r"[A-Za-z0-9_+/=-]{24,}")
_SPACE: Final = re.compile(r"\s+")


def _basename(word: str) -> str:
    tail = word.rstrip("/").rsplit("/", 1)[-1]
    return tail or word


def _generic(text: str) -> str:
    text = _URL.sub(lambda m: f"{m['scheme']}://{m['host']}/…", text)
    text = _PATH.sub(lambda m: "…/" + _basename(m[0]) if m[0].count("/") > 1 else m[0], text)
    return _TOKEN.sub("…", text)


def _program(command: str) -> str:
    """The program name of a command line, then `` …`` when arguments follow."""
    words = command.split()
    if not words:
        return ""
    first = words[0]
    if "=" in first or "://" in first:
        return "…"  # an environment assignment or a URL: nothing safe to name
    name = _basename(first.strip("'\"`"))
    return name + (" …" if len(words) > 1 else "")


def redact(text: str, limit: int = REDACTED_LIMIT) -> str:
    """``text`` as a shared sink shows it: the tool and a shortened command.

    ``approve Bash: curl -s https://x/y?token=…`` becomes ``approve Bash: curl …``;
    ``Bash(rm -rf /home/me/p)`` becomes ``Bash(rm …)``; a reason without a command keeps its
    words, with URLs cut to ``scheme://host/…``, paths to ``…/last`` and long tokens (24+
    letters, digits or base64 characters) to ``…``. At most ``limit`` characters.
    """
    text = _SPACE.sub(" ", text).strip()
    match = _TOOL_AND_COMMAND.match(text)
    if match is not None:
        head, rest = _generic(match["head"]), match["rest"]
        if match["sep"] == ": ":
            # "permission: Bash: <command>": the tool is part of the head.
            tool, sep, command = rest.partition(": ")
            if sep and _TOOL.fullmatch(tool):
                head, rest = f"{head}: {tool}", command
        closing = ")" if match["sep"] == "(" and rest.endswith(")") else ""
        if closing:
            rest = rest[:-1]
        text = f"{head}{match['sep']}{_program(rest)}{closing}"
    else:
        text = _generic(text)
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def shown_reason(reason: str, *, full_text: bool) -> str:
    """The reason a shared sink shows: :func:`redact` unless the user asked for full text."""
    return reason if full_text else redact(reason)
