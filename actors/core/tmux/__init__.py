"""tmux, pure: what the bridge writes to tmux and how it reads what tmux says.

:mod:`.badges` (which options each pane carries), :mod:`.panes` (pane listings into host
messages), :mod:`.protocol` (control-mode quoting, replies and notifications), :mod:`.hold`
(which daemon drives a server), :mod:`.health` (whether the bridge still works), :mod:`.output`
(OSC 7501 read from the panes' output: which panes, tmux's output lines, whom a record is about).
"""
