"""The supervisor's machinery: the one wiring contract and the mailbox, the session actor and
the table of live ones, the long-running children's supervision and the broadcast hub.

- :mod:`.mailbox`: the wiring contract (``EvidenceSink``, ``ActorHost``, ``Actor``, ``Listener``),
  the bounded mailbox, the restart-intensity rule;
- :mod:`.session`: the session actor around the pure reducer;
- :mod:`.sessions`: the live session actors (spawned on first evidence, stopped after crashes,
  retired);
- :mod:`.children`: the long-running actors (discovery, listeners, sinks), restarted one_for_one;
- :mod:`.hub`: the broadcast hub (numbering, subscriptions).
"""
