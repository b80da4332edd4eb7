"""The README's embedding example runs as printed, its two commands are the real ones, and
docs/json.md's inbound examples decode."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_embedding_example_runs_and_prints_the_transition() -> None:
    block = re.search(r"```python\n(.*?)```", README, re.S)
    assert block is not None
    result = subprocess.run(
        [sys.executable, "-c", block.group(1)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "%7 running unknown None"


def test_readme_opens_with_the_two_commands() -> None:
    first_block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line for line in first_block.splitlines() if line and not line.startswith("#")]
    assert commands[0].startswith("git clone ") and commands[0].endswith(" && cd paneward")
    assert commands[1].endswith("pip install .")
    assert commands[2] == "export PATH=~/.paneward/bin:$PATH"
    assert commands[3] == "paneward run --tmux"
    assert commands[4] == "bash .ci/run"
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_readme_says_up_front_what_paneward_is_and_needs() -> None:
    """Before its first command: that it observes (starts no agent), Linux and why, and the
    Python the package requires; every command of the README comes after what it needs (the
    clone before `pip install .`, the PATH line before a bare `paneward`)."""
    import tomllib

    head = README.split("```sh\n", 1)[0]
    for words in ("observes", "never starts, stops or answers one", "Linux", "inotify",
                  "pidfd", "/proc"):
        assert words in head, words
    python = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert python == ">=3.11" and "Python ≥ 3.11" in head
    lines = [line.strip() for block in re.findall(r"```sh\n(.*?)```", README, re.S)
             for line in block.splitlines() if line.strip() and not line.startswith("#")]

    def first(predicate: Callable[[str], bool]) -> int:
        return next(i for i, line in enumerate(lines) if predicate(line))

    clone = first(lambda line: line.startswith("git clone ") and "cd paneward" in line)
    assert clone < first(lambda line: "pip install ." in line)
    assert first(lambda line: line.startswith("export PATH=")) < first(
        lambda line: line.startswith("paneward ")
    )


def test_docs_json_gives_an_inbound_example_of_every_message_that_decodes() -> None:
    """docs/json.md's inbound examples are real: each decodes with the one codec, and every
    inbound message type has one."""
    import messages
    from messages.codec import INBOUND_TYPES

    text = (ROOT / "docs" / "json.md").read_text()
    inbound = text.split("\n## Inbound\n", 1)[1]
    blocks = re.findall(r"```json\n(.*?)```", inbound, re.S)
    decoded = [messages.decode_inbound(block.strip()) for block in blocks]
    names = [type(message).__name__ for message in decoded]
    assert sorted(names) == sorted(kind.__name__ for kind in INBOUND_TYPES)
