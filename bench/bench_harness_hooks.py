"""Gemini CLI, Hermes, OpenCode and Pi: hook fired -> pane option visible, and the hook client's
start-up where Gemini waits for it.

Run: ``.venv/bin/python bench/bench_harness_hooks.py [--events 200] [--runs 40]``

1. Start-up of one synchronous Gemini hook, as Gemini runs it: ``paneward hook --harness gemini
   --owner parent`` with a captured ``BeforeAgent`` payload on stdin, a real hook listener
   listening, against ``<venv python> -c pass`` given the same stdin, interleaved in the same
   run (medians; the ratio is the house budget's, <= 1.25x the bare interpreter). Gemini runs its
   hooks one after another and waits for each, so this is what paneward adds to every turn.
2. Hook fired -> pane option visible to another tmux client, p50/p99 over N events per harness,
   through a real ``paneward run --tmux`` daemon on a private tmux server (the same measure as
   Claude Code's in bench/bench_tmux.py part 3). The hook's owner is a pane's own process:
   - Gemini and Hermes (command hooks, ``--owner parent``): the pane runs a small Python process
     that, per line written to its FIFO, starts ``paneward hook`` as its child with the captured
     payload on stdin -- as the CLI does; timed from just before the line is written;
   - OpenCode and Pi (in-process): the pane runs ``node`` with paneward's real plugin /
     extension loaded, which, per line written to its FIFO, calls the plugin's handler with the
     event -- as the CLI does; timed from just before the line is written.
   The turn alternates working / done (every event is a transition). "Visible" is read by a
   control-mode client polling ``show-options -p`` every 1 ms. The baseline, in the same run and
   the same way: Claude Code's command hook (``--owner env:CLAUDE_PID``, UserPromptSubmit / Stop),
   whose figure is the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.core.tmux.protocol import TmuxTarget, quote
from actors.harnesses.catalog import HOOKS
from actors.harnesses.opencode.install import plugin_text
from actors.harnesses.pi.install import extension_text
from actors.sinks.tmux_client import ControlClient
from actors.sources.hook_listener import HookListener
from messages import Inbound
from tests.support.daemon import PANEWARD, DaemonProcess, claude_hook_payload, daemon_env
from tests.support.tmux import TmuxServer

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"

_OWNER = r"""
import json, os, subprocess, sys
fifo = sys.argv[1]
while True:
    with open(fifo) as f:
        for line in f:
            req = json.loads(line)
            env = dict(req["env"])
            if req.get("claude_pid"):
                env["CLAUDE_PID"] = str(os.getpid())  # as Claude Code exports its own pid
            subprocess.run(req["argv"], input=req["stdin"].encode(), env=env)
"""

_NODE = r"""
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
const [kind, file, fifo] = process.argv.slice(2);
const mod = await import(file);
let handle;
if (kind === "opencode") {
  const hooks = await mod.PanewardPlugin({});
  handle = (event) => hooks.event({ event });
} else {
  const handlers = {};
  mod.default({ on: (name, h) => (handlers[name] ??= []).push(h) });
  const ctx = { sessionManager: { getSessionId: () => "bench-pi" } };
  handle = (event) => { for (const h of handlers[event.type] ?? []) h(event, ctx); };
}
for (;;) {
  const lines = createInterface({ input: createReadStream(fifo) });
  for await (const line of lines) handle(JSON.parse(line));
}
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _captured(path: Path, event: str) -> dict[str, Any]:
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["stdin"]["hook_event_name"] == event:
            payload: dict[str, Any] = record["stdin"]
            return payload
    raise KeyError(event)


def gemini_startup(runs: int, tmp: Path) -> dict[str, float]:
    """Part 1: medians of the hook client and the bare interpreter, the same stdin each."""
    payload = json.dumps(_captured(FIXTURES / "gemini" / "interactive_hooks.jsonl",
                                   "BeforeAgent")).encode()
    env = {**os.environ, "PANEWARD_SOCKET": os.fspath(tmp / "hook.sock")}
    variants = {
        "baseline python -c pass": [sys.executable, "-c", "pass"],
        "paneward hook (gemini)": [os.fspath(PANEWARD), "hook", "--harness", "gemini",
                                   "--owner", "parent"],
    }

    def wall(argv: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(argv, input=payload, env=env, check=True)
        return time.perf_counter() - start

    async def measure() -> dict[str, float]:
        class Null:
            def deliver_nowait(self, message: Inbound) -> None:
                del message

            inject_nowait = deliver_nowait

        listener = HookListener(HOOKS, socket_path=tmp / "hook.sock")
        samples: dict[str, list[float]] = {name: [] for name in variants}

        def loop() -> None:
            for argv in variants.values():
                wall(argv)  # warm the page cache and .pyc files
            for _ in range(runs):
                for name, argv in variants.items():
                    samples[name].append(wall(argv))

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.run, Null())
            await listener.wait_listening()
            await anyio.to_thread.run_sync(loop)
            tg.cancel_scope.cancel()
        return {name: statistics.median(values) for name, values in samples.items()}

    return anyio.run(measure)


def _frames(harness: str, hook_env: dict[str, str]) -> tuple[list[str], list[dict[str, Any]]]:
    """The two alternating inputs (working, done) for ``harness``'s pane process."""
    hook = [os.fspath(PANEWARD), "hook", "--harness", harness, "--owner", "parent"]
    if harness == "claude-code":
        hook[-1] = "env:CLAUDE_PID"
        pair = [claude_hook_payload(e, 0, session="bench-claude")
                for e in ("UserPromptSubmit", "Stop")]
        return ["● working", "✔ done"], [
            {"argv": hook, "stdin": json.dumps(p), "env": hook_env, "claude_pid": True}
            for p in pair
        ]
    if harness == "gemini":
        path = FIXTURES / "gemini" / "interactive_hooks.jsonl"
        pair = [_captured(path, "BeforeAgent"), _captured(path, "AfterAgent")]
    elif harness == "hermes":
        path = FIXTURES / "hermes" / "hooks.jsonl"
        pair = [_captured(path, "pre_llm_call"), _captured(path, "on_session_end")]
    elif harness == "opencode":
        sid = {"sessionID": "ses_bench"}
        return ["● working", "✔ done"], [
            {"type": "session.status", "properties": {**sid, "status": {"type": "busy"}}},
            {"type": "session.idle", "properties": sid},
        ]
    else:
        return ["● working", "✔ done"], [
            {"type": "agent_start"},
            {"type": "agent_end", "messages": [{"stopReason": "stop"}]},
        ]
    return ["● working", "✔ done"], [
        {"argv": hook, "stdin": json.dumps(p), "env": hook_env} for p in pair
    ]


async def hook_to_pane(server: TmuxServer, harness: str, events: int) -> list[float]:
    """Part 2 for one harness: ms from firing each event to its badge in the pane."""
    with tempfile.TemporaryDirectory(prefix=f"pw-bench-{harness}-") as name:
        tmp = Path(name)
        state = tmp / "state"
        state.mkdir(mode=0o700)
        env = daemon_env(state)
        fifo = tmp / "fire"
        os.mkfifo(fifo)
        if harness in ("claude-code", "gemini", "hermes"):
            (tmp / "owner.py").write_text(_OWNER)
            command = [sys.executable, os.fspath(tmp / "owner.py"), os.fspath(fifo)]
        else:
            node = shutil.which("node")
            assert node is not None, "node is needed for the OpenCode / Pi forwarders"
            source = plugin_text() if harness == "opencode" else extension_text()
            (tmp / "plugin.mjs").write_text(source)
            (tmp / "driver.mjs").write_text(_NODE)
            command = [node, os.fspath(tmp / "driver.mjs"), harness,
                       os.fspath(tmp / "plugin.mjs"), os.fspath(fifo)]
        exports = " ".join(
            f"{k}={shlex.quote(v)}" for k, v in env.items() if k in ("PATH", "PANEWARD_STATE_DIR")
        )
        pane = (await server.arun(
            "new-window", "-d", "-P", "-F", "#{pane_id}",
            f"exec env {exports} {shlex.join(command)}",
        )).strip()
        badges, inputs = _frames(harness, env)
        times: list[float] = []
        async with DaemonProcess(state, env=env, extra_args=["--tmux", "-L", server.name]), \
                ControlClient(TmuxTarget(server.name)) as reader:
            show = f"show-options -p -q -v -t {quote(pane)} @paneward_badge"

            async def wait_badge(want: str) -> None:
                while True:
                    [reply] = await reader.run_batch([show])
                    if reply.lines and reply.lines[0] == want:
                        return
                    await anyio.sleep(0.001)  # see bench_tmux.py: 1 ms resolution

            with open(fifo, "w") as writer:  # noqa: ASYNC230 - a FIFO the pane reads at once
                for i in range(events + 1):
                    item = inputs[i % 2]
                    if harness in ("hermes", "claude-code"):  # a turn id per turn (a repeated
                        payload = json.loads(item["stdin"])  # one completes nothing new)
                        if harness == "hermes":
                            payload["extra"]["turn_id"] = f"bench-{i // 2}"
                        else:
                            payload["prompt_id"] = f"p{i // 2}"
                        item = {**item, "stdin": json.dumps(payload)}
                    line = json.dumps(item) + "\n"
                    begin = time.perf_counter()
                    writer.write(line)
                    writer.flush()
                    with anyio.fail_after(30):
                        await wait_badge(badges[i % 2])
                    if i:  # the first one binds the pane: not timed
                        times.append((time.perf_counter() - begin) * 1000)
        await server.arun("kill-pane", "-t", pane, check=False)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--only", nargs="*",
                        default=["claude-code", "gemini", "hermes", "opencode", "pi"],
                        help="these harnesses only (part 2)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="pw-bench-start-") as name:
        startup = gemini_startup(args.runs, Path(name))
    base = startup["baseline python -c pass"]
    print(f"\n## Gemini's synchronous hook: start-up (median of {args.runs}, stdin payload, "
          "a listener listening)")
    for key, value in startup.items():
        print(f"  {key:26s} {value * 1000:7.1f} ms  x{value / base:.2f}")
    server = TmuxServer()
    server.name = server.name.replace("pw-", "pw-bench-")
    server.start()
    try:
        print(f"\n## hook fired -> badge visible to another tmux client ({args.events} events)")
        for harness in args.only:
            values = anyio.run(hook_to_pane, server, harness, args.events)
            kind = "in-process" if harness in ("opencode", "pi") else "command hook"
            print(f"  {harness:11s} {kind:13s} p50 {pct(values, 0.5):7.2f} ms  "
                  f"p99 {pct(values, 0.99):7.2f} ms  max {max(values):7.2f} ms")
    finally:
        subprocess.run(server.argv("kill-server"), check=False, capture_output=True)


if __name__ == "__main__":
    main()
