"""Text for a terminal: control characters are never printed raw (pure).

``paneward status`` and ``paneward watch`` print session ids, pane ids, tool names and reasons
that arrive inside hook payloads: an escape sequence there could clear the user's screen, set
the window title or hide text. :func:`printable` escapes them the way systemd does for its
unit names and journal fields (``\\n``, ``\\t``, ``\\x1b`` ...), so the text stays readable and
unambiguous, and :func:`clip` cuts the escaped text, so a cut can never leave an escape open.
The same escaping is what every other text paneward puts before a terminal goes through: the
tmux status-line message and the OSC 9 / 777 notification of :mod:`actors.core.views.notify` (tmux
hands an OSC in passthrough to the outer terminal byte for byte, where a C1 ``ST`` U+009C
would end it and a C1 ``OSC`` U+009D start another, e.g. a clipboard write).

JSON output (``--json``, ``paneward wait``) keeps the exact values, with every control
character escaped *in JSON*: msgspec escapes the C0 controls but writes U+0080 to U+009F as
raw UTF-8, which a terminal that honours C1 in UTF-8 (xterm, VTE) acts on.
:func:`json_without_c1` writes those as ``\\u0080`` ... ``\\u009f``: the same JSON value.
"""

from __future__ import annotations

# Typing only: `paneward watch` imports this module for every summary line it prints.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Final

__all__ = ["clip", "ellipsize", "json_without_c1", "printable"]

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


def json_without_c1(data: bytes) -> bytes:
    """UTF-8 JSON ``data`` with every C1 control (U+0080 to U+009F, the bytes ``C2 80`` to
    ``C2 9F``) written as its ``\\u00XX`` escape: the same JSON value, no raw C1 for a terminal.

    A byte replace is exact: in UTF-8 ``C2`` only ever starts a two-byte character (never a
    continuation byte), and outside strings JSON holds ASCII only, so each ``C2 80``..``C2 9F``
    pair is one C1 character inside a string, where ``\\u00XX`` means the same character.
    """
    if b"\xc2" not in data:
        return data  # the common case: nothing to do
    for code in range(0x80, 0xA0):
        data = data.replace(bytes((0xC2, code)), b"\\u%04x" % code)
    return data


def ellipsize(text: str, width: int) -> str:
    """:func:`printable` ``text`` in at most ``width`` characters: a longer one is cut (after
    escaping) and ends with ``…``, so a cut text never reads as the whole."""
    shown = printable(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"
