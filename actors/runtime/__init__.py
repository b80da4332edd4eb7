"""The supervisor's machinery: the one wiring contract and the mailbox, the session actor and
the broadcast hub."""
