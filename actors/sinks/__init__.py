"""What renders published activity out. Sinks read subscriptions; they never re-decide an activity.

- :mod:`.tmux` -- per-pane badges and pane lifecycle through one control-mode client;
- :mod:`.tmux_client` -- that client: one ``tmux -C attach`` process, pipelined command batches;
- :mod:`.tmux_output` -- OSC 7501 records read from the panes' output, one output client per
  tmux session that holds a pane that needs it;
- :mod:`.store` -- the SQLite session catalog and transition journal;
- :mod:`.nats` -- every transition published to a NATS JetStream stream and KV bucket;
- :mod:`.notify` -- notifications when an agent needs the user and they are looking elsewhere.
"""
