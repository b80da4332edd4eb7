"""The rows a flush writes, built on the event loop's thread as transitions are recorded: a
journal row encoded once per transition, the catalog row of each key's newest state, the gap
log's rows, and the statements of one flush (pure: no I/O, nothing awaited).

Made by :class:`actors.sinks.store.Store`'s recording methods; written by
:class:`actors.sinks.store.writer.BatchWriter`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from actors.core.session.reducer import SessionState
from actors.sinks.store.records import Owner
from actors.sinks.store.schema import (
    CATALOG_DELETE,
    CATALOG_UPSERT_HEAD,
    CATALOG_UPSERT_TAIL,
    GAP_INSERT_HEAD,
    JOURNAL_INSERT_HEAD,
    multi_row_statements,
)
from messages import Activity, MessageError, SessionKey, Transition

__all__ = [
    "ENCODER",
    "GapRow",
    "JournalTransition",
    "Row",
    "catalog_rows",
    "check_owner",
    "flush_statements",
    "journal_row",
    "newest_per_key",
]

class Row(msgspec.Struct, frozen=True, gc=False):
    """One pending write: a journal row (``journal`` set) and/or a catalog row.

    A Struct rather than a frozen dataclass: one is made per recorded transition, and a frozen
    dataclass's ``__init__`` costs ten times as much (2.4 against 0.2 us here).
    """

    seq: int
    activity: Activity
    # The activity's JSON, encoded once when recorded (the journal row embeds the same bytes).
    activity_json: msgspec.Raw
    # (seq, harness, session_id, at_ms, transition JSON), encoded when recorded: a few
    # microseconds per transition spread over the stream, rather than a whole batch's worth
    # of Python work at flush time competing with the event loop for the GIL.
    journal: tuple[int, str, str, int | None, str] | None
    owner: Owner | None
    state: SessionState | None
    seen_ms: int
    # The session's last transition (Transition.forgets): its catalog row is deleted.
    forgets: bool = False


class JournalTransition(msgspec.Struct, gc=False, tag="Transition", tag_field="type"):
    """:class:`messages.Transition` with its activities as already-encoded JSON.

    Encodes to exactly the bytes ``messages.encode(transition)`` gives (same fields, same
    order), without encoding an activity a second time.
    """

    seq: int
    key: SessionKey
    after: msgspec.Raw
    cause: str
    before: msgspec.Raw | None = None


# The catalog's state column: the reducer state without its activity (that is the activity
# column) and without the per-process duplicate fingerprints.
_STATE_ENCODER: Final = msgspec.json.Encoder()
ENCODER: Final = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class GapRow:
    next_seq: int
    dropped: int
    reason: str
    noticed_ms: int


def journal_row(
    t: Transition, after: msgspec.Raw, before: msgspec.Raw | None
) -> tuple[int, str, str, int | None, str]:
    ev = t.after.evidence
    at_ms = ev.at_ms if ev.at_ms is not None else ev.observed_at_ms
    text = ENCODER.encode(JournalTransition(t.seq, t.key, after, t.cause, before)).decode()
    return (t.seq, t.key.harness, t.key.session_id, at_ms, text)


def flush_statements(
    rows: Sequence[Row], newest: Sequence[Row], gaps: Sequence[GapRow]
) -> tuple[list[tuple[str, list[object]]], list[tuple[str, list[object]]]]:
    """The journal inserts, and the catalog upserts + gap inserts, of one flush."""
    journal_rows = [row.journal for row in rows if row.journal is not None]
    journal = list(multi_row_statements(JOURNAL_INSERT_HEAD, journal_rows))
    kept = [row for row in newest if not row.forgets]
    others = list(
        multi_row_statements(
            CATALOG_UPSERT_HEAD, list(catalog_rows(kept)), CATALOG_UPSERT_TAIL
        )
    )
    others += [
        (CATALOG_DELETE, [row.activity.key.harness, row.activity.key.session_id])
        for row in newest
        if row.forgets
    ]
    gap_rows = [(g.next_seq, g.dropped, g.reason, g.noticed_ms) for g in gaps]
    others += multi_row_statements(GAP_INSERT_HEAD, gap_rows)
    return journal, others


def newest_per_key(rows: Sequence[Row]) -> list[Row]:
    newest: dict[SessionKey, Row] = {}
    for row in rows:  # recording order: the last recorded row of a key wins
        newest[row.activity.key] = row
    return list(newest.values())


def catalog_rows(rows: Sequence[Row]) -> Iterator[tuple[object, ...]]:
    for row in rows:
        a = row.activity
        pid, token = row.owner if row.owner is not None else (None, None)
        state = row.state
        yield (
            a.key.harness,
            a.key.session_id,
            bytes(row.activity_json).decode(),
            pid,
            token,
            a.pane,
            row.seen_ms,
            row.seq,
            None
            if state is None
            else _STATE_ENCODER.encode(
                msgspec.structs.replace(state, activity=None, recent=())
            ).decode(),
        )


def check_owner(owner: object) -> Owner | None:
    if owner is None:
        return None
    if (
        isinstance(owner, tuple)
        and len(owner) == 2
        and isinstance(owner[0], int)
        and not isinstance(owner[0], bool)
        and owner[0] > 0
        and isinstance(owner[1], str)
        and owner[1]
    ):
        return (owner[0], owner[1])
    raise MessageError(f"invalid owner {owner!r}: expected (pid > 0, non-empty start token)")

