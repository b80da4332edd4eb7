"""Every pure decision, knowing nothing above it: no I/O, no event loop, no process or database
library (tests/test_design.py checks it on ``sys.modules``). The reducer is the only place a
published field is decided.

One sub-package per role:

- :mod:`.session`: the state machine and what feeds it (reducer, routing, causes, harness
  declarations, hints, pane map, pids);
- :mod:`.ingress`: bytes in, checked messages out (frames, http, control requests, limits, OSC);
- :mod:`.tmux`: badges, pane listings, the control-mode protocol, the hold, health;
- :mod:`.views`: attention, jump, notify, redact, the status table, top;
- :mod:`.fleet`: hosts, the transport interface, following a host, NATS;
- :mod:`.install`: config edits, the JavaScript forwarders, the service unit;

and the basics every room uses: :mod:`.backoff` (the one retry rule), :mod:`.clock`,
:mod:`.paths`, :mod:`.procstat` (the one ``/proc/<pid>/stat`` parser), :mod:`.seq_mark` (the
store's seq mark), :mod:`.text` (terminal-safe text).
"""
