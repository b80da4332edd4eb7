"""The supervisor's machinery: the one wiring contract and the mailbox, the session actor, the
broadcast hub, and the synchronous reference table."""
