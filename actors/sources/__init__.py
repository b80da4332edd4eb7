"""What feeds evidence in: the hook listener, the control server (both accept through
``admission``), the pid watcher, the pane mapper, the process reads (procfs), the file
watches (fswatch), opening files without following links (files: paneward's directories and
sockets, evidence files) and the PTY status feed. They know no harness: what they need of the
harnesses is handed to them (``actors.harnesses.catalog``)."""
