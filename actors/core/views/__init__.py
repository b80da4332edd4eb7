"""What the user is shown and where it takes them, pure.

:mod:`.attention` (the attention queue, elapsed times, ``wait`` predicates), :mod:`.jump`
(the tmux commands of ``next`` and ``pick``), :mod:`.notify` (desktop notifications: who, how
often, what text), :mod:`.redact` (what others may see of a reason), :mod:`.status_table` (the
``status`` table), :mod:`.top` (``top``'s rows and strips).
"""
