"""The in-process forwarders' JavaScript (actors/core/install/forwarder_js.py), shared by the
OpenCode plugin and the Pi extension, under the real ``node``: the queue bounded in bytes with the
daemon away and its losses reported, the daemon counting them, the socket path equal to
``actors/core/paths.py``'s; ``install-hooks`` writing them beside the user's own files and never
over a foreign file of the same name.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Final

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import messages
from actors.core import paths
from actors.harnesses.opencode import install as opencode_install
from actors.harnesses.pi import install as pi_install
from messages import NotifyHook
from tests.support.captures import PID, TOKEN
from tests.support.forwarders import need_node
from tests.support.install import files, run_install
from tests.support.wrap import frame_listener

_BURST_DRIVER: Final = """
const [file, count, size] = process.argv.slice(2);
const mod = await import(file);
const handlers = {};
mod.default({ on: (name, h) => (handlers[name] ??= []).push(h) });
const fire = (name, sid) => Promise.all((handlers[name] ?? []).map(
  (h) => h({ type: name }, { sessionManager: { getSessionId: () => sid } })));
const heap = () => { globalThis.gc(); return process.memoryUsage().heapUsed; };
const before = heap();
// No I/O happens within the burst: everything it sends waits in the forwarder's queue.
for (let i = 0; i < Number(count); i++) {
  await fire("agent_start", `${i}:`.padEnd(Number(size), "x"));
}
const retained = heap() - before;
await fire("session_shutdown", "s-away");  // settles once the queue is drained (or 0.5 s)
process.stdout.write(JSON.stringify({ retained }) + "\\n");
for await (const _ of process.stdin) break;  // the test's listener is up
await fire("agent_start", "s-back");
await fire("session_shutdown", "s-back");
process.exit(0);
"""


async def test_the_forwarders_queue_is_bounded_in_bytes_and_its_losses_reported(
    tmp_path: Path,
) -> None:
    """The daemon away, an agent sends 300 events with 100 KB session ids: what the forwarder
    keeps for later (the node process's heap after a full GC) stays within
    ``MAX_QUEUE_BYTES`` (plus the one batch in flight), not 256 frames; the frames it drops
    are counted, and the first frame that reaches the daemon again says how many
    (``pw_dropped``; its ``pw_serial`` skips them too)."""
    from actors.core.install.forwarder_js import DROPPED_KEY, MAX_QUEUE_BYTES

    node = need_node()
    plugin = tmp_path / "paneward.mjs"
    plugin.write_text(pi_install.extension_text())
    driver = tmp_path / "burst.mjs"
    driver.write_text(_BURST_DRIVER)
    sock = tmp_path / "hook.sock"  # nobody listens there until the burst is over
    count, size = 300, 100_000
    argv = [node, "--expose-gc", os.fspath(driver), os.fspath(plugin), str(count), str(size)]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.fspath(tmp_path),
           "PANEWARD_SOCKET": os.fspath(sock)}
    with anyio.fail_after(60):
        async with await anyio.open_process(argv, env=env) as process:
            assert process.stdout is not None and process.stdin is not None
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
            retained = json.loads(line)["retained"]
            async with frame_listener(sock) as frames:
                await process.stdin.send(b"go\n")
                assert await process.wait() == 0
                await frames.wait_for(lambda items: len(items) >= 2)
    # The queue, the batch in flight (the first frame) and the heap's own noise (~0.1 MB):
    # far less than the 256 frames (26 MB) a bound by count alone keeps.
    assert retained <= MAX_QUEUE_BYTES + 5 * size, retained
    back = [f for f in frames.items if isinstance(f, NotifyHook)
            and f.payload["session_id"] == "s-back"]
    assert [f.payload["hook_event_name"] for f in back] == ["agent_start", "session_shutdown"]
    dropped = back[0].payload[DROPPED_KEY]
    # At least every frame beyond what MAX_QUEUE_BYTES holds was dropped, and counted.
    assert count - 1 - MAX_QUEUE_BYTES // size <= dropped < count
    assert back[0].payload["pw_serial"] == count + 2


async def test_the_daemon_counts_what_the_forwarders_dropped(tmp_path: Path) -> None:
    """Frames of paneward's forwarders carry how many frames their process dropped so far
    (``pw_dropped``); the daemon adds each process's growth to ``supervisor.forwarder_dropped``,
    which the status line's ``drops`` includes. Frames arrive out of order across connections
    of one process at most as a stale count: a smaller count adds nothing."""
    from actors.core.install.forwarder_js import DROPPED_KEY
    from tests.support.daemon import DaemonProcess, raw_send

    now = time.time_ns() // 1_000_000
    def frame(pid: int, token: str, serial: int, dropped: int | None) -> bytes:
        payload: dict[str, Any] = {"hook_event_name": "agent_start", "session_id": f"s{pid}",
                                   "pw_serial": serial}
        if dropped is not None:
            payload[DROPPED_KEY] = dropped
        at = now + serial
        hook = NotifyHook(harness="pi", payload=payload, at_ms=at, observed_at_ms=at,
                          pid=pid, start_token=token)
        return messages.encode(hook) + b"\n"

    other = PID + 1_000_000  # a process that is not running: its frames are counted all the same
    frames = [frame(PID, TOKEN, 1, None), frame(PID, TOKEN, 5, 3), frame(PID, TOKEN, 4, 2),
              frame(other, "7", 9, 4), frame(PID, TOKEN, 9, 6)]
    with anyio.fail_after(60):
        async with DaemonProcess(tmp_path / "state") as daemon:
            await raw_send(daemon.hook_socket, b"".join(frames))
            await daemon.wait_delivered(len(frames))
            counters = await daemon.counters()
            code, table, _ = await _paneward(daemon.env, "status")
    assert counters["supervisor"]["forwarder_dropped"] == 6 + 4
    assert code == 0
    [summary] = [line for line in table.splitlines() if line.startswith("messages ")]
    assert " · drops 10 · " in summary


async def _paneward(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    from tests.support.daemon import PANEWARD

    done = await anyio.run_process([os.fspath(PANEWARD), *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.parametrize(
    "env",
    [
        {"PANEWARD_SOCKET": "/s/explicit.sock"},
        {"XDG_RUNTIME_DIR": "/run/u", "PANEWARD_STATE_DIR": "/st"},
        {"PANEWARD_STATE_DIR": "~/pw-state", "XDG_STATE_HOME": "/xs"},
        {"XDG_STATE_HOME": "/xs"},
        {"PANEWARD_SOCKET": "", "XDG_RUNTIME_DIR": ""},
        {},
    ],
)
def test_the_forwarders_socket_path_is_paneward_hooks(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = need_node()
    script = opencode_install.plugin_text() + "\nconsole.log(pwSocketPath());\n"
    (tmp_path / "p.mjs").write_text(script)
    full = {"PATH": os.environ.get("PATH", ""), "HOME": "/h", **env}
    out = subprocess.run([node, os.fspath(tmp_path / "p.mjs")], env=full, capture_output=True,
                         text=True, check=True).stdout.strip()
    for name in ("PANEWARD_SOCKET", "XDG_RUNTIME_DIR", "PANEWARD_STATE_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in full.items():
        monkeypatch.setenv(name, value)
    assert out == os.path.normpath(paths.socket_path())


@pytest.mark.parametrize(
    ("harness", "where"),
    [
        ("opencode", Path(".config/opencode/plugin/paneward.js")),
        ("pi", Path(".pi/agent/extensions/paneward.ts")),
    ],
)
def test_in_process_forwarders_install_beside_the_users_files(
    home: Path, harness: str, where: Path
) -> None:
    directory = home / where.parent
    directory.mkdir(parents=True)
    (directory / "mine.js").write_text("export const Mine = async () => ({});\n")
    before = files(home)
    assert run_install(harness) == 0
    written = (home / where).read_text()
    assert written.startswith("// paneward: forwards agent events")
    text = opencode_install.plugin_text() if harness == "opencode" else pi_install.extension_text()
    assert written == text
    assert run_install(harness) == 0 and (home / where).read_text() == text  # idempotent
    assert run_install(harness, "--uninstall") == 0
    assert files(home) == before  # deleted again; the user's plugin untouched


def test_a_foreign_file_of_the_same_name_is_never_replaced(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = home / ".config" / "opencode" / "plugin" / "paneward.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("// someone else's\n")
    assert run_install("opencode") == 1
    assert "is not paneward's" in capsys.readouterr().err
    assert plugin.read_text() == "// someone else's\n"
    assert run_install("opencode", "--uninstall") == 0
    assert plugin.read_text() == "// someone else's\n"
