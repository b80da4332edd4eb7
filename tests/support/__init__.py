"""What the tests and the benchmarks share: helpers, never a test.

- :mod:`.daemon` -- a real ``paneward run`` on a private state directory, ``watch`` clients,
  owner processes, hook payloads as the harnesses send them;
- :mod:`.tmux` -- a real tmux server on a private socket, an attached client in a PTY;
- :mod:`.ssh` -- private ``sshd`` servers on loopback with throwaway keys;
- :mod:`.nats` -- a real ``nats-server -js`` and an independent reader of its stream;
- :mod:`.dbus` -- a private session bus and a notification server on it;
- :mod:`.polling` -- waiting for a condition under a deadline;
- :mod:`.sinks` -- a stand-in evidence sink that validates every message with the wire codec;
- :mod:`.examples` -- one valid example of every message;
- :mod:`.replay` -- the real Claude Code and Codex captures turned into messages;
- :mod:`.reference_model` -- ``SessionTable``, the whole system as one synchronous call stack;
- :mod:`.captures` -- the captured hook payloads of the harnesses, replayed;
- :mod:`.forwarders` -- paneward's in-process JavaScript forwarders run under the real ``node``;
- :mod:`.mock_apis` -- the loopback model APIs the real agent CLIs talk to;
- :mod:`.wrap` -- a frame listener socket and a private tmux server for the real CLIs;
- :mod:`.agents` -- where the real agent CLIs are installed and how they are configured;
- :mod:`.wrapped` -- driving a real CLI under ``paneward wrap`` by its status frames;
- :mod:`.lab` -- a real CLI in a pane of a private tmux server, with the real daemon;
- :mod:`.real_panes` -- real CLIs in tmux panes with ``paneward run --tmux``, read back.

The data the tests replay (real captures of the agents) is in ``tests/fixtures/``:
:data:`FIXTURES`.
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]
#: The real captures the tests replay.
FIXTURES = ROOT / "tests" / "fixtures"
