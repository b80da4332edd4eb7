"""Text for a terminal: control characters are never printed raw (pure).

``paneward status`` and ``paneward watch`` print session ids, pane ids, tool names and reasons
that arrive inside hook payloads: an escape sequence there could clear the user's screen, set
the window title or hide text. :func:`printable` escapes them the way systemd does for its
unit names and journal fields (``\\n``, ``\\t``, ``\\x1b`` ...), so the text stays readable and
unambiguous, and :func:`clip` cuts the escaped text, so a cut can never leave an escape open.
JSON output (``--json``) is not touched: it keeps the exact values.
"""

from __future__ import annotations

# Typing only: `paneward watch` imports this module for every summary line it prints.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["clip", "printable"]

_NAMED: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\v": "\\v",
    "\f": "\\f",
    "\r": "\\r",
    "\\": "\\\\",
}


def _escape(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (C0 and C1 controls, DEL, format
    characters such as bidi overrides, line/paragraph separators) and ``\\`` doubled."""
    if text.isprintable() and "\\" not in text:
        return text  # the common case: nothing to do
    return "".join(c if c.isprintable() and c != "\\" else _escape(c) for c in text)


def clip(text: str, width: int) -> str:
    """:func:`printable` ``text``, cut to ``width`` characters (after escaping)."""
    return printable(text)[:width]
