"""Which process owns which rollout (pure): :func:`build_sample` turns a process table and
its fd tables into a sample, :func:`reconcile_ownership` applies it with the
two-consecutive-misses rule (a rollout missing from one sample stays owned; the second
consecutive miss releases it; a process whose fd table could not be read is never counted as
a miss).

The discovery actor samples (in a worker thread, through
:mod:`~actors.harnesses.codex.rollouts.reads`) and reconciles; what changed becomes
``RolloutOwned`` / ``RolloutReleased``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

import msgspec

from actors.harnesses.codex.rollouts.parsing import is_rollout_path
from actors.sources import procfs

__all__ = [
    "MISS_CONFIRMATIONS",
    "Owned",
    "RolloutOwner",
    "OwnershipSample",
    "OwnershipState",
    "Released",
    "build_sample",
    "reconcile_ownership",
]

MISS_CONFIRMATIONS: Final = 2


class RolloutOwner(msgspec.Struct, frozen=True, order=True):
    """One process incarnation that holds rollouts open: pid plus start token."""

    pid: int
    start_token: str


class OwnershipSample(msgspec.Struct, frozen=True):
    """One sample: which ``codex`` processes hold which rollouts.

    ``uncertain`` lists ``codex`` processes whose fd table could not be read
    (permission denied): their rollouts can be neither confirmed nor missed.
    """

    holders: dict[str, tuple[RolloutOwner, ...]]
    uncertain: frozenset[RolloutOwner] = frozenset()


@dataclass(frozen=True)
class OwnershipState:
    """Owned rollouts (path -> owner) and consecutive-miss counts of owned paths."""

    owners: Mapping[str, RolloutOwner] = field(default_factory=dict)
    misses: Mapping[str, int] = field(default_factory=dict)


class Owned(msgspec.Struct, frozen=True):
    """``path`` became owned by ``owner`` (``previous`` is set when the owner changed)."""

    path: str
    owner: RolloutOwner
    previous: RolloutOwner | None = None


class Released(msgspec.Struct, frozen=True):
    """``path`` was missed in ``MISS_CONFIRMATIONS`` consecutive samples; ``owner`` held it."""

    path: str
    owner: RolloutOwner


def build_sample(
    processes: Iterable[procfs.ProcessInfo],
    fd_targets: Callable[[int], list[str] | None],
    sessions_root: str,
) -> OwnershipSample:
    """Build a sample from a process table; ``fd_targets(pid)`` is None when unreadable.

    Only processes whose comm is exactly ``codex`` are asked for their fds, and
    only targets that are ``rollout-*.jsonl`` under ``sessions_root`` count.
    """
    holders: dict[str, list[RolloutOwner]] = {}
    uncertain: set[RolloutOwner] = set()
    for info in processes:
        if info.comm != "codex":
            continue
        owner = RolloutOwner(info.pid, info.start_token)
        targets = fd_targets(info.pid)
        if targets is None:
            uncertain.add(owner)
            continue
        for target in targets:
            if is_rollout_path(target, sessions_root):
                bucket = holders.setdefault(target, [])
                if owner not in bucket:
                    bucket.append(owner)
    return OwnershipSample(
        {path: tuple(sorted(owners)) for path, owners in holders.items()}, frozenset(uncertain)
    )


def reconcile_ownership(
    previous: OwnershipState, sample: OwnershipSample, *, confirmations: int = MISS_CONFIRMATIONS
) -> tuple[OwnershipState, list[Owned], list[Released]]:
    """Apply one sample: new/changed owners, misses, releases (pure; outputs sorted by path).

    A held rollout clears its miss count and keeps its owner while that owner
    still holds it (otherwise the lowest pid among the holders takes over). A
    rollout owned at the last sample and missing from the sample is kept with its miss count
    raised, and released at ``confirmations`` consecutive misses, unless its owner
    is ``uncertain`` (unreadable fds prove nothing: the count is left as it was).
    """
    owners: dict[str, RolloutOwner] = {}
    misses: dict[str, int] = {}
    owned: list[Owned] = []
    released: list[Released] = []
    for path in sorted(set(previous.owners) | set(sample.holders)):
        before = previous.owners.get(path)
        holders = sample.holders.get(path)
        if holders:
            if before is not None and before in holders:
                owners[path] = before
            else:
                owners[path] = holders[0]
                owned.append(Owned(path, holders[0], before))
            continue
        assert before is not None
        count = previous.misses.get(path, 0)
        if before in sample.uncertain:
            owners[path] = before
            if count:
                misses[path] = count
            continue
        count += 1
        if count >= confirmations:
            released.append(Released(path, before))
        else:
            owners[path] = before
            misses[path] = count
    return OwnershipState(owners, misses), owned, released

