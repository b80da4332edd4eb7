"""``paneward install-hooks opencode``: paneward's plugin in ``<config>/plugin/paneward.js``.

OpenCode has no hook commands: a plugin runs inside the opencode process and receives every
bus event. paneward's plugin (the shared forwarder of :mod:`actors.core.install.forwarder_js` plus
the event handling below) forwards the events of :data:`.hooks.INSTALLED_EVENTS` to paneward's hook
socket without blocking OpenCode, each stamped with the plugin's own pid (``process.pid`` =
``$OPENCODE_PID``) and start token. The file is paneward's alone: written whole, deleted by
``--uninstall``; the user's own plugins and ``opencode.json`` are never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from actors.core.install import forwarder_js
from actors.core.install.config_edit import Edit, HookTarget, Installer, own_file_edit
from actors.harnesses.opencode import paths
from actors.harnesses.opencode.hooks import INSTALLED_EVENTS

__all__ = ["INSTALLER", "PLUGIN_NAME", "edits", "plugin_text"]

PLUGIN_NAME: Final = "paneward.js"

_HANDLING: Final = """\

// OpenCode: one payload per forwarded bus event (actors/harnesses/opencode/hooks.py reads it).
// OpenCode may load a plugin twice in one process: the state is shared, each event sent once.
const pwSeen = (globalThis.__panewardSeen ??= new Set()); // event ids already sent
const pwSessions = (globalThis.__panewardSessions ??= new Set());
const pwErrors = (globalThis.__panewardErrors ??= new Map());
const pwRunning = (globalThis.__panewardRunning ??= new Set()); // a run since the last idle

function pwEvent(event) {
  const type = event?.type;
  if (!PW_EVENTS.has(type)) return undefined;
  if (event.id) {
    if (pwSeen.has(event.id)) return undefined;
    pwSeen.add(event.id);
    if (pwSeen.size > 4096) pwSeen.clear();
  }
  const p = event.properties ?? {};
  if (type === "server.instance.disposed") {
    for (const id of pwSessions) pwSend({ hook_event_name: type, session_id: id });
    pwSessions.clear();
    return pwFlushed();
  }
  const id = typeof p.sessionID === "string" ? p.sessionID : null;
  if (id === null) return undefined;
  pwSessions.add(id);
  const payload = { hook_event_name: type, session_id: id };
  if (type === "session.status") {
    payload.status = p.status?.type ?? null;
    if (payload.status === "busy") {
      if (!pwRunning.has(id)) pwErrors.delete(id); // a new run
      pwRunning.add(id);
    }
  } else if (type === "permission.asked") {
    payload.permission = p.permission ?? null;
    payload.patterns = Array.isArray(p.patterns) ? p.patterns.slice(0, 8) : null;
  } else if (type === "permission.replied") payload.reply = p.reply ?? null;
  else if (type === "session.error") {
    pwErrors.set(id, p.error?.name ?? "error");
    payload.error = p.error?.name ?? "error";
  } else if (type === "session.idle") {
    // OpenCode repeats session.idle after an Esc: a run ends once, so an idle with no busy
    // since the last one is not sent (it would read as a second, completed turn).
    if (!pwRunning.has(id)) return undefined;
    pwRunning.delete(id);
    if (pwErrors.has(id)) payload.error = pwErrors.get(id);
    pwErrors.delete(id);
  }
  pwSend(payload);
  return undefined;
}

export const PanewardPlugin = async () => ({
  event: async ({ event }) => {
    try {
      await pwEvent(event);
    } catch {
      // never fail OpenCode over paneward
    }
  },
});
"""


def plugin_text() -> str:
    """The whole plugin file."""
    return forwarder_js.prelude("opencode", INSTALLED_EVENTS) + _HANDLING


def edits(
    config_dir: Path, target: HookTarget, *, http: bool, events: Sequence[str] | None
) -> list[Edit]:
    """The one file: ``<config_dir>/plugin/paneward.js`` (the plugin runs in-process, so
    ``target``, ``http`` and ``events`` do not apply)."""
    return [own_file_edit(config_dir / "plugin" / PLUGIN_NAME, plugin_text(), forwarder_js.MARKER)]


INSTALLER: Final = Installer(
    harness="opencode",
    title="OpenCode",
    default_dir=paths.config_dir,
    default_dir_help="$XDG_CONFIG_HOME/opencode or ~/.config/opencode",
    edits=edits,
    notes=(
        "OpenCode loads the plugin at its next start (no prompt); it runs inside opencode and "
        "sends each session event to paneward's socket without waiting for it",
    ),
)
