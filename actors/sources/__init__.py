"""What feeds evidence in: the hook listener, the control server (both accept through
``admission``), the pid watcher, the pane mapper, the process reads (procfs) and the PTY status
feed. They know no harness: what they need of the harnesses is handed to them
(``actors.harnesses.catalog``)."""
