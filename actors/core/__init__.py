"""Every pure decision, knowing nothing above it: no I/O, no event loop, no process or database
library (tests/test_design.py checks it on ``sys.modules``). The reducer is the only place a
published field is decided."""
