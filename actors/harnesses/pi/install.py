"""``paneward install-hooks pi``: paneward's extension in ``<agent dir>/extensions/paneward.ts``.

Pi has no hook commands and emits no OSC 7501: an extension runs inside the pi process
(``pi.on(event, handler)``). paneward's extension (the shared forwarder of
:mod:`actors.core.install.forwarder_js` plus the handlers below) forwards the events of
:data:`.hooks.INSTALLED_EVENTS` to paneward's hook socket without blocking Pi (each handler
returns at once; only ``session_shutdown`` returns a promise, settled within 0.5 s, so the last
frame leaves before Pi exits), stamped with ``process.pid`` and its start token. The file is
paneward's alone: written whole, deleted by ``--uninstall``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from actors.core.install import forwarder_js
from actors.core.install.config_edit import Edit, HookTarget, Installer, own_file_edit
from actors.harnesses.pi import paths
from actors.harnesses.pi.hooks import INSTALLED_EVENTS

__all__ = ["EXTENSION_NAME", "INSTALLER", "edits", "extension_text"]

EXTENSION_NAME: Final = "paneward.ts"

_HANDLING: Final = """\

// Pi: one payload per forwarded event (actors/harnesses/pi/hooks.py reads it).
function pwSessionId(ctx) {
  try {
    return ctx?.sessionManager?.getSessionId?.() ?? null;
  } catch {
    return null;
  }
}

function pwEvent(name, event, ctx) {
  const id = pwSessionId(ctx);
  if (typeof id !== "string" || !id) return undefined;
  const payload = { hook_event_name: name, session_id: id };
  if (typeof event?.toolName === "string") payload.tool_name = event.toolName;
  if (name === "agent_end" && Array.isArray(event?.messages) && event.messages.length) {
    payload.stop_reason = event.messages[event.messages.length - 1]?.stopReason ?? null;
  }
  if (typeof event?.reason === "string") payload.reason = event.reason;
  pwSend(payload);
  return name === "session_shutdown" ? pwFlushed() : undefined;
}

export default function (pi) {
  for (const name of PW_EVENTS) {
    pi.on(name, (event, ctx) => {
      try {
        return pwEvent(name, event, ctx);
      } catch {
        return undefined; // never fail Pi over paneward
      }
    });
  }
}
"""


def extension_text() -> str:
    """The whole extension file (plain JavaScript, which Pi's TypeScript loader accepts)."""
    return forwarder_js.prelude("pi", INSTALLED_EVENTS) + _HANDLING


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file: ``<config_dir>/extensions/paneward.ts`` (in-process, so ``target``,
    ``http`` and ``events`` do not apply)."""
    return [
        own_file_edit(
            config_dir / "extensions" / EXTENSION_NAME, extension_text(), forwarder_js.MARKER
        )
    ]


INSTALLER: Final = Installer(
    harness="pi",
    title="Pi",
    default_dir=paths.agent_dir,
    default_dir_help="$PI_CODING_AGENT_DIR or ~/.pi/agent",
    edits=edits,
    notes=(
        "Pi loads the extension at its next start (no prompt). Pi has no permission prompt and "
        "emits no OSC 7501, so the extension is its only source of turns",
    ),
)
