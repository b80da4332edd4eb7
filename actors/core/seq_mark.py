"""The store's seq mark: what the daemon handed out and committed, kept outside SQLite (pure).

SQLite in WAL mode drops every frame after one whose checksum is bad, and the whole WAL when
its header is damaged, without a word; and a ``kill -9`` loses the transitions published but
not yet committed, which live watchers have already seen. Neither can be told from the
database alone. So the store keeps two numbers in a small file beside it (``<db>-seq``,
:mod:`actors.sinks.store` writes it with ``pwrite`` + ``fsync``):

- ``reserved``: no seq above it was ever shown to anyone (a watcher, a snapshot, ``status``).
  The store raises it a block ahead, durably, *before* a seq beyond it is shown, so a restart
  that numbers from past it never gives a seen seq to another transition;
- ``committed``: every seq up to it was in a committed journal row (written after commits, at
  most once a second, and at close). A journal that ends below it lost committed rows.

The file holds two 512-byte slots (one sector each); a write goes to the slot the newest
valid record is not in, with a generation one higher and a CRC, so a torn write leaves the
other slot whole. :func:`decode_mark` takes the valid slot of the highest generation;
:func:`resume` decides, at start, where numbering continues and which gaps the journal has.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MARK_BYTES",
    "SLOT_BYTES",
    "MarkDamaged",
    "Resume",
    "SeqMark",
    "decode_mark",
    "encode_slot",
    "resume",
    "slot_offset",
]

#: One record's slot (a sector), and the file: two slots.
SLOT_BYTES: Final = 512
MARK_BYTES: Final = 2 * SLOT_BYTES
_MAGIC: Final = b"pwseqmk1"
_RECORD: Final = struct.Struct("<8sQqq")  # magic, generation, reserved, committed
_CRC: Final = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class SeqMark:
    """One record of the mark (``generation`` 0: none written yet)."""

    generation: int = 0
    reserved: int = 0
    committed: int = 0


class MarkDamaged(ValueError):
    """The mark file holds data but no valid record (both slots torn or overwritten)."""


def encode_slot(mark: SeqMark) -> bytes:
    """The slot bytes of ``mark`` (write them at :func:`slot_offset` of its generation)."""
    body = _RECORD.pack(_MAGIC, mark.generation, mark.reserved, mark.committed)
    record = body + _CRC.pack(zlib.crc32(body))
    return record + bytes(SLOT_BYTES - len(record))


def slot_offset(generation: int) -> int:
    """Where the record of ``generation`` goes: the slots alternate."""
    return (generation % 2) * SLOT_BYTES


def _decode_slot(data: bytes) -> SeqMark | None:
    size = _RECORD.size
    if len(data) < size + _CRC.size:
        return None
    body = data[:size]
    (crc,) = _CRC.unpack_from(data, size)
    if zlib.crc32(body) != crc:
        return None
    magic, generation, reserved, committed = _RECORD.unpack(body)
    if magic != _MAGIC or generation < 1 or reserved < 0 or committed < 0:
        return None
    return SeqMark(generation, reserved, committed)


def decode_mark(data: bytes) -> SeqMark:
    """The newest valid record of the file's ``data``; ``SeqMark()`` for an empty (new) file.

    :raises MarkDamaged: ``data`` is not all zero and neither slot holds a valid record.
    """
    found = [
        mark
        for start in (0, SLOT_BYTES)
        if (mark := _decode_slot(data[start : start + SLOT_BYTES])) is not None
    ]
    if found:
        return max(found, key=lambda mark: mark.generation)
    if data.strip(b"\0"):
        raise MarkDamaged(f"no valid record in {len(data)} bytes")
    return SeqMark()


@dataclass(frozen=True, slots=True)
class Resume:
    """Where a store continues after a start (:func:`resume`).

    ``start_seq``: the last seq taken (new transitions are numbered after it); ``gaps``:
    ``(next_seq, dropped, reason)`` of what the journal misses; ``lost``: committed rows the
    journal no longer holds; ``not_committed``: seqs reserved (perhaps seen by a watcher) that
    no committed row holds: the last run stopped before committing them (or never used them).
    """

    start_seq: int
    gaps: tuple[tuple[int, int, str], ...] = ()
    lost: int = 0
    not_committed: int = 0


def resume(journal_max: int, catalog_max: int, mark: SeqMark) -> Resume:
    """Decide, at start, from the journal's highest seq, the catalog's and the mark.

    Numbering continues after all of them (the reserved seqs included, seen or not); the
    journal's end below ``mark.committed`` is a ``lost_committed`` gap (the database lost rows
    it had committed: a damaged WAL, a file put back from a backup), and what lies between that
    and ``mark.reserved`` a ``not_committed`` gap (published, perhaps seen, never committed).
    """
    start = max(journal_max, catalog_max, mark.reserved, mark.committed)
    gaps: list[tuple[int, int, str]] = []
    lost = max(mark.committed - journal_max, 0)
    if lost:
        gaps.append((journal_max + 1, lost, "lost_committed"))
    held = max(journal_max, mark.committed)
    not_committed = max(mark.reserved - held, 0)
    if not_committed:
        gaps.append((held + 1, not_committed, "not_committed"))
    return Resume(start, tuple(gaps), lost, not_committed)
