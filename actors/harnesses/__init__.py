"""One package per harness, each holding everything about it; :mod:`.catalog` lists them.

A harness package never imports another one: a rule two harnesses share lives in
:mod:`actors.core` (tests/test_design.py checks both).
"""
