"""Every pure decision, knowing nothing above it: no I/O, no event loop, no process or database
library (tests/test_design.py checks it on ``sys.modules``). The reducer is the only place a
published field is decided.

- the session: :mod:`.reducer` (the state machine), :mod:`.routing`, :mod:`.causes` (the cause
  word of a transition), :mod:`.harness` (what a
  harness package declares), :mod:`.hints` (shared payload helpers), :mod:`.pane_map`,
  :mod:`.pids`, :mod:`.procstat`;
- ingress: :mod:`.frames`, :mod:`.http`, :mod:`.control_requests`, :mod:`.limits`, :mod:`.osc`;
- tmux: :mod:`.badges`, :mod:`.tmux_panes`, :mod:`.tmux_protocol`, :mod:`.tmux_owner`,
  :mod:`.tmux_health`;
- acting on attention: :mod:`.attention`, :mod:`.jump`, :mod:`.notify`, :mod:`.redact`,
  :mod:`.status_table`, :mod:`.top`;
- the fleet: :mod:`.fleet` (the hosts file, the ssh command line, unreachable reasons),
  :mod:`.fleet_follow` (following one host's frames: resume by seq, identity, health, the
  one stale rule), :mod:`.fleet_transport` (the transport interface: what a link is to the
  merged view);
- the rest: :mod:`.backoff`, :mod:`.clock`, :mod:`.config_edit`, :mod:`.forwarder_js`,
  :mod:`.nats` (NATS subjects, ids, the publish buffer), :mod:`.paths`, :mod:`.seq_mark`,
  :mod:`.service`, :mod:`.text`.
"""
