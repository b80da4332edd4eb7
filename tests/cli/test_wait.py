"""``paneward wait``: it reads the control socket's snapshot-then-transitions stream (the one
``watch`` reads), so an edge just before it subscribed is in the snapshot and one just after is
the first transition; exit 0 with the matching Activity, 1 on timeout, 2 without a daemon."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import msgspec

import messages
from actors.core.views.attention import WaitTarget, parse_predicate
from actors.sources.control_server import ControlServer
from messages import Snapshot, Transition
from supervisor import Supervisor
from tests.support.daemon import PANEWARD, DaemonProcess, poll_until
from tests.support.sessions import blocked, spawned


async def _journal(since: int, until: int) -> list[Transition]:
    del since, until
    return []


async def test_an_edge_between_the_snapshot_and_the_first_transition_is_not_missed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "control.sock"
    with anyio.fail_after(20):
        async with Supervisor() as sup:
            control = ControlServer(path, sup, dict, _journal)
            sup.start_actor(control, name="control")
            await control.wait_listening()
            await sup.inject(spawned("s1"))
            await poll_until(lambda: sup.seq == 1, "the session to run")
            async with await anyio.connect_unix(path) as stream:
                await stream.send(b'{"op": "watch", "snapshot": true}\n')
                # The server subscribes in the step it counts the request: from here on,
                # every edge is in the stream, whether or not the client has read anything.
                await poll_until(lambda: control.statistics().watches == 1, "the subscription")
                await sup.inject(blocked("s1"))
                buffer = b""
                while buffer.count(b"\n") < 2:
                    buffer += await stream.receive()
            first, second = (messages.decode_outbound(x) for x in buffer.split(b"\n")[:2])
    assert isinstance(first, Snapshot)
    assert [(a.presence, a.turn) for a in first.activities] == [("running", "unknown")]
    assert isinstance(second, Transition) and second.seq == first.seq + 1
    target = WaitTarget([parse_predicate("needs_input")], session="s1")
    assert target.snapshot(first.activities) is None
    found = target.update(second.after)
    assert found is not None and found.attention is not None
    # the user's own view: in full (the wrapper's "approve Bash: …" is the one permission reason)
    assert found.attention.reason == "permission: Bash: echo hi"


async def _wait(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = await anyio.run_process([os.fspath(PANEWARD), "wait", *args], env=env, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_wait_returns_on_the_edge_times_out_and_needs_a_daemon(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with DaemonProcess(tmp_path / "state") as daemon:
            env = daemon.env
            inject = [os.fspath(PANEWARD), "inject", messages.encode(spawned("s1")).decode()]
            await anyio.run_process(inject, env=env)
            argv = [os.fspath(PANEWARD), "wait", "--session", "s1", "--until", "needs_input",
                    "--timeout", "30"]
            async with await anyio.open_process(argv, env=env) as waiter:

                async def subscribed() -> bool:
                    return int((await daemon.counters())["control"]["watches"]) == 1

                await poll_until(subscribed, "the waiter's subscription")
                assert waiter.returncode is None  # nothing matches yet
                inject = [os.fspath(PANEWARD), "inject", messages.encode(blocked("s1")).decode()]
                await anyio.run_process(inject, env=env)
                assert await waiter.wait() == 0
                assert waiter.stdout is not None
                out = await waiter.stdout.receive()
            activity = msgspec.json.decode(out, type=messages.Activity)
            assert (activity.key.session_id, activity.turn) == ("s1", "needs_input")

            # already true: answered from the snapshot, at once
            code, text, _ = await _wait(env, "--session", "terminal:s1", "--until", "attention",
                                       "--until", "presence=running", "--timeout", "10")
            assert code == 0 and json.loads(text)["attention"]["kind"] == "needs_input"
            code, _, err = await _wait(env, "--session", "s1", "--until", "turn=working",
                                       "--timeout", "0.3")
            assert (code, err.strip()) == (1, "paneward wait: timed out")
            code, _, err = await _wait(env, "--until", "turn=busy")
            assert code == 2 and "unknown predicate 'turn=busy'" in err
        code, _, err = await _wait(env, "--any", "--until", "attention", "--timeout", "5")
        assert code == 2 and "no daemon" in err and "start one with `paneward run`" in err


LONG_A = "d9db7ac4-b60a-4a14-ae51-321496e4fc8f"
LONG_B = "d9db7ac4-77aa-4a14-ae51-321496e4fc8f"


async def test_wait_takes_the_ids_the_table_shows_and_refuses_what_does_not_exist(
    tmp_path: Path,
) -> None:
    """A 13-character prefix (what `status` shows) names its session; an ambiguous prefix, an
    unknown session or a pane no session shows is exit 4 at once; `--for-new` waits for it;
    neither `--session`, `--pane` nor `--any` is a usage error."""
    with anyio.fail_after(60):
        async with DaemonProcess(tmp_path / "state") as daemon:
            env = daemon.env
            for session in (LONG_A, LONG_B):
                inject = [os.fspath(PANEWARD), "inject", messages.encode(spawned(session)).decode()]
                await anyio.run_process(inject, env=env)

            async def both() -> bool:
                return len((await daemon.status())["activities"]) == 2

            await poll_until(both, "both sessions")

            code, text, _ = await _wait(env, "--session", LONG_A[:13], "--until",
                                        "presence=running", "--timeout", "10")
            assert code == 0 and json.loads(text)["key"]["session_id"] == LONG_A
            code, text, _ = await _wait(env, "--session", f"terminal:{LONG_B[:10]}",
                                        "--until", "presence=running", "--timeout", "10")
            assert code == 0 and json.loads(text)["key"]["session_id"] == LONG_B

            code, _, err = await _wait(env, "--session", "d9db7ac4", "--until", "attention")
            assert code == 4
            assert "names 2 sessions" in err
            assert f"terminal:{LONG_A}" in err and f"terminal:{LONG_B}" in err

            code, _, err = await _wait(env, "--session", "nosuch", "--until", "attention")
            assert code == 4 and "no session 'nosuch'" in err and "--for-new" in err
            code, _, err = await _wait(env, "--pane", "%99", "--until", "attention")
            assert code == 4 and "no session shows pane '%99'" in err

            code, _, err = await _wait(env, "--until", "attention")
            assert code == 2 and "one of the arguments --session --pane --any is required" in err

            before = int((await daemon.counters())["control"]["watches"])
            argv = [os.fspath(PANEWARD), "wait", "--session", "fresh", "--for-new",
                    "--until", "presence=running", "--timeout", "30"]
            async with await anyio.open_process(argv, env=env) as waiter:

                async def subscribed() -> bool:
                    return int((await daemon.counters())["control"]["watches"]) == before + 1

                await poll_until(subscribed, "the waiter's subscription")
                assert waiter.returncode is None
                inject = [os.fspath(PANEWARD), "inject",
                          messages.encode(spawned("fresh-1234")).decode()]
                await anyio.run_process(inject, env=env)
                assert await waiter.wait() == 0
                assert waiter.stdout is not None
                out = await waiter.stdout.receive()
            assert json.loads(out)["key"]["session_id"] == "fresh-1234"
