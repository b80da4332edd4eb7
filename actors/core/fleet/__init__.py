"""The fleet, pure: the other machines this daemon follows and the carriers that bring them.

:mod:`.hosts` (the hosts file, the ssh command line, unreachable reasons), :mod:`.transport`
(what a link of either carrier hands the merged view), :mod:`.follow` (following one host's
stream: resume by seq, identity, health), :mod:`.nats` (NATS subjects, ids, the publish
buffer).
"""
