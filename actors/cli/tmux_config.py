"""``paneward tmux-config``: the tmux snippet that shows the badges and binds ``next`` / ``pick``.
"""

from __future__ import annotations

import sys

from actors.cli.common import EXIT_OK

# Typing only (typing and argparse would cost the command's start milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

__all__ = ["add_tmux_config", "run_tmux_config"]


def add_tmux_config(parser: argparse.ArgumentParser) -> None:
    del parser


def run_tmux_config(args: argparse.Namespace) -> int:
    import os
    import shlex

    from actors.sinks.tmux import tmux_config_snippet

    # The key bindings run this paneward: tmux's run-shell may not have its venv on $PATH.
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    program = None
    if os.path.basename(script) == "paneward" and os.access(script, os.X_OK):
        program = shlex.quote(script)
    print(tmux_config_snippet(program), end="")
    return EXIT_OK
