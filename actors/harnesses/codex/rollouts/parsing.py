"""Parsing what a Codex rollout holds (pure, no I/O): its lines' turn boundaries, its
``session_meta`` header, the thread id in its file name, and the root of a thread tree.

Used by the tail (:mod:`~actors.harnesses.codex.rollouts.tail`), by ownership sampling (which
paths are rollouts) and by the discovery actor (the header of a newly owned rollout).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import msgspec

from messages.evidence import Boundary

__all__ = [
    "BOUNDARIES",
    "BOUNDARY_RE",
    "BoundaryRecord",
    "InvalidLine",
    "RolloutMeta",
    "is_rollout_path",
    "parse_boundary_line",
    "parse_line",
    "parse_session_meta",
    "parse_timestamp_ms",
    "root_of",
    "thread_id_from_path",
]

BOUNDARIES: Final[frozenset[str]] = frozenset({"task_started", "task_complete", "turn_aborted"})
# Candidate finder for the backwards scan; every hit is confirmed by parsing its whole line.
BOUNDARY_RE: Final = re.compile(rb'"type"\s*:\s*"(?:task_started|task_complete|turn_aborted)"')
_THREAD_RE: Final = re.compile(
    r"rollout-.*-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
    r"\.jsonl\Z"
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)


class _Envelope(msgspec.Struct):
    type: str
    timestamp: str | None = None
    payload: msgspec.Raw = msgspec.Raw(b"null")


class _EventPayload(msgspec.Struct):
    type: str
    turn_id: str | None = None


_ENVELOPE: Final = msgspec.json.Decoder(_Envelope)
_EVENT_PAYLOAD: Final = msgspec.json.Decoder(_EventPayload)
_ANY: Final = msgspec.json.Decoder()


class BoundaryRecord(msgspec.Struct, frozen=True):
    """One lifecycle boundary read from a rollout (``at_ms`` None: no usable timestamp)."""

    boundary: Boundary
    at_ms: int | None
    turn_id: str | None


class InvalidLine(Exception):
    """A line that is not a JSON rollout record (garbage, bad UTF-8, wrong shape)."""


def parse_timestamp_ms(text: str | None) -> int | None:
    """``2026-11-29T23:37:34.856Z`` -> epoch milliseconds; naive times are UTC; bad -> None."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MS


def parse_line(line: bytes) -> BoundaryRecord | None:
    """Parse one complete line; None if it is a valid record but no boundary.

    :raises InvalidLine: the line is not a JSON object with a string ``type``.
    """
    try:
        envelope = _ENVELOPE.decode(line)
    except msgspec.DecodeError as exc:
        raise InvalidLine(str(exc)) from None
    if envelope.type != "event_msg":
        return None
    try:
        payload = _EVENT_PAYLOAD.decode(envelope.payload)
    except msgspec.DecodeError as exc:
        raise InvalidLine(str(exc)) from None
    if payload.type not in BOUNDARIES:
        return None
    boundary: Boundary = payload.type  # type: ignore[assignment]  # checked just above
    return BoundaryRecord(boundary, parse_timestamp_ms(envelope.timestamp), payload.turn_id)


def parse_boundary_line(line: bytes) -> BoundaryRecord | None:
    """The boundary a single rollout line records, or None (also for invalid lines)."""
    try:
        return parse_line(line.rstrip(b"\r\n"))
    except InvalidLine:
        return None


class RolloutMeta(msgspec.Struct, frozen=True):
    """What the ``session_meta`` header says: the thread, its parent, the CLI version."""

    thread_id: str
    parent_id: str | None = None
    cli_version: str | None = None


def _str_at(obj: object, *path: str) -> str | None:
    for name in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(name)
    return obj if isinstance(obj, str) and obj else None


def parse_session_meta(head: bytes) -> RolloutMeta | None:
    """Parse the first line of ``head`` (the first bytes of a rollout) as ``session_meta``.

    Returns None when the first line is incomplete, not JSON, not ``session_meta``
    or has no ``payload.id``.
    """
    newline = head.find(b"\n")
    if newline < 0:
        return None
    try:
        record: Any = _ANY.decode(head[:newline])
    except msgspec.DecodeError:
        return None
    if not isinstance(record, dict) or record.get("type") != "session_meta":
        return None
    payload = record.get("payload")
    thread_id = _str_at(payload, "id")
    if thread_id is None:
        return None
    parent = _str_at(payload, "source", "subagent", "thread_spawn", "parent_thread_id")
    if parent is None:
        parent = _str_at(payload, "parent_thread_id")
    return RolloutMeta(thread_id, parent, _str_at(payload, "cli_version"))


def thread_id_from_path(path: str) -> str | None:
    """The thread uuid at the end of a rollout file name, or None."""
    match = _THREAD_RE.search(os.path.basename(path))
    return match.group(1) if match else None


def is_rollout_path(path: str, sessions_root: str) -> bool:
    """Whether ``path`` (canonical) is a ``rollout-*.jsonl`` under ``sessions_root`` (canonical)."""
    return (
        path.startswith(sessions_root.rstrip(os.sep) + os.sep)
        and path.endswith(".jsonl")
        and os.path.basename(path).startswith("rollout-")
    )


def root_of(thread_id: str, parents: Mapping[str, str | None]) -> str:
    """Walk ``parents`` from ``thread_id`` to the oldest known ancestor (cycle-safe)."""
    seen = {thread_id}
    current = thread_id
    while True:
        parent = parents.get(current)
        if parent is None or parent in seen:
            return current
        seen.add(parent)
        current = parent

