"""Benchmark ``paneward wrap`` against a bare PTY relay measured in the same run.

    .venv/bin/python bench/bench_wrap.py [--mb 200] [--runs 3] [--keys 1000]

1. throughput: ``cat`` of an N MB file through the wrapper vs through the bare relay (stdout
   to /dev/null, so only the relays are compared), plain text and ANSI-dense TUI output (the
   real Claude Code and Codex PTY captures of tests/fixtures/pty, repeated); median wall time
   of ``--runs``.
2. peak RSS of the wrapper process (``ru_maxrss`` from ``wait4`` after the 200 MB run).
3. keystroke-to-echo latency: one byte written to an outer PTY, read back after the inner PTY
   (running ``cat``) echoed it through the relay; ``--keys`` samples each, p50/p99.

The bare relay (``--bare-relay -- COMMAND``) is the minimal relay with the wrapper's I/O
pattern (non-blocking master, persistent poll, up to 8 reads of 64 KiB per wake-up).
4. the OSC parser alone on both inputs vs a loop that only locates every ESC byte.
"""

from __future__ import annotations

import os
import pty
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
READ_SIZE = 65536  # the wrapper's actors.cli.wrap.READ_SIZE

PLAIN_LINE = (b"The quick brown fox jumps over the lazy dog 0123456789 " * 2)[:119] + b"\n"
# What coding agents' TUIs really write: the raw PTY captures of Claude Code and Codex in
# tests/fixtures/pty (an ESC every ~10 bytes, an OSC every 0.3-1 KB, OSC 7501 records among
# them), back to back.
ANSI_LINE = b"".join(
    p.read_bytes() for p in sorted((REPO / "tests" / "fixtures" / "pty").glob("*/raw.bin"))
)


def bare_relay(command: list[str]) -> int:
    """The baseline: fork on a PTY, relay both ways, no parsing, no reporting -- with the
    wrapper's own I/O pattern: a non-blocking master, one persistent ``poll`` registration, and
    up to 8 reads of 64 KiB per wake-up (so the comparison is the parsing and reporting, not
    the number of system calls)."""
    import fcntl

    pid, master = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    fcntl.fcntl(master, fcntl.F_SETFL, fcntl.fcntl(master, fcntl.F_GETFL) | os.O_NONBLOCK)
    stdin_tty = os.isatty(0)
    saved = None
    if stdin_tty:
        import termios

        saved = termios.tcgetattr(0)
        tty.setraw(0)
    poller = select.poll()
    poller.register(master, select.POLLIN)
    poller.register(0, select.POLLIN)
    try:
        while True:
            for fd, _mask in poller.poll():
                if fd == master:
                    for _ in range(8):
                        try:
                            data = os.read(master, READ_SIZE)
                        except BlockingIOError:
                            break
                        except OSError:
                            data = b""
                        if not data:
                            return _reap(pid, saved)
                        view = memoryview(data)
                        while view:
                            view = view[os.write(1, view) :]
                else:
                    data = os.read(0, READ_SIZE)
                    if not data:
                        poller.unregister(0)
                    else:
                        os.write(master, data)
    finally:
        if saved is not None:
            import termios

            termios.tcsetattr(0, termios.TCSAFLUSH, saved)


def _reap(pid: int, saved: object) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


WRAP = [sys.executable, "-m", "actors.cli.wrap", "--"]
BARE = [sys.executable, str(Path(__file__).resolve()), "--bare-relay", "--"]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    env["PANEWARD_SOCKET"] = str(tmp / "no-daemon.sock")
    env["PYTHONPATH"] = str(REPO)
    return env


def _run_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink, open(os.devnull, "rb") as empty:
        proc = subprocess.Popen(cmd, stdin=empty, stdout=sink, env=env, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, cmd
    return elapsed, usage.ru_maxrss


def _latencies(cmd: list[str], env: dict[str, str], keys: int) -> list[float]:
    master, slave = os.openpty()
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, start_new_session=True
    )
    os.close(slave)
    try:
        _expect(master, b"")  # let it start
        samples = []
        for i in range(keys + 20):
            key = b"abcdefghijklmnopqrstuvwxyz"[i % 26 : i % 26 + 1]
            start = time.perf_counter()
            os.write(master, key)
            _expect(master, key)
            if i >= 20:  # warm-up keystrokes are not counted
                samples.append(time.perf_counter() - start)
        return samples
    finally:
        os.write(master, b"\x04")
        os.write(master, b"\x04")
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)


def _expect(fd: int, want: bytes) -> None:
    got = b""
    deadline = time.monotonic() + 10
    while not got.endswith(want) or (not want and not got):
        if not want:
            # startup: wait until the child's PTY echo works (send nothing, just settle)
            time.sleep(0.5)  # bench only: let the wrapped cat start before timing
            return
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError(f"no echo of {want!r}")
        got += os.read(fd, 1024)


def parser_cost(mb: int, line: bytes) -> tuple[float, float]:
    """Seconds to pass ``mb`` MB of ``line`` (64 KiB chunks) through ``OscParser.feed`` vs the
    floor: a loop that only locates every ESC byte of each chunk with ``bytes.find``."""
    from actors.core.ingress.osc import OscParser

    chunk = (line * (65536 // len(line) + 1))[:65536]
    n = mb * 16
    start = time.perf_counter()
    for _ in range(n):
        at = chunk.find(b"\x1b")
        while at >= 0:
            at = chunk.find(b"\x1b", at + 1)
    floor = time.perf_counter() - start
    parser = OscParser(strip_status=True)
    feed = parser.feed
    start = time.perf_counter()
    for _ in range(n):
        feed(chunk)
    return time.perf_counter() - start, floor


def _write_data(path: Path, line: bytes, mb: int) -> None:
    with path.open("wb") as f:
        block = (line * (1024 * 1024 // len(line) + 1))[: 1024 * 1024]
        for _ in range(mb):
            f.write(block)


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv: list[str]) -> int:
    if argv[:2] == ["--bare-relay", "--"]:
        return bare_relay(argv[2:])
    mb = int(argv[argv.index("--mb") + 1]) if "--mb" in argv else 200
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else 3
    keys = int(argv[argv.index("--keys") + 1]) if "--keys" in argv else 1000
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        env = _env(tmp)
        rss: list[int] = []
        results: dict[str, tuple[list[float], list[float]]] = {}
        for kind, line in (("plain text", PLAIN_LINE), ("ANSI-dense", ANSI_LINE)):
            data = tmp / "data.txt"
            _write_data(data, line, mb)
            bare_t, wrap_t = [], []
            for _ in range(runs):
                bare_t.append(_run_timed([*BARE, "cat", str(data)], env)[0])
                t, maxrss = _run_timed([*WRAP, "cat", str(data)], env)
                wrap_t.append(t)
                rss.append(maxrss)
            results[kind] = (bare_t, wrap_t)
        bare_lat = _latencies([*BARE, "cat"], env, keys)
        wrap_lat = _latencies([*WRAP, "cat"], env, keys)
    for kind, (bare_t, wrap_t) in results.items():
        b, w = statistics.median(bare_t), statistics.median(wrap_t)
        ratios = sorted(x / y for x, y in zip(wrap_t, bare_t, strict=True))
        print(
            f"cat {mb} MB {kind}: bare relay {b:.3f} s, wrapper {w:.3f} s, ratio {w / b:.3f} "
            f"(medians of {runs}; per-run ratios min {ratios[0]:.3f} / max {ratios[-1]:.3f}; "
            f"all bare {[round(x, 3) for x in bare_t]}, wrap {[round(x, 3) for x in wrap_t]})"
        )
    print(f"wrapper peak RSS (ru_maxrss): {max(rss) / 1024:.1f} MB")
    for name, lat in (("bare relay", bare_lat), ("wrapper", wrap_lat)):
        print(
            f"keystroke echo {name}: p50 {_pct(lat, 0.5) * 1e3:.3f} ms, "
            f"p99 {_pct(lat, 0.99) * 1e3:.3f} ms, max {max(lat) * 1e3:.3f} ms (n={len(lat)})"
        )
    added = _pct(wrap_lat, 0.99) - _pct(bare_lat, 0.99)
    print(f"added keystroke latency p99 (wrapper p99 - bare p99): {added * 1e3:.3f} ms")
    for kind, line in (("plain text", PLAIN_LINE), ("ANSI-dense", ANSI_LINE)):
        parsed, floor = parser_cost(mb, line)
        print(f"parser on {mb} MB {kind} in 64 KiB chunks: {parsed:.3f} s "
              f"(floor, every ESC located with bytes.find: {floor:.3f} s, "
              f"ratio {parsed / floor:.2f})")
    print(f"self ru_maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
