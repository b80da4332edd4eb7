"""The JavaScript half of an in-process forwarder: paneward's OpenCode plugin and Pi extension.

Both harnesses run their plugins inside the agent's own process (OpenCode on Bun, Pi on Node),
so there is no hook command to run: the plugin itself sends each event to paneward's hook
socket, as ONE ``NotifyHook`` JSON line -- the frame :func:`actors.cli.hook_client.build_frame`
builds -- stamped with its own pid (``process.pid``: the plugin IS the owner) and that pid's start
token (field 22 of ``/proc/<pid>/stat``, as :mod:`actors.core.procstat` reads it). It never blocks
the agent: a send queues the line and returns; at most one connection is open at a time (so
frames arrive in order), each with a 0.5 s deadline; with no daemon the frame is dropped, as
``paneward hook`` drops it. ``pwFlushed()`` is a promise for the exit events, which a harness
may await before it exits.

What waits for the connection is bounded in frames (:data:`MAX_QUEUE`) and in bytes
(:data:`MAX_QUEUE_BYTES`, UTF-8): an agent whose events carry huge ids or titles while the
daemon is away (stopped, or slow to read) keeps at most that much, and the batch being sent,
in its own memory. The oldest frames are dropped first; a frame larger than the hook socket
takes (:data:`actors.core.ingress.frames.MAX_FRAME_BYTES`) is dropped at once. Each drop is counted
(one count per process, like the serial), and every later frame says how many its process
dropped before it was made (:data:`DROPPED_KEY`; its serials skip the dropped ones too): the
first frame that reaches the daemon again carries the loss, and the supervisor adds it up
(:class:`ForwarderDrops`, ``supervisor.forwarder_dropped``).

Each payload carries :data:`SERIAL_KEY`, the number of the frame in its process (one count for
every copy of the plugin the harness loads there): the ``HookHint``'s serial
(:class:`messages.evidence.Numbered` says why; :func:`serial` reads it back).

The socket path follows :func:`actors.core.paths.socket_path` (``$PANEWARD_SOCKET`` ->
``$XDG_RUNTIME_DIR/paneward`` -> the state directory, ``/hook.sock``), read when each frame is
sent. A rule two harness packages share, so it lives here (harness packages never import each
other); each package's ``install`` module appends its own event handling to :func:`prelude`.
Pure: text out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from actors.core.ingress.frames import MAX_FRAME_BYTES
from messages.common import Harness

__all__ = [
    "DROPPED_KEY",
    "MARKER",
    "MAX_QUEUE",
    "MAX_QUEUE_BYTES",
    "SERIAL_KEY",
    "ForwarderDrops",
    "prelude",
    "serial",
]

#: The first line of every file paneward writes this way (how install-hooks knows it is ours).
MARKER: Final = "// paneward: forwards agent events to paneward's hook socket"
#: Frames kept while no connection can be made (the oldest are dropped first).
MAX_QUEUE: Final = 256
#: Bytes of frames kept while no connection can be made (the oldest are dropped first): two
#: frames of the largest size the hook socket takes.
MAX_QUEUE_BYTES: Final = 2 * MAX_FRAME_BYTES
#: The payload key of the count of frames dropped before this one (absent while none was).
DROPPED_KEY: Final = "pw_dropped"
#: The payload key of a frame's serial (see the module docstring).
SERIAL_KEY: Final = "pw_serial"

_PRELUDE: Final = """\
{marker} ({harness}).
// Written by `paneward install-hooks {harness}`; `paneward install-hooks {harness} --uninstall`
// removes it. Edits are overwritten by the next install-hooks.
import {{ Buffer }} from "node:buffer";
import {{ createConnection }} from "node:net";
import {{ readFileSync }} from "node:fs";
import {{ homedir }} from "node:os";
import {{ join }} from "node:path";

const PW_HARNESS = {harness_json};
const PW_EVENTS = new Set({events_json});
const PW_MAX_QUEUE = {max_queue};
const PW_MAX_QUEUE_BYTES = {max_queue_bytes};
const PW_MAX_FRAME_BYTES = {max_frame_bytes};
const PW_SERIAL_KEY = {serial_key_json};
const PW_DROPPED_KEY = {dropped_key_json};

// actors/core/paths.py socket_path(), in JavaScript.
function pwDir(name) {{
  const value = process.env[name];
  if (!value) return null;
  return value === "~" || value.startsWith("~/") ? homedir() + value.slice(1) : value;
}}
function pwSocketPath() {{
  const explicit = pwDir("PANEWARD_SOCKET");
  if (explicit) return explicit;
  const xdgRuntime = pwDir("XDG_RUNTIME_DIR");
  if (xdgRuntime) return join(xdgRuntime, "paneward", "hook.sock");
  const state = pwDir("PANEWARD_STATE_DIR");
  if (state) return join(state, "hook.sock");
  const xdgState = pwDir("XDG_STATE_HOME");
  if (xdgState) return join(xdgState, "paneward", "hook.sock");
  return join(homedir(), ".local", "state", "paneward", "hook.sock");
}}

// Field 22 of /proc/<pid>/stat (the fields after the command's closing parenthesis).
function pwStartToken(pid) {{
  try {{
    const stat = readFileSync(`/proc/${{pid}}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] || null;
  }} catch {{
    return null;
  }}
}}
const PW_PID = process.pid;
const PW_TOKEN = pwStartToken(PW_PID);

const pwQueue = [];  // [line, its UTF-8 bytes], oldest first
let pwQueuedBytes = 0;
let pwBusy = false;
let pwIdle = [];
// One count per process, even when the harness loads the file twice: the frames' serial and
// the frames dropped (the queue was full, or a frame too large).
const pwSerial = (globalThis.__panewardSerial ??= {{ last: 0 }});
function pwDrop() {{
  pwSerial.dropped = (pwSerial.dropped || 0) + 1;
}}

function pwSend(payload) {{
  const now = Date.now();
  payload[PW_SERIAL_KEY] = ++pwSerial.last;
  if (pwSerial.dropped) payload[PW_DROPPED_KEY] = pwSerial.dropped;
  const frame = JSON.stringify({{
    type: "NotifyHook", harness: PW_HARNESS, payload, at_ms: now, observed_at_ms: now,
    pid: PW_PID, start_token: PW_TOKEN,
  }});
  const size = Buffer.byteLength(frame);
  if (size > PW_MAX_FRAME_BYTES) {{
    pwDrop();  // the hook socket refuses it: not worth the memory
    return;
  }}
  while (pwQueue.length &&
         (pwQueue.length >= PW_MAX_QUEUE || pwQueuedBytes + size + 1 > PW_MAX_QUEUE_BYTES)) {{
    pwQueuedBytes -= pwQueue.shift()[1];
    pwDrop();
  }}
  pwQueue.push([frame + "\\n", size + 1]);
  pwQueuedBytes += size + 1;
  if (!pwBusy) pwFlush();
}}

function pwFlush() {{
  if (pwQueue.length === 0) {{
    pwBusy = false;
    const waiting = pwIdle;
    pwIdle = [];
    for (const resolve of waiting) resolve();
    return;
  }}
  pwBusy = true;
  const batch = pwQueue.splice(0, pwQueue.length).map((entry) => entry[0]).join("");
  pwQueuedBytes = 0;
  let done = false;
  const next = () => {{
    if (done) return;
    done = true;
    setImmediate(pwFlush);
  }};
  try {{
    const sock = createConnection(pwSocketPath());
    sock.setTimeout(500, () => sock.destroy());
    sock.on("error", next);
    sock.on("close", next);
    sock.end(batch);
  }} catch {{
    next();
  }}
}}

// Resolves once every queued frame was sent (or dropped), at most 0.5 s later.
function pwFlushed() {{
  if (!pwBusy) return Promise.resolve();
  return new Promise((resolve) => {{
    pwIdle.push(resolve);
    setTimeout(resolve, 500);
  }});
}}
"""


def prelude(harness: Harness, events: Sequence[str]) -> str:
    """The shared JavaScript: constants, the socket path rule, ``pwSend(payload)`` and
    ``pwFlushed()``; ``PW_EVENTS`` is the set of event names the plugin forwards."""
    return _PRELUDE.format(
        marker=MARKER,
        harness=harness,
        harness_json=json.dumps(harness),
        events_json=json.dumps(list(events)),
        max_queue=MAX_QUEUE,
        max_queue_bytes=MAX_QUEUE_BYTES,
        max_frame_bytes=MAX_FRAME_BYTES,
        serial_key_json=json.dumps(SERIAL_KEY),
        dropped_key_json=json.dumps(DROPPED_KEY),
    )


# Processes whose drop count is remembered (the oldest forgotten first): memory follows the
# forwarders that lost frames lately, not every process that ever did.
_REMEMBERED: Final = 1024


class ForwarderDrops:
    """The frames paneward's forwarders say they dropped, added up (pure).

    The supervisor shows it every ``NotifyHook`` (:meth:`seen`). A frame's
    :data:`DROPPED_KEY` is its process's running count, so each process's growth is added once:
    a frame that arrives with a smaller count than one seen before (a stale one) adds nothing.
    """

    def __init__(self) -> None:
        self.total = 0
        self._counts: dict[tuple[int | None, str | None], int] = {}

    def seen(self, pid: int | None, start_token: str | None, payload: dict[str, Any]) -> None:
        """Account for one frame of process ``(pid, start_token)`` with ``payload``."""
        count = payload.get(DROPPED_KEY)
        if type(count) is not int or count <= 0:
            return  # no drop (or not a count): the common case costs one lookup
        key = (pid, start_token)
        last = self._counts.pop(key, 0)
        self._counts[key] = max(last, count)  # re-inserted: the newest is forgotten last
        self.total += max(0, count - last)
        if len(self._counts) > _REMEMBERED:
            del self._counts[next(iter(self._counts))]


def serial(payload: dict[str, Any]) -> int | None:
    """The frame's serial in ``payload`` (see the module docstring); ``None`` when it has none
    (a file written by an older paneward) or it is not a positive integer."""
    value = payload.get(SERIAL_KEY)
    if type(value) is int and value > 0:
        return value
    return None
