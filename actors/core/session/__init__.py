"""The session, pure: the state machine and what feeds it its words.

- :mod:`.reducer` (the state machine: the only place a published field is decided),
  :mod:`.routing` (which sessions a message concerns), :mod:`.causes` (the cause word of a
  transition);
- :mod:`.harness` (what a harness package declares), :mod:`.hints` (shared payload helpers);
- :mod:`.pane_map` (which session a pane shows, from the process tree), :mod:`.pids` (the pid
  watcher's liveness round).
"""
