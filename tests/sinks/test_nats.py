"""NATS JetStream as the carrier, against a real ``nats-server -js`` (tests/support/nats.py)
and real daemons (tests/support/daemon.py): ``paneward run --nats``, ``status --nats`` and
``watch --nats`` read back directly, and an independent audit of the stream.

- several daemons publish into one server; ``status --nats`` and ``watch --json --nats``
  show every host's sessions;
- the server restarted in the middle of a burst of 10,000 transitions per daemon: every
  transition is on the stream exactly once (audit by host and seq);
- a daemon whose heartbeat lapses reads as stale, its sessions ``turn: unknown``, never idle;
- credentials refused: the daemon's counters and ``status --nats`` say which file was
  refused and the server's reason;
- a server that accepts but never acks (SIGSTOP): hook intake never stalls, the publisher's
  buffer is counted, then bounded (a Gap on the stream);
- nats-py is not imported by the hook, ``status`` or a daemon without NATS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from actors.core.fleet.nats import unescape_token
from tests import support
from tests.support.daemon import (
    PANEWARD,
    DaemonProcess,
    WatchProcess,
    daemon_env,
    raw_send,
    start_token,
)
from tests.support.nats import (
    NatsServer,
    nats_server,
    nkey_pair,
    published,
    read_stream,
    send_paced,
)
from tests.support.polling import poll_until
from tests.support.sessions import burst, frames

ROOT = support.ROOT
def _nats_args(server: NatsServer, host: str, *extra: str) -> list[str]:
    return ["--nats", server.url, "--nats-host", host, "--nats-heartbeat", "0.2", *extra]


async def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(
        lambda: subprocess.run([os.fspath(PANEWARD), *argv], env=env, capture_output=True,
                               text=True, timeout=30, check=False)
    )


async def _nats_counters(daemon: DaemonProcess) -> dict[str, Any]:
    stats = (await daemon.counters())["nats"]
    assert isinstance(stats, dict) and "error" not in stats, stats
    return stats




def _audit(messages: list[Any]) -> dict[str, list[int]]:
    """host -> the daemon seqs on the stream, in stream order (session subjects only)."""
    seqs: dict[str, list[int]] = {}
    for m in messages:
        if m.subject.endswith(".gap"):
            continue
        body = json.loads(m.data)
        assert body["type"] == "Transition"
        identity, _, seq = m.headers["Nats-Msg-Id"].partition(":")
        assert len(identity) == 32 and seq == str(body["seq"])
        _, host, harness, session = m.subject.split(".")
        assert (unescape_token(harness), unescape_token(session)) == (
            body["key"]["harness"], body["key"]["session_id"])
        seqs.setdefault(unescape_token(host), []).append(int(body["seq"]))
    return seqs


async def _hub_seq(daemon: DaemonProcess) -> int:
    status = await daemon.status()
    return int(status["seq"])


# --------------------------------------------------------------------------------------------


async def test_several_daemons_publish_and_the_readers_see_every_host(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hosts = ["alpha", "beta.lab", "gamma *>"]  # ids that would forge subjects unescaped
    with anyio.fail_after(90), nats_server(tmp_path / "nats") as server:
        daemons = [DaemonProcess(tmp_path / f"d{i}" / "state", extra_args=_nats_args(server, h))
                   for i, h in enumerate(hosts)]
        for daemon in daemons:
            await daemon.start()
        try:
            for i, daemon in enumerate(daemons):
                hooks = burst([f"s{i}-a", f"s{i}-b"], 5, me, token)
                await raw_send(daemon.hook_socket, frames(hooks))
                await daemon.wait_delivered(len(hooks))
            for daemon in daemons:
                await published(daemon)
            audit = _audit(await read_stream(server.url))
            assert sorted(audit) == sorted(hosts)
            for host, daemon in zip(hosts, daemons, strict=True):
                assert sorted(audit[host]) == list(range(1, await _hub_seq(daemon) + 1))

            env = daemon_env(tmp_path / "viewer")
            done = await _cli(env, "status", "--json", "--nats", server.url)
            assert done.returncode == 0, done.stderr
            rows = json.loads(done.stdout)
            assert {(r["host"], r["key"]["session_id"]) for r in rows} == {
                (h, f"s{i}-{x}") for i, h in enumerate(hosts) for x in "ab"
            }
            assert {r["turn"] for r in rows} == {"idle"}
            table = await _cli(env, "status", "--nats", server.url)
            assert table.returncode == 0, table.stderr
            for host in hosts:
                assert f"{host}: live" in table.stdout

            watcher = WatchProcess(env, since=0)
            watcher.args += ["--nats", server.url]
            process = await anyio.open_process(watcher.args, env=watcher.env,
                                               stdin=subprocess.DEVNULL)
            async with process, anyio.create_task_group() as tg:
                watcher.process = process
                tg.start_soon(watcher._read)
                total = sum(len(v) for v in audit.values())
                await watcher.wait_for(lambda items: len(items) >= total, "every transition")
                assert {(i["host"], i["seq"]) for i in watcher.items} == {
                    (h, s) for h, seqs in audit.items() for s in seqs
                }
                process.terminate()
        finally:
            for daemon in daemons:
                await daemon.stop()




async def test_a_server_restart_mid_burst_loses_and_doubles_nothing(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst([f"r{i}" for i in range(4)], 1250, me, token)[:10_000]
    with anyio.fail_after(240), nats_server(tmp_path / "nats") as server:
        daemons = [
            DaemonProcess(tmp_path / f"d{i}" / "state",
                          extra_args=_nats_args(server, f"host{i}", "--nats-buffer", "20000"))
            for i in range(2)
        ]
        for daemon in daemons:
            await daemon.start()
        try:
            async with anyio.create_task_group() as tg:
                for daemon in daemons:
                    tg.start_soon(anyio.to_thread.run_sync, send_paced, daemon.hook_socket,
                                  frames(hooks))

                async def some_acked() -> bool:
                    return all([(await _nats_counters(d))["acked_seq"] > 1000 for d in daemons])

                await poll_until(some_acked, "the burst under way on the server")
                await anyio.to_thread.run_sync(server.restart)
            for daemon in daemons:
                await daemon.wait_delivered(len(hooks), within=120)
                assert await _hub_seq(daemon) == 10_000
            for daemon in daemons:
                await published(daemon)
            stats = [await _nats_counters(d) for d in daemons]
            assert all(s["dropped"] == 0 for s in stats), stats
            audit = _audit(await read_stream(server.url))
            for i in range(2):
                seqs = audit[f"host{i}"]
                assert len(seqs) == len(set(seqs)) == 10_000  # once each
                assert set(seqs) == set(range(1, 10_001))
        finally:
            for daemon in daemons:
                await daemon.stop()


async def test_a_lapsed_heartbeat_reads_stale_never_idle(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    env = daemon_env(tmp_path / "viewer")
    with anyio.fail_after(60), nats_server(tmp_path / "nats") as server:
        empty = await _cli(env, "status", "--nats", server.url)
        assert empty.returncode == 2
        assert "no bucket 'paneward' (no daemon has published there" in empty.stderr
        async with DaemonProcess(tmp_path / "d" / "state",
                                 extra_args=_nats_args(server, "gone")) as daemon:
            hooks = burst(["x"], 1, me, token)  # SessionStart, prompt, Stop: idle
            await raw_send(daemon.hook_socket, frames(hooks[:-1]))  # ends working
            await daemon.wait_delivered(len(hooks) - 1)
            await published(daemon)
            live = await _cli(env, "status", "--json", "--nats", server.url)
            assert [r["turn"] for r in json.loads(live.stdout)] == ["working"]
            await daemon.kill()  # no more heartbeats

        async def stale() -> bool:
            done = await _cli(env, "status", "--nats", server.url, "--counters")
            hosts = json.loads(done.stdout)["hosts"]
            return bool(hosts[0]["health"] == "stale")

        await poll_until(stale, "the host to go stale")
        rows = json.loads((await _cli(env, "status", "--json", "--nats", server.url)).stdout)
        assert [(r["host"], r["turn"], r["presence"]) for r in rows] == [
            ("gone", "unknown", "running")
        ]
        table = (await _cli(env, "status", "--nats", server.url)).stdout
        assert "gone: stale since" in table
        assert " idle " not in table and "working" not in table




async def test_refused_credentials_are_reported_with_the_reason(tmp_path: Path) -> None:
    good_seed, good_public = nkey_pair()
    bad_seed, _ = nkey_pair()
    good, bad = tmp_path / "good.nk", tmp_path / "bad.nk"
    good.write_text(good_seed + "\n")
    bad.write_text(bad_seed + "\n")
    good.chmod(0o600)
    bad.chmod(0o600)
    config = f"authorization {{ users = [ {{ nkey: {good_public} }} ] }}\n"
    env = daemon_env(tmp_path / "viewer")
    with anyio.fail_after(60), nats_server(tmp_path / "nats", config=config) as server:
        refused = await _cli(env, "status", "--nats", server.url, "--nats-nkey", os.fspath(bad))
        assert refused.returncode == 2
        assert f"refused the credentials (nkey seed file {bad})" in refused.stderr
        assert "authorization failed" in refused.stderr
        async with DaemonProcess(tmp_path / "d" / "state", extra_args=_nats_args(
            server, "h", "--nats-nkey", os.fspath(bad))) as daemon:

            async def reported() -> bool:
                error = (await _nats_counters(daemon))["last_error"] or ""
                return "refused the credentials" in error and "authorization" in error.lower()

            await poll_until(reported, "the refusal in the publisher's counters")
            assert (await _nats_counters(daemon))["connected"] is False
        async with DaemonProcess(tmp_path / "d2" / "state", extra_args=_nats_args(
            server, "h2", "--nats-nkey", os.fspath(good))) as daemon:
            await poll_until(lambda: _connected(daemon), "a connection with the good key")
        accepted = await _cli(env, "status", "--nats", server.url, "--nats-nkey", os.fspath(good))
        assert accepted.returncode == 0, accepted.stderr
        assert "h2: " in accepted.stdout


def _tls_files(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, made with the real
    ``openssl`` command."""
    directory.mkdir(parents=True, exist_ok=True)
    f = {name: directory / f"{name}.pem" for name in
         ("ca", "ca-key", "server", "server-key", "client", "client-key")}

    def run(*argv: str) -> None:
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
        "-keyout", os.fspath(f["ca-key"]), "-out", os.fspath(f["ca"]))
    for name, extra in (("server", "subjectAltName=IP:127.0.0.1"),
                        ("client", "extendedKeyUsage=clientAuth")):
        csr = directory / f"{name}.csr"
        ext = directory / f"{name}.ext"
        ext.write_text(extra + "\n")
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
            "-keyout", os.fspath(f[f"{name}-key"]), "-out", os.fspath(csr))
        run("x509", "-req", "-in", os.fspath(csr), "-CA", os.fspath(f["ca"]), "-CAkey",
            os.fspath(f["ca-key"]), "-CAcreateserial", "-days", "2", "-extfile",
            os.fspath(ext), "-out", os.fspath(f[name]))
    return f


async def test_a_tls_client_certificate_is_used_and_its_absence_reported(
    tmp_path: Path,
) -> None:
    f = _tls_files(tmp_path / "tls")
    config = (f'tls {{ cert_file: "{f["server"]}", key_file: "{f["server-key"]}", '
              f'ca_file: "{f["ca"]}", verify: true }}\n')
    env = daemon_env(tmp_path / "viewer")
    with anyio.fail_after(60), nats_server(tmp_path / "nats", config=config) as server:
        url = f"tls://127.0.0.1:{server.port}"
        async with DaemonProcess(tmp_path / "d" / "state", extra_args=[
            "--nats", url, "--nats-host", "t", "--nats-tls-ca", os.fspath(f["ca"]),
            "--nats-tls-cert", os.fspath(f["client"]),
            "--nats-tls-key", os.fspath(f["client-key"]),
        ]) as daemon:
            await poll_until(lambda: _connected(daemon), "a TLS connection with the cert")
        unknown_ca = await _cli(env, "status", "--nats", url, "--json")
        assert unknown_ca.returncode == 2
        assert url in unknown_ca.stderr and "certificate verify failed" in unknown_ca.stderr
        assert "not signed by a CA this host trusts" in unknown_ca.stderr
        # The server's CA from the config file, and no client certificate: refused by the server.
        conf = tmp_path / "config.toml"
        conf.write_text(f'[nats]\ntls_ca = "{f["ca"]}"\n')
        no_cert = await _cli({**env, "PANEWARD_CONFIG": os.fspath(conf)},
                             "status", "--nats", url, "--json")
        assert no_cert.returncode == 2
        # The alert, or (TLS 1.3, the handshake already done) the closed connection: either
        # way the reason names the missing certificate.
        assert url in no_cert.stderr and "no TLS client certificate" in no_cert.stderr
        conf.write_text(f'[nats]\ntls_ca = "{f["ca"]}"\ntls_cert = "{f["client"]}"\n'
                        f'tls_key = "{f["client-key"]}"\n')
        with_cert = await _cli({**env, "PANEWARD_CONFIG": os.fspath(conf)},
                               "status", "--nats", url, "--json")
        assert with_cert.returncode == 0, with_cert.stderr
        assert json.loads(with_cert.stdout) == []  # the daemon published no session


async def _connected(daemon: DaemonProcess) -> bool:
    return bool((await _nats_counters(daemon))["connected"])


async def test_a_stopped_server_never_stalls_hook_intake(tmp_path: Path) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst([f"p{i}" for i in range(4)], 250, me, token)  # 2,004 transitions
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        async with DaemonProcess(tmp_path / "d" / "state", extra_args=_nats_args(
            server, "h", "--nats-buffer", "500")) as daemon:
            await poll_until(lambda: _connected(daemon), "the publisher connected")
            server.pause()  # accepts, never answers
            try:
                await raw_send(daemon.hook_socket, frames(hooks))
                # Intake goes on: every hook is delivered and numbered while nothing is acked.
                await daemon.wait_delivered(len(hooks))
                assert await _hub_seq(daemon) == len(hooks)
                stats = await _nats_counters(daemon)
                assert stats["acked_seq"] < len(hooks)
                assert stats["buffered"] == 500
                assert stats["dropped"] == len(hooks) - stats["accepted"] > 0
                assert stats["gaps"] == 1
                table = (await _cli(daemon.env, "status")).stdout
                assert (f"nats running ({stats['buffered']} waiting for the server, "
                        f"{stats['dropped']} dropped)") in table
            finally:
                server.resume()
            await published(daemon)
            stats = await _nats_counters(daemon)
        messages = await read_stream(server.url)
        seqs = _audit(messages)["h"]
        assert len(seqs) == len(set(seqs)) == stats["accepted"]
        gaps = [json.loads(m.data) for m in messages if m.subject == "paneward.h.gap"]
        assert [(g["next_seq"], g["dropped"], g["reason"]) for g in gaps] == [
            (stats["accepted"] + 1, stats["dropped"], "nats_buffer_full")
        ]
        assert set(seqs) == set(range(1, stats["accepted"] + 1))
        # A viewer with no daemon sees the hole: `watch --nats` prints the Gap with its host.
        watcher = WatchProcess(daemon_env(tmp_path / "viewer"), since=0)
        watcher.args += ["--nats", server.url]
        process = await anyio.open_process(watcher.args, env=watcher.env,
                                           stdin=subprocess.DEVNULL)
        async with process, anyio.create_task_group() as tg:
            watcher.process = process
            tg.start_soon(watcher._read)
            await watcher.wait_for(lambda items: any(i["type"] == "Gap" for i in items),
                                   "the Gap line")
            gap = next(i for i in watcher.items if i["type"] == "Gap")
            assert (gap["host"], gap["next_seq"], gap["dropped"]) == (
                "h", stats["accepted"] + 1, stats["dropped"])
            process.terminate()


async def test_a_daemon_restarted_before_the_acks_fills_the_hole_from_its_journal(
    tmp_path: Path,
) -> None:
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst([f"j{i}" for i in range(2)], 100, me, token)
    state = tmp_path / "d" / "state"
    with anyio.fail_after(120), nats_server(tmp_path / "nats") as server:
        async with DaemonProcess(state, extra_args=_nats_args(server, "h")) as daemon:
            first = hooks[:100]
            await raw_send(daemon.hook_socket, frames(first))
            await daemon.wait_delivered(len(first))
            await published(daemon)
            server.pause()
            try:
                await raw_send(daemon.hook_socket, frames(hooks[100:]))
                await daemon.wait_delivered(len(hooks))
                assert (await _nats_counters(daemon))["buffered"] > 0
                assert await daemon.stop() == 0  # what waited for acks goes with it
            finally:
                # Killed while stopped: what the daemon wrote to it and it never read is lost.
                server.kill()
            server.start()
        async with DaemonProcess(state, extra_args=_nats_args(server, "h")) as daemon:
            await published(daemon)
            seq = await _hub_seq(daemon)
        seqs = _audit(await read_stream(server.url))["h"]
        assert len(seqs) == len(set(seqs))
        assert set(seqs) == set(range(1, seq + 1))


_PROBE = """
import sys, json
sys.argv = ["paneward", *sys.argv[1:]]
from actors.cli import _dispatch
try:
    _dispatch(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "argv", [["status"], ["status", "--json"], ["watch", "--json"], ["run", "--help"]]
)
def test_nats_py_is_not_imported_unless_nats_is_used(argv: list[str], tmp_path: Path) -> None:
    """With ``$NATS_URL`` set and a ``[nats]`` table in the config file, the plain commands
    (no ``--nats``) never load nats-py; neither does the hook."""
    config = tmp_path / "config.toml"
    config.write_text('[nats]\nurl = "nats://127.0.0.1:1"\n')
    env = {"PANEWARD_SOCKET": os.fspath(tmp_path / "hook.sock"), "PATH": "/usr/bin:/bin",
           "NATS_URL": "nats://127.0.0.1:1", "PANEWARD_CONFIG": os.fspath(config)}
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=30)
    loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert [m for m in loaded if m == "nats" or m.startswith("nats.")] == []
    hook = subprocess.run(
        [sys.executable, "-c", "import sys, json\nfrom actors.cli import hook_client\n"
         "hook_client.main(['--harness', 'claude-code'])\n"
         "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"],
        cwd=ROOT, env=env, input="{}", capture_output=True, text=True, check=False, timeout=30,
    )
    loaded = json.loads(hook.stderr.strip().splitlines()[-1])
    assert [m for m in loaded if m == "nats" or m.startswith("nats.")] == []


def test_the_daemon_module_does_not_import_nats_py() -> None:
    code = "import sys, actors.cli.daemon; print('nats' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "False"


_WITHOUT_NATS_PY = (
    "import sys\nsys.modules['nats'] = None  # as if paneward[nats] were not installed\n"
    "sys.argv = sys.argv[1:]\nfrom actors.cli import entry\nsys.exit(entry())\n"
)


async def test_without_nats_py_nats_url_alone_is_a_warning_and_nats_an_error(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    env = daemon_env(state, NATS_URL="nats://127.0.0.1:1")
    prefix = [sys.executable, "-c", _WITHOUT_NATS_PY]
    with anyio.fail_after(60):
        async with DaemonProcess(state, env=env, prefix=prefix) as daemon:
            assert "nats" not in (await daemon.counters())
        assert "$NATS_URL is set but nats-py is not installed" in daemon.stderr()
        done = await anyio.to_thread.run_sync(lambda: subprocess.run(
            [*prefix, os.fspath(PANEWARD), "run", "--state-dir", os.fspath(state),
             "--no-discovery", "--nats", "nats://127.0.0.1:1"],
            env=env, capture_output=True, text=True, timeout=30, check=False, cwd=ROOT,
        ))
    assert done.returncode == 1
    assert "needs nats-py: pip install 'paneward[nats]'" in done.stderr


def test_a_secret_in_the_url_is_refused(tmp_path: Path) -> None:
    env = daemon_env(tmp_path / "state")
    done = subprocess.run(
        [os.fspath(PANEWARD), "run", "--state-dir", os.fspath(tmp_path / "state"),
         "--no-discovery", "--nats", "nats://me:hunter2@127.0.0.1:4222"],
        env=env, capture_output=True, text=True, check=False, timeout=30,
    )
    assert done.returncode == 1
    assert "never in the URL" in done.stderr
    assert "hunter2" not in done.stderr


async def test_transitions_one_at_a_time_never_crash_the_publisher(tmp_path: Path) -> None:
    """A transition that arrives alone (nothing else queued behind it) is published like one
    of a burst: the publisher's intake takes what else is queued only when there is some."""
    me, token = os.getpid(), start_token(os.getpid())
    hooks = burst(["lone"], 3, me, token)
    with anyio.fail_after(60), nats_server(tmp_path / "nats") as server:
        daemon = DaemonProcess(tmp_path / "d" / "state", extra_args=_nats_args(server, "h"))
        async with daemon:
            await poll_until(lambda: _connected(daemon), "the publisher connected")
            for n, hook in enumerate(hooks, 1):
                await raw_send(daemon.hook_socket, frames([hook]))
                await daemon.wait_delivered(n)
                await published(daemon)
            status = await daemon.status()
            assert status["statistics"]["supervisor"]["actor_states"]["nats"] == "running"
            assert status["statistics"]["supervisor"]["restarts"] == 0
        seqs = _audit(await read_stream(server.url))["h"]
        assert seqs == list(range(1, len(hooks) + 1))
