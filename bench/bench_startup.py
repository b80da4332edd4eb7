"""Short-lived commands start fast: wall time against ``python -c pass``, as users install it.

Run: ``.venv/bin/python bench/bench_startup.py [--runs 40]``

paneward is installed the way the README installs it (``pip install .`` into a fresh venv, not
editable: the development venv's editable finder costs every import, ``python -c pass`` included)
and a real daemon (``paneward run`` with discovery on) is listening. Interleaved, ``--runs``
times each, after one warm-up: ``paneward status`` (the table, rendered by the daemon),
``paneward status --json``, ``paneward inject MESSAGE`` (one message sent), and ``paneward
hook`` (the payload as the last argument, as Codex ``notify`` passes it), each right after a
run of the baseline, ``<venv>/bin/python -c pass`` (an interpreter that starts and exits).

Two ratios per command. The ratio of the medians (every baseline run against every run of the
command). And the median of the paired ratios: each run against the baseline run just before
it. This machine's speed drifts in phases of a second or so: the CPU time of ``python -c pass``
went from 16.5 to 34 ms and back within one minute (bench/RESULTS.md). A phase
that catches more runs of one command than of the baseline moves the first ratio; a pair, a
hundred milliseconds apart, sits in one phase.

Every run starts 80 ms after the one before it, and the bench spins meanwhile. By then the
daemon has done what the last command started (a transition is committed ~50 ms after it).
Back to back, the run right after ``inject`` was slow: the ``hook`` in the old order, the
baseline run before ``hook`` in the paired one. Spinning, not sleeping: after an idle gap this
VM starts the next process slower. Also the modules each command imports (``-X
importtime``), ours and third-party.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.fspath(ROOT))

from actors.sinks.store import DEFAULT_BATCH_MS  # noqa: E402
from tests.support.daemon import DaemonProcess, daemon_env  # noqa: E402

PAYLOAD = json.dumps({"type": "agent-turn-complete", "thread-id": "t", "cwd": "/w"})
BASELINE = "python -c pass"
# The store's batch window plus a margin for the commit itself.
SETTLE_S = DEFAULT_BATCH_MS / 1000 + 0.03
MESSAGE = json.dumps(
    {
        "type": "Acknowledge",
        "at_ms": 1_800_000_000_000,
        "key": {"harness": "claude-code", "session_id": "startup"},
    }
)


def installed_venv(where: Path) -> Path:
    """A venv with paneward installed as users install it: ``pip install .`` (a current pip,
    not editable, with its dependencies: ``inject`` needs msgspec)."""
    import venv

    venv.create(where, with_pip=False)
    python = where / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", os.fspath(python), "install", "-q",
         os.fspath(ROOT)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return where / "bin"


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()  # first SETTLE_S for what the last command started
    while time.perf_counter() - start < SETTLE_S:
        pass  # spinning, not sleeping: an idle vCPU starts the next run slow
    start = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def imported(python: str, argv: list[str], env: dict[str, str]) -> list[str]:
    """The modules ``paneward ARGV`` imports that ``python -c pass`` does not."""
    # ``paneward hook`` ends in ``os._exit`` (no ``finally``, no ``atexit``): report there too.
    code = (
        "import os, sys; sys.argv = ['paneward', *sys.argv[1:]]\n"
        "def report():\n"
        "    loaded = sorted(sys.modules)\n"
        "    import json; print(json.dumps(loaded), file=sys.stderr); sys.stderr.flush()\n"
        "_exit = os._exit\n"
        "def _reported_exit(code): report(); _exit(code)\n"
        "os._exit = _reported_exit\n"
        "from actors.cli import entry\n"
        "try:\n    entry()\nfinally:\n    report()\n"
    )
    done = subprocess.run(
        [python, "-c", code, *argv], env=env, capture_output=True, text=True, check=False
    )
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    bare = subprocess.run(
        [python, "-c", "import sys, json; print(json.dumps(sorted(sys.modules)))"],
        env=env, capture_output=True, text=True, check=True,
    )
    return sorted(loaded - set(json.loads(bare.stdout)) - {"json", "json.decoder",
                                                            "json.encoder", "json.scanner",
                                                            "_json"})


async def amain(runs: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pw-bench-startup-") as raw:
        tmp = Path(raw)
        bin_dir = installed_venv(tmp / "venv")
        python, script = os.fspath(bin_dir / "python"), os.fspath(bin_dir / "paneward")
        state = tmp / "state"
        for home in ("claude", "codex", "hermes"):
            (tmp / "homes" / home).mkdir(parents=True)
        async with DaemonProcess(state, discovery=True, env=daemon_env(state)) as daemon:
            env = daemon.env
            variants = {
                BASELINE: [python, "-c", "pass"],
                "paneward status": [script, "status"],
                "paneward status --json": [script, "status", "--json"],
                "paneward inject": [script, "inject", MESSAGE],
                "paneward hook": [script, "hook", "--harness", "codex", PAYLOAD],
            }
            samples: dict[str, list[float]] = {name: [] for name in variants}
            paired: dict[str, list[float]] = {name: [] for name in variants if name != BASELINE}
            for argv in variants.values():
                wall(argv, env)
            for _ in range(runs):
                for name in paired:
                    base = wall(variants[BASELINE], env)
                    value = wall(variants[name], env)
                    samples[BASELINE].append(base)
                    samples[name].append(value)
                    paired[name].append(value / base)
            modules = {
                name: imported(python, argv[1:], env)
                for name, argv in variants.items()
                if name != BASELINE
            }
    base = statistics.median(samples[BASELINE])
    for name, values in samples.items():
        median = statistics.median(values)
        ordered = sorted(values)
        line = (
            f"{name}: median {median * 1000:.1f} ms (min {ordered[0] * 1000:.1f}, max "
            f"{ordered[-1] * 1000:.1f}) -> {median / base:.2f}x python -c pass"
        )
        if name in paired:
            ratios = sorted(paired[name])
            decile = len(ratios) // 10
            line += (
                f"; paired: median {statistics.median(ratios):.2f}x (p10 {ratios[decile]:.2f}, "
                f"p90 {ratios[-1 - decile]:.2f}) over {len(ratios)} pairs"
            )
        print(line)
    for name, mods in modules.items():
        ours = [m for m in mods if m.split(".")[0] in {"actors", "messages", "supervisor"}]
        third = sorted({m.split(".")[0] for m in mods} - {"actors", "messages", "supervisor"})
        print(f"{name} imports: ours {', '.join(ours)}; others {', '.join(third)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    anyio.run(amain, parser.parse_args().runs)


if __name__ == "__main__":
    main()
