"""One package per harness, each holding everything about it; :mod:`.catalog` lists them.

The packages: :mod:`.claude_code`, :mod:`.codex`, :mod:`.cursor`, :mod:`.gemini`, :mod:`.hermes`,
:mod:`.opencode`, :mod:`.pi`. A harness package never imports another one: a rule two harnesses
share lives in :mod:`actors.core` (tests/test_design.py checks both).
"""
