"""The supervisor's machinery: the one wiring contract and the mailbox, the session actor, the
broadcast hub, and opening files without following links
(``files``: paneward's directories and sockets, evidence files)."""
