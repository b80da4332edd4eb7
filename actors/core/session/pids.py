"""Process liveness decisions, pure: the pid watcher's round.

(Process identity -- the one ``/proc/<pid>/stat`` parser, the start token -- is
:mod:`actors.core.procstat`.) :func:`pid_plan` decides what one probe round means:

- each distinct candidate pid is probed once per round;
- a pid found gone ends its sessions only if *this watcher* saw it alive before
  (a pid never seen alive, e.g. a per-hook shell, ends nothing);
- an alive pid whose start token differs from the expected (or last seen) one is
  a recycled pid: the incarnation we watched is dead (``recycled=True``);
- pids that are no longer candidates are forgotten.

The I/O shells are :mod:`actors.sources.procfs` (reads) and :mod:`actors.sources.pid_watcher`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "Ended",
    "PidPlan",
    "ProbeResult",
    "Seen",
    "pid_plan",
]


class ProbeResult(NamedTuple):
    """One probe of one pid: its current start token, or ``None`` if gone (or a zombie)."""

    token: str | None

    @property
    def alive(self) -> bool:
        return self.token is not None


class Seen(NamedTuple):
    """Decision: ``pid`` is alive with ``token`` and this is news (send ``ProcessSeen``)."""

    pid: int
    token: str


class Ended(NamedTuple):
    """Decision: the watched incarnation ``token`` of ``pid`` is dead (send ``ProcessGone``)."""

    pid: int
    token: str | None
    recycled: bool


class PidPlan(NamedTuple):
    """The outcome of one round.

    ``seen``/``ended`` are the messages to send; ``dropped`` are candidates found
    dead that were never seen alive (stop watching them, send nothing);
    ``seen_alive`` is the new confirmed-alive table (pid -> token);
    ``forgotten`` are confirmed pids that are no longer candidates.
    """

    seen: tuple[Seen, ...]
    ended: tuple[Ended, ...]
    dropped: tuple[int, ...]
    seen_alive: dict[int, str]
    forgotten: tuple[int, ...]


def pid_plan(
    candidates: Mapping[int, str | None],
    seen_alive: Mapping[int, str],
    probes: Mapping[int, ProbeResult],
) -> PidPlan:
    """Decide what one probe round means. Pure; see the module docstring for the rules.

    ``candidates`` maps each watched pid to the start token of the incarnation we
    care about (``None``: whichever incarnation we first see alive);
    ``seen_alive`` maps pids this watcher has confirmed alive to the token it saw;
    ``probes`` holds this round's probe results (a candidate without a result was
    not probed and nothing is decided for it).
    """
    alive = {pid: tok for pid, tok in seen_alive.items() if pid in candidates}
    forgotten = tuple(sorted(pid for pid in seen_alive if pid not in candidates))
    seen: list[Seen] = []
    ended: list[Ended] = []
    dropped: list[int] = []
    for pid in sorted(candidates):
        result = probes.get(pid)
        if result is None:
            continue
        expected = candidates[pid]
        known = alive.get(pid)
        if result.token is None:
            if known is not None:
                ended.append(Ended(pid=pid, token=known, recycled=False))
                del alive[pid]
            else:
                # Never seen alive (a per-hook shell, a stale claim): ends nothing.
                dropped.append(pid)
            continue
        claimed = expected if expected is not None else known
        if claimed is not None and result.token != claimed:
            # Same pid, another process: the incarnation we watched is dead.
            ended.append(Ended(pid=pid, token=claimed, recycled=True))
            alive.pop(pid, None)
            continue
        if known != result.token:
            seen.append(Seen(pid=pid, token=result.token))
            alive[pid] = result.token
    return PidPlan(
        seen=tuple(seen),
        ended=tuple(ended),
        dropped=tuple(dropped),
        seen_alive=alive,
        forgotten=forgotten,
    )
