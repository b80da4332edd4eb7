"""What feeds evidence in. Sources know no harness: what they need of the harnesses is handed
to them (``actors.harnesses.catalog``).

- :mod:`.hook_listener` -- the daemon's end of ``paneward hook`` and Claude ``http`` hooks;
- :mod:`.control_server` -- the socket ``status``, ``watch``, ``next`` and ``wait`` read, with
  :mod:`.watch_fanout` (one hub subscription for every watcher); the CLI's client of it is
  :mod:`actors.cli.control_client`;
- :mod:`.admission` -- the accept loop both listeners share (caps, deadlines);
- :mod:`.pid_watcher` -- proves that the owners of live sessions are alive, and says when not;
- :mod:`.pane_mapper` -- which session runs in which pane, from the process tree;
- :mod:`.procfs` -- process identity from the operating system (start tokens, the process tree);
- :mod:`.fswatch` -- inotify change notifications on the event loop;
- :mod:`.files` -- opening files without following links (paneward's directories and sockets,
  evidence files);
- :mod:`.fleet_link` -- one fleet host's stream over the user's OpenSSH client;
- :mod:`.nats_link` -- every fleet host publishing to one NATS server (the second transport);
- :mod:`.fleet` -- the fleet's merged view of every remote session (what the transports deliver);
- :mod:`.fleet_file` -- the hosts file followed while the daemon runs (links added, removed);
- :mod:`.pty_status` -- program status from PTY bytes, for hosts that own their PTYs.
"""
