"""What renders published activity out: the tmux bridge (and its control-mode client) and the
store. Sinks read subscriptions; they never re-decide an activity."""
