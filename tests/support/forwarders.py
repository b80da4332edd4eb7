"""paneward's in-process forwarders (the OpenCode plugin and the Pi extension, JavaScript written
by :mod:`actors.core.install.forwarder_js`) run under the real ``node``, fed captured events,
sending real frames to a real Unix socket the test listens on.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Final

import anyio
import pytest

import messages
from tests.support.wrap import frame_listener

#: The real ``node`` (``.ci/run`` installs npm, which brings it).
NODE: Final = shutil.which("node")


#: Loads a forwarder as its agent does and hands it the events read from stdin.
_DRIVER: Final = """
const [kind, file] = process.argv.slice(2);
const mod = await import(file);
const lines = (await new Promise((ok) => {
  let text = "";
  process.stdin.on("data", (c) => (text += c));
  process.stdin.on("end", () => ok(text));
})).split("\\n").filter(Boolean).map((l) => JSON.parse(l));
if (kind === "opencode") {
  const hooks = await mod.PanewardPlugin({});
  const again = await mod.PanewardPlugin({});  // OpenCode may load a plugin twice
  for (const event of lines) { await hooks.event({ event }); await again.event({ event }); }
} else {
  const handlers = {};
  mod.default({ on: (name, h) => (handlers[name] ??= []).push(h) });
  for (const [name, event, sid] of lines) {
    const ctx = { sessionManager: { getSessionId: () => sid } };
    for (const h of handlers[name] ?? []) await h(event, ctx);
  }
}
"""


def need_node() -> str:
    """The real ``node``, or a skip (a failure under CI)."""
    if NODE is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed (.ci/run installs npm, which brings it)")
        pytest.skip("node is not installed")
    return NODE


async def run_forwarder(
    tmp_path: Path, kind: str, source: str, lines: list[Any], env: dict[str, str] | None = None
) -> list[messages.Inbound]:
    """Run paneward's ``kind`` forwarder (its file text ``source``) under node, fed ``lines``;
    the frames it sent to ``$PANEWARD_SOCKET``."""
    node = need_node()
    plugin = tmp_path / ("paneward.js" if kind == "opencode" else "paneward.mjs")
    plugin.write_text(source)
    driver = tmp_path / "driver.mjs"
    driver.write_text(_DRIVER)
    sock = tmp_path / "hook.sock"
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with anyio.fail_after(30):
        async with frame_listener(sock) as frames:
            done = await anyio.run_process(
                [node, os.fspath(driver), kind, os.fspath(plugin)], input=data, check=False,
                env={"PATH": os.environ.get("PATH", ""), "HOME": os.fspath(tmp_path),
                     "PANEWARD_SOCKET": os.fspath(sock), **(env or {})},
            )
            assert done.returncode == 0, done.stderr.decode()
            # node exits once its last connection closed: every frame was written; the
            # listener has read them when it saw that connection end.
            await frames.wait_for(lambda items: frames.connections > 0 and bool(items))
            await anyio.wait_all_tasks_blocked()
            return list(frames.items)
