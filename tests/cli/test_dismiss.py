"""Dismissing: ``paneward ack`` closes a ``done`` / ``failed``, ``paneward forget`` drops an
ended session from every view and the store (:class:`messages.Forget`). In process through the
supervisor (what every subscriber sees), and end to end through a real daemon, the real CLI and
a restart on the same store."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio

import messages
from actors.core.tmux.badges import BadgeBook
from messages import Forget, PtyExit, PtySpawned, SessionKey, Snapshot, Transition
from supervisor import Supervisor
from tests.support.daemon import PANEWARD, DaemonProcess, poll_until, start_token, watching

ENDED = "7f3c2a91-b60a-4a14-ae51-321496e4fc8f"
LIVE = "7f3c2a91-ffff-4a14-ae51-321496e4fc8f"


def _now() -> int:
    return time.time_ns() // 1_000_000


def spawned(session: str, pane: str) -> PtySpawned:
    now = _now()
    return PtySpawned(key=SessionKey("terminal", session), pid=os.getpid(),
                      start_token=start_token(os.getpid()), at_ms=now, observed_at_ms=now,
                      pane=pane)


def failed_exit(session: str) -> PtyExit:
    now = _now()
    return PtyExit(key=SessionKey("terminal", session), code=1, at_ms=now, observed_at_ms=now)


async def test_forget_publishes_a_last_transition_then_no_snapshot_has_the_session() -> None:
    ended, live = SessionKey("terminal", ENDED), SessionKey("terminal", LIVE)
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            await sup.inject(spawned(ENDED, "%7"))
            await sup.inject(failed_exit(ENDED))
            await sup.inject(spawned(LIVE, "%8"))
            await poll_until(lambda: sup.seq == 3, "three transitions")
            book = BadgeBook()  # what the tmux bridge shows, fed the same stream
            with sup.subscribe("all", snapshot=True) as sub:
                first = await sub.receive()
                assert isinstance(first, Snapshot) and len(first.activities) == 2
                book.apply(first)
                assert book.shown["%7"].badge == "✖ failed"
                await sup.inject(Forget(live, _now()))  # live: left as it is
                await sup.inject(Forget(SessionKey("terminal", "nosuch"), _now()))
                await sup.inject(Forget(ended, _now()))
                last = await sub.receive()
            assert isinstance(last, Transition) and last.forgets and last.key == ended
            book.apply(last)
            assert set(book.shown) == {"%8"}  # the forgotten session's pane has no badge
            assert last.before is not None and last.before.pane == "%7"
            assert last.before.attention is not None
            assert (last.after.pane, last.after.attention) == (None, None)
            assert [a.key for a in sup.snapshot()] == [live]
            assert sup.seq == 4  # neither the live session nor an unknown key published
            assert sup.statistics().sessions <= 2  # nothing was made for the unknown key
            # both refusals are said and counted, each with its reason
            stats = sup.statistics()
            assert {r.reason for r in stats.recent_rejected} == {
                f"forget {live}: the session has not ended",
                f"forget {SessionKey('terminal', 'nosuch')}: no such session"}
            assert stats.rejected == 2
            # evidence for the key afterwards starts it again, from nothing
            with sup.subscribe("all", snapshot=False) as sub:
                await sup.inject(spawned(ENDED, "%9"))
                back = await sub.receive()
            assert isinstance(back, Transition) and back.key == ended and back.before is None
            assert back.after.pane == "%9" and back.after.attention is None
            assert len(sup.snapshot()) == 2


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([os.fspath(PANEWARD), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


async def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(functools.partial(_cli, env, *args))


async def _activities(daemon: DaemonProcess) -> dict[str, dict[str, Any]]:
    return {a["key"]["session_id"]: a for a in (await daemon.status())["activities"]}


async def test_ack_and_forget_through_the_daemon_and_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with anyio.fail_after(90):
        async with DaemonProcess(state) as daemon:
            env = daemon.env
            for message in (spawned(ENDED, "%7"), failed_exit(ENDED), spawned(LIVE, "%8")):
                done = await cli(env, "inject", messages.encode(message).decode())
                assert done.returncode == 0, done.stderr

            async def three() -> bool:
                return int((await daemon.status())["seq"]) >= 3

            await poll_until(three, "three transitions")
            before = await _activities(daemon)
            assert before[ENDED]["attention"]["kind"] == "failed"
            assert before[ENDED]["presence"] == "persisted"

            # Nothing is sent while one target does not exist.
            done = await cli(env, "ack", ENDED[:13], "%99")
            assert done.returncode == 4 and "no session shows pane '%99'" in done.stderr
            done = await cli(env, "ack", "7f3c2a91")
            assert done.returncode == 4 and "names 2 sessions" in done.stderr
            assert (await _activities(daemon))[ENDED]["attention"] is not None

            done = await cli(env, "ack", ENDED[:13], "%8")
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == [f"terminal:{ENDED}: failed acknowledged",
                                                "%8: nothing to acknowledge"]

            async def acknowledged() -> bool:
                return (await _activities(daemon))[ENDED]["attention"] is None

            await poll_until(acknowledged, "the failed closed")

            done = await cli(env, "forget", LIVE[:13])
            assert done.returncode == 1
            assert f"terminal:{LIVE} is running: only an ended session" in done.stderr
            done = await cli(env, "forget", "nosuch")
            assert done.returncode == 4 and "no session 'nosuch'" in done.stderr

            async with watching(daemon) as watcher:
                done = await cli(env, "forget", ENDED[:13])
                assert (done.returncode, done.stdout) == (0, f"forgot terminal:{ENDED}\n"), \
                    done.stderr
                await watcher.wait_for(
                    lambda items: any(i.get("cause") == "Forget" for i in items), "the Forget"
                )
            last = next(i for i in watcher.items if i.get("cause") == "Forget")
            assert last["key"]["session_id"] == ENDED and last["after"]["pane"] is None
            assert set(await _activities(daemon)) == {LIVE}
            shown = await cli(env, "status", "--all")
            assert ENDED[:13] not in shown.stdout and LIVE[:13] in shown.stdout
        # The store deleted it: a daemon on the same state dir does not bring it back.
        async with DaemonProcess(state) as again:
            assert set(await _activities(again)) == {LIVE}
            assert json.loads((await cli(again.env, "status", "--json")).stdout)[0]["key"][
                "session_id"] == LIVE


async def test_ack_of_an_exited_pane_leaves_it_a_plain_shell(tmp_path: Path) -> None:
    """An agent that ended cleanly (nothing to act on) still says ``■ exited`` in its pane until
    seen: ``paneward ack %7`` is seeing it, and the session leaves the pane."""
    state = tmp_path / "state"
    with anyio.fail_after(60):
        async with DaemonProcess(state) as daemon:
            now = _now()
            ended = PtyExit(key=SessionKey("terminal", ENDED), code=0, at_ms=now,
                            observed_at_ms=now)
            for message in (spawned(ENDED, "%7"), ended):
                done = await cli(daemon.env, "inject", messages.encode(message).decode())
                assert done.returncode == 0, done.stderr

            async def exited() -> bool:
                shown = (await _activities(daemon)).get(ENDED)
                return shown is not None and shown["presence"] == "persisted"

            await poll_until(exited, "the exit")
            assert (await _activities(daemon))[ENDED]["pane"] == "%7"
            done = await cli(daemon.env, "ack", "%7")
            assert (done.returncode, done.stdout) == (0, "%7: exited acknowledged\n"), done.stderr

            async def left() -> bool:
                return (await _activities(daemon))[ENDED]["pane"] is None

            await poll_until(left, "the session off its pane")
            done = await cli(daemon.env, "ack", ENDED[:13])
            assert done.stdout == f"terminal:{ENDED}: nothing to acknowledge\n"


async def test_the_reference_table_forgets_as_the_supervisor_does() -> None:
    """tests.support.reference_model.SessionTable (the model replay and property tests use)
    publishes the same transitions for a forget and a session of the same key after it."""
    from actors.harnesses.catalog import PROOF_TABLE, normalize
    from tests.support.reference_model import SessionTable

    ended = SessionKey("terminal", ENDED)
    sequence: list[messages.Inbound] = [
        spawned(ENDED, "%7"), failed_exit(ENDED), Forget(ended, _now()), Forget(ended, _now()),
        spawned(ENDED, "%9"),
    ]
    table = SessionTable(normalize, PROOF_TABLE)
    want = [t for message in sequence for t in table.apply(message)]
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            with sup.subscribe("all", snapshot=False) as sub:
                for message in sequence:
                    await sup.inject(message)
                got = [await sub.receive() for _ in want]
    assert [t.cause for t in want] == ["PtySpawned", "PtyExit", "Forget", "PtySpawned"]
    assert got == want
    assert list(table.states) == [ended]
