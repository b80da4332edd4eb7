"""The README's embedding example runs as printed, its two commands are the real ones, and
docs/json.md's inbound examples decode."""

from __future__ import annotations

import re
import subprocess
import sys
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
    assert commands[0].endswith("paneward run --tmux")
    assert commands[1] == "bash .ci/run"
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


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
