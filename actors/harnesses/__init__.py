"""Everything harness-specific, one module per harness (Claude Code, Codex, Cursor, Hermes)."""
