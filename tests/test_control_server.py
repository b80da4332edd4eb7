"""The control socket in-process: a watcher gets every transition, many per write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from actors.sources.control_server import ControlServer
from messages import RegistryStatus, SessionKey, Transition
from supervisor import Supervisor
from tests.polling import settle_until

T = 1_800_000_000_000


def status(n: int, word: str) -> RegistryStatus:
    return RegistryStatus(
        key=SessionKey("claude-code", f"watch-{n}"),
        pid=10_000 + n,
        start_token="1",
        status=word,
        at_ms=T + n,
        observed_at_ms=T + n,
    )


async def test_a_watcher_gets_every_transition_and_a_burst_in_few_writes(tmp_path: Path) -> None:
    """A burst of 100 transitions reaches a watcher in order, in a write or two: one system call
    per wake-up of the server, not one per transition (ten watchers of a busy daemon kept up
    with 10,000 transitions a second this way; bench/bench_watch.py)."""

    async def journal(since: int, until: int) -> list[Transition]:
        return []

    def statistics() -> dict[str, Any]:
        return {}

    path = tmp_path / "control.sock"
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            server = ControlServer(path, sup, statistics, journal)
            sup.start_actor(server, name="control")
            await server.wait_listening()
            async with await anyio.connect_unix(path) as stream:
                await stream.send(b'{"op": "watch"}\n')
                reader = BufferedByteReceiveStream(stream)
                # It subscribes in the step that counts the watch.
                await settle_until(lambda: server.statistics().watches == 1)
                for n in range(100):
                    sup.inject_nowait(status(n, "busy"))  # 100 new sessions, one step
                lines = [json.loads(await reader.receive_until(b"\n", 1 << 20)) for _ in range(100)]
                stats = server.statistics()
    assert [line["seq"] for line in lines] == list(range(1, 101))
    assert {line["key"]["session_id"] for line in lines} == {f"watch-{n}" for n in range(100)}
    assert stats.watch_lines == 100 and stats.watch_writes <= 2
