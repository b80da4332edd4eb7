"""Test helpers for the wrapper tests: loopback API mocks, frame listener, private tmux."""
