"""Gemini CLI, OpenCode, Pi and Hermes Agent (interactive) from their real captures
(tests/fixtures/harnesses-3/), what each harness can
prove as the reducer enforces it, and install-hooks for each on a realistic existing config.

The OpenCode plugin and the Pi extension are paneward's own JavaScript: here they run under the
real ``node`` with the captured events, sending real frames to a real Unix socket. The Codex hook
trust hash is checked against the real Codex 0.171.0 (``codex app-server`` ``hooks/list``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

import messages
from actors.cli import commands
from actors.cli import main as cli
from actors.core import paths
from actors.core.harness import PROVABLE, axis_of
from actors.core.reducer import UNLIMITED_SOURCES, initial_state, reduce
from actors.harnesses import catalog
from actors.harnesses.codex import install as codex_install
from actors.harnesses.gemini import hooks as gemini_hooks
from actors.harnesses.hermes import hooks as hermes_hooks
from actors.harnesses.hermes import install as hermes_install
from actors.harnesses.opencode import hooks as opencode_hooks
from actors.harnesses.opencode import install as opencode_install
from actors.harnesses.pi import install as pi_install
from messages import HookHint, NotifyHook, ProgramStatus, SessionKey, Transition
from tests.support.daemon import start_token
from tests.support.reference_model import SessionTable
from tests.support.wrap import frame_listener

FIXTURES: Final = Path(__file__).parent / "fixtures" / "harnesses-3"
EXE: Final = "/opt/pw bin/paneward"  # a space: every command must be quoted
PID: Final = os.getpid()
TOKEN: Final = start_token(PID)
NODE: Final = shutil.which("node")


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open() as handle:
        for line in handle:
            yield json.loads(line)


def _replay(hooks: list[NotifyHook]) -> list[tuple[str, str, str | None]]:
    """Every transition the hooks publish: (presence, turn, attention kind)."""
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    out: list[tuple[str, str, str | None]] = []
    for hook in hooks:
        for t in table.apply(hook):
            kind = t.after.attention.kind if t.after.attention else None
            out.append((t.after.presence, t.after.turn, kind))
    return out


def _captured_hooks(harness: str, path: Path, installed: tuple[str, ...]) -> list[NotifyHook]:
    """The captured hook payloads paneward's installed hooks would have received, as the hook
    client frames them (owner: the live test process, standing in for the recorded parent)."""
    out = []
    for record in _lines(path):
        payload = record["stdin"]
        if payload["hook_event_name"] not in installed:
            continue
        at = int(record["ts"] * 1000)
        out.append(NotifyHook(harness=harness, payload=payload, at_ms=at, observed_at_ms=at,  # type: ignore[arg-type]
                              pid=PID, start_token=TOKEN))
    return out


# ---------------------------------------------------------------------------------- Gemini


def test_gemini_capture_replays_to_the_turns_the_screen_showed() -> None:
    hooks = _captured_hooks(
        "gemini", FIXTURES / "gemini" / "interactive_hooks.jsonl", gemini_hooks.INSTALLED_EVENTS
    )
    # 6 of the 11 events Gemini sent are installed: no AfterModel (41 calls, one per chunk).
    assert [h.payload["hook_event_name"] for h in hooks].count("AfterModel") == 0
    assert _replay(hooks) == [
        ("running", "unknown", None),  # SessionStart
        ("running", "working", None),  # TOOL
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # DANGER
        ("running", "needs_input", "needs_input"),  # Notification ToolPermission
        ("running", "working", None),  # AfterTool: the answer has no event of its own
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # SLOW, then Esc:
        # an AfterAgent like any other (no flag): shown as done, as Gemini's PROOFS declares.
        ("running", "idle", "turn_done"),
        ("persisted", "unknown", "turn_done"),  # SessionEnd (twice: the second changes nothing)
    ]


def test_gemini_permission_reason_and_other_notifications() -> None:
    permission = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2, payload={
        "hook_event_name": "Notification", "session_id": "s", "notification_type": "ToolPermission",
        "message": "Tool Confirm Shell Command requires execution",
        "details": {"type": "exec", "command": "rm -rf ./junkdir"},
    })
    hint = gemini_hooks.normalize(permission)
    assert isinstance(hint, HookHint)
    assert (hint.hint, hint.summary, hint.source) == (
        "needs_input", "permission: run_shell_command: rm -rf ./junkdir", "gemini_hook"
    )
    other = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2, payload={
        "hook_event_name": "Notification", "session_id": "s", "notification_type": "Other"})
    assert isinstance(hint := gemini_hooks.normalize(other), HookHint) and hint.hint == "info"
    chunk = NotifyHook(harness="gemini", at_ms=10**12 * 2, observed_at_ms=10**12 * 2,
                       payload={"hook_event_name": "AfterModel", "session_id": "s"})
    assert isinstance(gemini_hooks.normalize(chunk), messages.Unmapped)


# ---------------------------------------------------------------------------------- Hermes


def test_hermes_capture_replays_to_the_turns_the_screen_showed() -> None:
    hooks = _captured_hooks(
        "hermes", FIXTURES / "hermes" / "hooks.jsonl", hermes_hooks.INSTALLED_EVENTS
    )
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    seen: list[Transition] = []
    for hook in hooks:
        seen += table.apply(hook)
    assert [(t.after.presence, t.after.turn, t.after.attention and t.after.attention.kind)
            for t in seen] == [
        ("running", "unknown", None),  # on_session_start, with the first prompt
        ("running", "working", None),  # pre_llm_call (TOOL)
        ("running", "idle", "turn_done"),  # on_session_end completed
        ("running", "working", None),  # pre_llm_call (DANGER)
        ("running", "needs_input", "needs_input"),  # pre_approval_request surface cli
        ("running", "working", None),  # post_approval_response once
        ("running", "idle", "turn_done"),
        ("running", "working", None),  # SLOW, then Ctrl+C:
        ("running", "idle", None),  # on_session_end interrupted (and completed): no turn_done
        ("persisted", "unknown", None),  # on_session_finalize
    ]
    needs = next(t for t in seen if t.after.turn == "needs_input")
    assert needs.after.attention is not None
    assert needs.after.attention.reason == "permission: terminal: rm -rf ./junkdir"
    # The approval hooks carry an empty session_id: their session is extra.session_key.
    assert {t.key for t in seen} == {SessionKey("hermes", "20261201_090257_aa66ac")}
    # The `smart` surface (Hermes's own model reviewing) is not a wait for the user.
    smart = next(h for h in hooks if h.payload["extra"].get("surface") == "smart")
    assert isinstance(hint := hermes_hooks.normalize(smart), HookHint) and hint.hint == "info"


# ---------------------------------------------------------------------------------- OpenCode and
# Pi: paneward's JavaScript under node, real frames on a real socket

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


def _need_node() -> str:
    if NODE is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed (.ci/run installs npm, which brings it)")
        pytest.skip("node is not installed")
    return NODE


async def _run_forwarder(
    tmp_path: Path, kind: str, source: str, lines: list[Any], env: dict[str, str] | None = None
) -> list[messages.Inbound]:
    """Run paneward's ``kind`` forwarder (its file text ``source``) under node, fed ``lines``;
    the frames it sent to ``$PANEWARD_SOCKET``."""
    node = _need_node()
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


def _opencode_events() -> list[dict[str, Any]]:
    return [r["event"] for r in _lines(FIXTURES / "opencode" / "tui_plugin.jsonl")
            if r.get("kind") == "event"]


async def test_opencode_plugin_forwards_the_captured_events_once_per_run(tmp_path: Path) -> None:
    frames = await _run_forwarder(
        tmp_path, "opencode", opencode_install.plugin_text(), _opencode_events()
    )
    hooks = [f for f in frames if isinstance(f, NotifyHook)]
    assert len(hooks) == len(frames)
    # Its own pid and start token (the plugin is the owner), the frame the hook client builds.
    assert {(h.harness, h.pid is not None, h.start_token is not None) for h in hooks} == {
        ("opencode", True, True)
    }
    events = [(h.payload["hook_event_name"], h.payload.get("status"), h.payload.get("error"))
              for h in hooks]
    # Loaded twice, each event is still sent once; the repeated idle after the Esc is not sent.
    assert events == [
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("permission.asked", None, None),
        ("permission.replied", None, None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.status", "idle", None),
        ("session.idle", None, None),
        ("session.status", "busy", None),
        ("session.status", "busy", None),
        ("session.error", None, "MessageAbortedError"),
        ("session.status", "idle", None),
        ("session.idle", None, "MessageAbortedError"),
        ("session.status", "idle", None),
    ]
    assert {h.payload["hook_event_name"] for h in hooks} <= set(opencode_hooks.INSTALLED_EVENTS)
    # One count per process across both loads: every frame its own serial.
    assert [h.payload["pw_serial"] for h in hooks] == list(range(1, len(hooks) + 1))
    turns = [
        ("running", "working", None),
        ("running", "needs_input", "needs_input"),  # status stays busy: the wait is its own
        ("running", "working", None),
        ("running", "idle", "turn_done"),
        ("running", "working", None),
        ("running", "idle", None),  # the Esc: MessageAbortedError then idle, no turn_done
    ]
    assert _replay(hooks) == turns
    # The same events all in one millisecond (node sends them that fast): the second turn's
    # busy is not taken for the first turn's, and a frame read twice still counts once.
    at = hooks[0].at_ms
    same_ms = [msgspec.structs.replace(h, at_ms=at, observed_at_ms=at) for h in hooks]
    assert _replay(same_ms) == turns
    assert _replay([h for h in same_ms for _ in (0, 1)]) == turns
    asked = next(h for h in hooks if h.payload["hook_event_name"] == "permission.asked")
    hint = opencode_hooks.normalize(asked)
    assert isinstance(hint, HookHint) and hint.summary == "permission: bash: echo hi"


async def test_opencode_exit_ends_every_session_it_saw(tmp_path: Path) -> None:
    events = [
        {"id": "e1", "type": "session.status",
         "properties": {"sessionID": "ses_a", "status": {"type": "busy"}}},
        {"id": "e2", "type": "session.idle", "properties": {"sessionID": "ses_a"}},
        {"id": "e3", "type": "message.updated", "properties": {"sessionID": "ses_a"}},
        {"id": "e4", "type": "server.instance.disposed", "properties": {"directory": "/w"}},
    ]
    frames = await _run_forwarder(tmp_path, "opencode", opencode_install.plugin_text(), events)
    assert [f.payload for f in frames if isinstance(f, NotifyHook)] == [
        {"hook_event_name": "session.status", "session_id": "ses_a", "status": "busy",
         "pw_serial": 1},
        {"hook_event_name": "session.idle", "session_id": "ses_a", "pw_serial": 2},
        {"hook_event_name": "server.instance.disposed", "session_id": "ses_a", "pw_serial": 3},
    ]


def _pi_events() -> list[list[Any]]:
    """The captured headless TOOL run (event names in order), then an interactive run that
    the user interrupts (its last message stops as ``aborted``)."""
    out: list[list[Any]] = []
    for record in _lines(FIXTURES / "pi" / "extension.jsonl"):
        event: dict[str, Any] = {"type": record["ev"]}
        if "toolName" in record:
            event["toolName"] = record["toolName"]
        if record["ev"] == "agent_end":
            event["messages"] = [{"role": "assistant", "stopReason": "stop"}]
        out.append([record["ev"], event, record["session_id"]])
    sid = "s-esc"
    out += [
        ["session_start", {"type": "session_start", "reason": "startup"}, sid],
        ["agent_start", {"type": "agent_start"}, sid],
        ["agent_end", {"type": "agent_end", "messages": [{"stopReason": "aborted"}]}, sid],
    ]
    return out


async def test_pi_extension_forwards_agent_events(tmp_path: Path) -> None:
    frames = await _run_forwarder(tmp_path, "pi", pi_install.extension_text(), _pi_events())
    hooks = [f for f in frames if isinstance(f, NotifyHook)]
    assert [h.payload["hook_event_name"] for h in hooks] == [
        "session_start", "agent_start", "tool_execution_start", "tool_execution_end",
        "agent_end", "session_shutdown", "session_start", "agent_start", "agent_end",
    ]
    assert hooks[2].payload["tool_name"] == "bash"
    assert hooks[-1].payload["stop_reason"] == "aborted"
    table = SessionTable(catalog.normalize, catalog.PROOF_TABLE)
    shown = [
        (str(t.key), t.after.presence, t.after.turn, t.after.attention and t.after.attention.kind)
        for h in hooks for t in table.apply(h)
    ]
    tool_run = "pi:01a230d9-f3b4-7302-873b-6db83e2644a1"
    assert shown == [
        (tool_run, "running", "unknown", None),
        (tool_run, "running", "working", None),
        (tool_run, "running", "idle", "turn_done"),
        (tool_run, "persisted", "unknown", "turn_done"),  # session_shutdown
        ("pi:s-esc", "running", "unknown", None),
        ("pi:s-esc", "running", "working", None),
        ("pi:s-esc", "running", "idle", None),  # aborted: not a completion
    ]


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
    from actors.core.forwarder_js import DROPPED_KEY, MAX_QUEUE_BYTES

    node = _need_node()
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
    from actors.core.forwarder_js import DROPPED_KEY
    from tests.support.daemon import Daemon, raw_send

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
        async with Daemon(tmp_path / "state") as daemon:
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
    node = _need_node()
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


# ---------------------------------------------------------------------------------- what each
# harness can prove


def test_every_harness_declares_every_value_once_with_known_sources() -> None:
    known = set(messages.common.Source.__args__)  # type: ignore[attr-defined]
    for spec in catalog.SPECS.values():
        assert [p.value for p in spec.proofs] == list(PROVABLE), spec.id
        for proof in spec.proofs:
            assert set(proof.sources) <= known, (spec.id, proof)
            assert proof.how, (spec.id, proof.value)
        assert catalog.PROOF_TABLE[spec.id] == spec.proofs_by_value()
    assert [axis_of(v) for v in PROVABLE] == [
        "presence", "turn", "turn", "turn", "attention", "attention"
    ]


def _hint(key: SessionKey, source: str, hint: str, at: int, **extra: Any) -> HookHint:
    return HookHint(key=key, source=source, event="e", hint=hint,  # type: ignore[arg-type]
                    at_ms=10**12 * 2 + at, observed_at_ms=10**12 * 2 + at, **extra)


def _published(key: SessionKey, *steps: Any, proof_table: Any = catalog.PROOF_TABLE) -> Any:
    state = initial_state(key)
    for message in steps:
        state = reduce(state, message, proof_table).state
    return state.activity


def test_a_value_a_harness_cannot_prove_stays_unknown() -> None:
    pi = SessionKey("pi", "p1")
    start = _hint(pi, "pi_extension", "working", 0, pid=PID, start_token=TOKEN)
    wait = _hint(pi, "pi_extension", "needs_input", 5, pid=PID, start_token=TOKEN)
    # Pi has no permission event: a needs_input claimed for it is not shown as proven ...
    shown = _published(pi, start, wait)
    assert (shown.presence, shown.turn, shown.attention) == ("running", "unknown", None)
    # ... where the same messages, with no declaration handed in, would show it.
    assert _published(pi, start, wait, proof_table=None).turn == "needs_input"

    # Gemini emits no OSC 7501: a status record for its pane proves nothing about its turn.
    gemini = SessionKey("gemini", "g1")
    at = 10**12 * 2 + 9
    osc = ProgramStatus(state="blocked", kind="permission", key=gemini, at_ms=at,
                        observed_at_ms=at)
    shown = _published(gemini, _hint(gemini, "gemini_hook", "working", 0, pid=PID,
                                     start_token=TOKEN), osc)
    assert (shown.turn, shown.attention) == ("unknown", None)

    # Cursor's hooks name no owner: even a payload claiming one does not prove presence.
    cursor = SessionKey("cursor", "c1")
    shown = _published(cursor, _hint(cursor, "cursor_hook", "working", 0, pid=PID,
                                     start_token=TOKEN))
    assert shown.presence == "persisted"
    # A source a harness does not name cannot open its turn_done either.
    codex = SessionKey("codex", "x1")
    done = _published(codex, _hint(codex, "codex_hook", "working", 0, pid=PID, start_token=TOKEN),
                      _hint(codex, "cursor_hook", "completed", 5))
    assert (done.turn, done.attention) == ("unknown", None)


def test_process_and_host_evidence_is_never_limited() -> None:
    assert {"pid_probe", "pty_host", "host"} <= UNLIMITED_SOURCES
    pi = SessionKey("pi", "p1")
    at = 10**12 * 2
    gone = messages.ProcessGone(pid=PID, start_token=TOKEN, at_ms=at + 9, observed_at_ms=at + 9)
    shown = _published(pi, _hint(pi, "pi_extension", "working", 0, pid=PID, start_token=TOKEN),
                       gone)
    assert shown.presence == "persisted"
    assert shown.attention is not None and shown.attention.kind == "failed"


def test_status_proofs_prints_each_harness_and_what_it_cannot_prove(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["status", "--proofs", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert list(table) == list(catalog.SPECS)
    pi = {p["value"]: p for p in table["pi"]["proves"]}
    assert pi["needs_input"]["sources"] == []
    assert "no permission" in pi["needs_input"]["how"]
    gemini = {p["value"]: p for p in table["gemini"]["proves"]}
    assert "Esc" in gemini["turn_done"]["how"]
    assert cli.main(["status", "--proofs"]) == 0
    text = capsys.readouterr().out
    assert "  turn      needs_input cannot prove: Pi has no permission prompt" in text
    assert commands.format_proofs(table) == text.rstrip("\n")


# ---------------------------------------------------------------------------------- install-hooks


def _run(*args: str) -> int:
    return cli.main(["install-hooks", *args, "--executable", EXE])


def _files(directory: Path) -> dict[str, bytes]:
    return {
        os.fspath(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".paneward-backup-" not in p.name
    }


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", os.fspath(tmp_path / "home"))
    for name in ("GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "PI_CODING_AGENT_DIR", "HERMES_HOME",
                 "PANEWARD_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_gemini_install_on_a_real_settings_file_round_trips(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gemini = home / ".gemini"
    gemini.mkdir()
    # The lab's settings.json, with the user's own loggers on 11 events.
    original = (FIXTURES / "gemini" / "settings.json.written").read_bytes()
    (gemini / "settings.json").write_bytes(original)
    assert _run("gemini") == 0
    said = capsys.readouterr().out
    assert "without asking" in said and "only the events paneward needs" in said
    data = json.loads((gemini / "settings.json").read_text())
    command = "'/opt/pw bin/paneward' hook --harness gemini --owner parent"
    for event in gemini_hooks.INSTALLED_EVENTS:
        groups = data["hooks"][event]
        assert groups[-1] == {"hooks": [{"name": "paneward", "type": "command",
                                         "command": command, "timeout": 5000}]}
        assert groups[0]["hooks"][0]["name"] == f"log-{event}"  # the user's, first and kept
    assert "paneward" not in json.dumps(data["hooks"]["AfterModel"])
    assert data["hooksConfig"] == {"enabled": True, "notifications": True}
    before = _files(gemini)
    assert _run("gemini") == 0
    assert _files(gemini) == before  # idempotent
    assert _run("gemini", "--uninstall") == 0
    assert (gemini / "settings.json").read_bytes() == original


def test_gemini_install_enables_hooks_and_uninstall_removes_only_that(home: Path) -> None:
    assert _run("gemini") == 0
    settings = home / ".gemini" / "settings.json"
    assert json.loads(settings.read_text())["hooksConfig"] == {"enabled": True}
    text = settings.read_text().replace('"hooksConfig"', '"model": "m",\n  "hooksConfig"')
    settings.write_text(text)  # the user adds a setting after the install
    assert _run("gemini", "--uninstall") == 0
    assert json.loads(settings.read_text()) == {"model": "m"}


HERMES_CONFIG: Final = """\
# Hermes settings (mine)
model:
  provider: custom
  base_url: http://127.0.0.1:9/v1   # the lab's mock
  default: mock-model

hooks:
  # my audit logger
  pre_tool_call:
    - command: /usr/local/bin/audit pre
      timeout: 5
      matcher: terminal
  on_session_end:
    - command: "/usr/local/bin/audit end"
display:
  compact: true
"""


def test_hermes_install_merges_into_the_users_hooks_and_round_trips(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hermes = home / ".hermes"
    hermes.mkdir()
    config = hermes / "config.yaml"
    config.write_text(HERMES_CONFIG)
    assert _run("hermes") == 0
    said = capsys.readouterr().out
    assert "Allow this hook to run? [y/N]" in said and "HERMES_ACCEPT_HOOKS=1" in said
    import yaml

    data = yaml.safe_load(config.read_text())
    command = "'/opt/pw bin/paneward' hook --harness hermes --owner parent"
    mine = {"command": command, "timeout": 10}
    assert data["hooks"]["pre_tool_call"] == [
        {"command": "/usr/local/bin/audit pre", "timeout": 5, "matcher": "terminal"}, mine
    ]
    assert data["hooks"]["on_session_end"] == [{"command": "/usr/local/bin/audit end"}, mine]
    assert list(data["hooks"]) == [
        "pre_tool_call", "on_session_end",
        *[e for e in hermes_hooks.INSTALLED_EVENTS if e not in ("pre_tool_call", "on_session_end")],
    ]
    assert data["display"] == {"compact": True}
    text = config.read_text()
    assert "# my audit logger" in text and "# the lab's mock" in text  # comments kept
    # What Hermes itself reads: its parser takes our entries, commands shlex-split to argv.
    assert all(isinstance(e, dict) and e.get("command") for v in data["hooks"].values()
               for e in v)
    first = config.read_bytes()
    assert _run("hermes") == 0
    assert config.read_bytes() == first  # idempotent
    assert _run("hermes", "--uninstall") == 0
    assert config.read_text() == HERMES_CONFIG


def test_hermes_install_without_hooks_and_refusals(home: Path) -> None:
    from actors.core.config_edit import HookTarget, InstallError

    t = HookTarget(EXE)
    text, _ = hermes_install.install_config("model: {default: m}\n", t)
    assert text is not None and text.startswith("model: {default: m}\n\nhooks:  # added by")
    back, _ = hermes_install.uninstall_config(text)
    assert back == "model: {default: m}\n"
    with pytest.raises(InstallError, match="inline"):
        hermes_install.install_config("hooks: {}\n", t)
    with pytest.raises(InstallError, match="not valid YAML"):
        hermes_install.install_config("hooks: [\n", t)
    with pytest.raises(InstallError, match="inline"):
        hermes_install.install_config("hooks:\n  pre_llm_call: []\n", t)
    # A hermes hook from an older release (no --owner) is rewritten in place.
    old = 'hooks:\n  pre_llm_call:\n    - command: "/old/paneward hook --harness hermes"\n'
    new, _ = hermes_install.install_config(old, t, events=("pre_llm_call",))
    assert new == (
        "hooks:\n  pre_llm_call:\n"
        '    - command: "\'/opt/pw bin/paneward\' hook --harness hermes --owner parent"\n'
    )


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
    before = _files(home)
    assert _run(harness) == 0
    written = (home / where).read_text()
    assert written.startswith("// paneward: forwards agent events")
    text = opencode_install.plugin_text() if harness == "opencode" else pi_install.extension_text()
    assert written == text
    assert _run(harness) == 0 and (home / where).read_text() == text  # idempotent
    assert _run(harness, "--uninstall") == 0
    assert _files(home) == before  # deleted again; the user's plugin untouched


def test_a_foreign_file_of_the_same_name_is_never_replaced(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = home / ".config" / "opencode" / "plugin" / "paneward.js"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("// someone else's\n")
    assert _run("opencode") == 1
    assert "is not paneward's" in capsys.readouterr().err
    assert plugin.read_text() == "// someone else's\n"
    assert _run("opencode", "--uninstall") == 0
    assert plugin.read_text() == "// someone else's\n"


# ---------------------------------------------------------------------------------- Codex trust


def test_codex_trusted_hash_is_codexs_command_hook_hash() -> None:
    # Values Codex 0.171.0 reported as currentHash (hooks/list) for these exact entries.
    command = "/usr/local/bin/paneward hook --harness codex --owner parent"
    assert codex_install.trusted_hash("PreToolUse", command, 10) == (
        "sha256:b60c6007e512fd16b87200587431eb0acdc5709904e04b5dad7db95981c583e4"
    )
    assert codex_install.trusted_hash("SessionEnd", command, 3) == (
        "sha256:39068bac0aa8f80ad81f7c30bbf3179a11d4083c8a7decbb168aa45df17fac29"
    )


USER_CODEX: Final = """\
model = "gpt-mock"   # mine

[hooks.state."/elsewhere/hooks.json:stop:0:0"]
trusted_hash = "sha256:0000"
"""


def test_codex_trust_is_recorded_for_paneward_only_and_removed_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    codex = tmp_path / "codex-home"
    codex.mkdir()
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(tmp_path / "state"))
    (codex / "config.toml").write_text(USER_CODEX)
    user_hooks = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    (codex / "hooks.json").write_text(json.dumps(user_hooks))
    assert _run("codex") == 0
    said = capsys.readouterr().out
    assert '"Hooks need review"' in said and "--trust" in said
    assert "# paneward-trust" not in (codex / "config.toml").read_text()
    assert _run("codex", "--trust") == 0
    import tomllib

    state = tomllib.loads((codex / "config.toml").read_text())["hooks"]["state"]
    path = os.path.realpath(codex / "hooks.json")
    # Ours only: the user's Stop hook (group 0) stays for them to review; ours is group 1.
    assert f"{path}:stop:0:0" not in state
    assert state[f"{path}:stop:1:0"]["trusted_hash"].startswith("sha256:")
    assert len([k for k in state if k.startswith(path)]) == 7
    assert state["/elsewhere/hooks.json:stop:0:0"] == {"trusted_hash": "sha256:0000"}
    again = (codex / "config.toml").read_bytes()
    assert _run("codex", "--trust") == 0 and (codex / "config.toml").read_bytes() == again
    assert _run("codex", "--uninstall") == 0
    assert (codex / "config.toml").read_text() == USER_CODEX
    assert json.loads((codex / "hooks.json").read_text()) == user_hooks


def test_trust_is_codex_only(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("gemini", "--trust") == 1
    assert "--trust is only for Codex" in capsys.readouterr().err


def _codex() -> Path:
    prefix = os.environ.get("PANEWARD_AGENT_PREFIX") or os.fspath(
        Path.home() / ".cache" / "paneward-npm"
    )
    binary = Path(prefix) / "node_modules" / ".bin" / "codex"
    if not binary.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"codex not installed under {prefix}")
        pytest.skip(f"codex not installed under {prefix}")
    return binary


def _hooks_list(codex_home: Path, cwd: Path) -> list[dict[str, Any]]:
    """``hooks/list`` from the real ``codex app-server`` (JSON-RPC over stdio)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.fspath(codex_home.parent),
           "CODEX_HOME": os.fspath(codex_home)}
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"clientInfo": {"name": "paneward-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [os.fspath(cwd)]}},
    ]
    with subprocess.Popen([os.fspath(_codex()), "app-server"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                          cwd=cwd, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for request in requests:
                proc.stdin.write(json.dumps(request) + "\n")
                proc.stdin.flush()
            for line in proc.stdout:
                reply = json.loads(line)
                if reply.get("id") == 2:
                    hooks: list[dict[str, Any]] = reply["result"]["data"][0]["hooks"]
                    return hooks
        finally:
            proc.kill()
    raise AssertionError("codex app-server ended without answering hooks/list")


@pytest.mark.timeout(120)
def test_the_real_codex_trusts_paneward_entries_after_install_trust(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    codex_home = tmp_path / "home" / ".codex"
    codex_home.mkdir(parents=True)
    work = tmp_path / "work"
    work.mkdir()
    (codex_home / "hooks.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]}}
    ))
    monkeypatch.setenv("CODEX_HOME", os.fspath(codex_home))
    monkeypatch.setenv("PANEWARD_STATE_DIR", os.fspath(tmp_path / "state"))
    assert _run("codex") == 0
    untrusted = _hooks_list(codex_home, work)
    ours = [h for h in untrusted if "hook --harness codex" in h["command"]]
    assert len(ours) == 7 and {h["trustStatus"] for h in ours} == {"untrusted"}
    # Our hash is Codex's own, for every entry (SessionEnd included: written with 3 s).
    expected = codex_install.trust_keys(
        (codex_home / "hooks.json").read_text(), [os.path.realpath(codex_home / "hooks.json")]
    )
    assert {h["key"]: h["currentHash"] for h in ours} == expected
    assert _run("codex", "--trust") == 0
    trusted = {h["key"]: h["trustStatus"] for h in _hooks_list(codex_home, work)}
    assert {trusted[k] for k in expected} == {"trusted"}
    user = next(h for h in untrusted if h["command"] == "say done")
    assert trusted[user["key"]] == "untrusted"  # the user's own hook still asks

