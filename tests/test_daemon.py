"""The daemon (issue 3) end to end: a real ``paneward run`` process, real sockets, real
``paneward hook`` / ``inject`` / ``status`` / ``watch`` processes, real owner processes.

Every daemon runs on its own temporary state directory with ``--no-discovery`` and is
stopped at teardown (tests/daemon_helpers.py).
"""

from __future__ import annotations

import heapq
import json
import os
from pathlib import Path
from typing import Any

import anyio
import msgspec

import messages
from actors.session_table import SessionTable
from messages import NotifyHook, RegistryRemoved, RegistryStatus, Transition
from tests.daemon_helpers import (
    PANEWARD,
    Daemon,
    Owner,
    daemon_env,
    owner,
    watching,
)
from tests.replay import FIXTURES, claude_messages, codex_messages

Row = tuple[Any, ...]


def row(transition: Transition) -> Row:
    """What must match between the daemon and the reference (not observed_at_ms)."""
    a = transition.after
    attention = (a.attention.kind, a.attention.reason) if a.attention else None
    return (
        transition.seq,
        transition.key.harness,
        transition.key.session_id,
        transition.cause,
        a.presence,
        a.turn,
        attention,
        a.pane,
        a.evidence.source,
        a.evidence.native_state,
    )


def transitions_of(items: list[dict[str, Any]]) -> list[Transition]:
    out: list[Transition] = []
    for item in items:
        decoded = messages.decode_outbound(msgspec.json.encode(item))
        if isinstance(decoded, Transition):
            out.append(decoded)
    return out


async def cli(env: dict[str, str], *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    result = await anyio.run_process(
        [os.fspath(PANEWARD), *args], env=env, input=stdin, check=False
    )
    return result.returncode, result.stdout.decode(), result.stderr.decode()


# --------------------------------------------------------------------------------------------
# 1. The real captures through real hook/inject processes == the in-process replay


def _rewrite_claude(
    interactive: Owner, print_mode: Owner
) -> list[tuple[messages.Inbound, Owner | None]]:
    """Claude messages with the captured owners replaced by live processes."""
    owners = {26995: interactive, 26912: print_mode}
    out: list[tuple[messages.Inbound, Owner | None]] = []
    for message in claude_messages():
        if isinstance(message, NotifyHook):
            assert message.pid is not None
            live = owners[message.pid]
            out.append(
                (msgspec.structs.replace(message, pid=live.pid, start_token=live.token), live)
            )
        elif isinstance(message, RegistryStatus):
            live = owners[message.pid]
            out.append(
                (msgspec.structs.replace(message, pid=live.pid, start_token=live.token), None)
            )
        else:
            assert isinstance(message, RegistryRemoved)
            out.append((msgspec.structs.replace(message, pid=owners[message.pid].pid), None))
    return out


def _rewrite_codex(codex: Owner) -> list[tuple[messages.Inbound, Owner | None]]:
    out: list[tuple[messages.Inbound, Owner | None]] = []
    for message in codex_messages(owner_pid=codex.pid, token=codex.token):
        if isinstance(message, NotifyHook):
            # `paneward hook` run by Codex claims its parent: the Codex process
            out.append(
                (msgspec.structs.replace(message, pid=codex.pid, start_token=codex.token), codex)
            )
        else:
            out.append((message, None))
    return out


def _codex_notify_argv() -> dict[int, str]:
    """at_ms -> the exact JSON Codex passed as notify's last argument."""
    rows = [
        json.loads(line)
        for line in (FIXTURES / "codex" / "notify.jsonl").read_text().splitlines()
        if line.strip()
    ]
    return {round(r["ts"] * 1000): r["argv"][-1] for r in rows}


async def test_real_captures_through_hook_processes_match_the_in_process_replay(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with (
            owner() as interactive,
            owner() as print_mode,
            owner() as codex,
            Daemon(tmp_path / "state") as daemon,
        ):
            plan = list(
                heapq.merge(
                    _rewrite_claude(interactive, print_mode),
                    _rewrite_codex(codex),
                    key=lambda pair: pair[0].at_ms,
                )
            )
            table = SessionTable()
            reference = [t for message, _ in plan for t in table.apply(message)]
            notify_argv = _codex_notify_argv()
            async with watching(daemon) as watcher:
                for sent, (message, runner) in enumerate(plan, start=1):
                    if isinstance(message, NotifyHook):
                        assert runner is not None
                        env = daemon_env(daemon.state_dir, PANEWARD_HOOK_AT_MS=str(message.at_ms))
                        hook = [os.fspath(PANEWARD), "hook", "--harness", message.harness or ""]
                        if message.harness == "codex":
                            argv = notify_argv[message.at_ms]
                            assert json.loads(argv) == message.payload
                            code = await runner.run([*hook, argv], env)
                        else:
                            env["CLAUDE_PID"] = str(runner.pid)
                            code = await runner.run(hook, env, json.dumps(message.payload))
                    else:
                        code, _, err = await cli(
                            daemon.env, "inject", messages.encode(message).decode()
                        )
                        assert err == ""
                    assert code == 0
                    # separate connections are not ordered: one frame at a time
                    await daemon.wait_delivered(sent)
                await watcher.wait_for(
                    lambda items: len(items) >= len(reference), f"{len(reference)} transitions"
                )
                status = await daemon.status()
            counters = status["statistics"]
    seen = transitions_of(watcher.items)
    assert [row(t) for t in seen] == [row(t) for t in reference]
    assert status["seq"] == len(reference) == len(seen)
    # the replay is not trivial: both harnesses, attention, a death by registry removal
    assert {t.key.harness for t in reference} == {"claude-code", "codex"}
    assert len(reference) >= 30
    assert counters["hook_listener"]["frames_delivered"] == len(plan)
    assert counters["hook_listener"]["rejected"] == {}
    assert counters["supervisor"]["rejected"] == 0
    # the only other messages are the pid watcher's proofs that the three owners live
    assert counters["pid_watcher"]["confirmed_alive"] == 3
    assert counters["pid_watcher"]["gone_sent"] == 0
    assert counters["supervisor"]["messages"] == len(plan) + counters["pid_watcher"]["seen_sent"]
