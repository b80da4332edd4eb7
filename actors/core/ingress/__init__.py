"""What comes in, sans-IO: bytes on a socket or a terminal in, checked messages out.

:mod:`.frames` (hook-socket lines), :mod:`.http` (Claude Code ``http`` hooks),
:mod:`.control_requests` (control-socket requests), :mod:`.limits` (how many connections each
socket holds and for how long), :mod:`.osc` (the one OSC 7501 program-status parser).
"""
