"""The ``paneward status`` table, rendered from activities (pure).

The daemon renders it (its control server answers ``{"op": "status"}`` with the table text), so
that ``paneward status`` needs nothing but the standard library to print it; the order, the pane
winners and what is hidden are the reducer's decisions (:func:`attention_order`,
:func:`pane_winners`, :func:`hidden_after`), never re-decided here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from actors.core.session.reducer import attention_order, hidden_after, pane_winners
from actors.core.text import clip, ellipsize, printable
from actors.core.views.attention import attention_label
from messages import Activity

__all__ = ["ATTENTION_WIDTH", "actor_line", "counter_line", "format_table"]

#: The ATTENTION column's width: a longer attention is cut, ending with ``…`` (``--json`` and
#: ``paneward watch`` carry the whole reason).
ATTENTION_WIDTH = 48


def _age(now_ms: int, at_ms: int | None) -> str:
    if not at_ms:
        return "-"
    seconds = max(0, (now_ms - at_ms) // 1000)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def format_table(
    activities: Sequence[Activity], now_ms: int, *, show_all: bool = False, fleet: bool = False
) -> str:
    """The ``paneward status`` table: pane, harness, session, presence, turn, attention,
    source, age (of the evidence), most urgent first
    (:func:`actors.core.session.reducer.attention_order`: the attention queue,
    :func:`actors.core.views.attention.attention_queue`, comes first, in its order). The attention
    reads ``needs you 2m: permission: Bash: echo hi``: its word, how long it has been open, its
    reason, cut to :data:`ATTENTION_WIDTH` with ``…``.

    Sessions settled for more than a day (:func:`actors.core.session.reducer.hidden_after`) are left
    out (and counted in a last line) unless ``show_all``. A session bound to a pane that shows
    another one (:func:`actors.core.session.reducer.pane_winners`) has its pane in parentheses.

    With ``fleet`` (a fleet is configured) a first column HOST names each session's host
    (``local`` for this machine's); a remote session's pane is a pane on its host, so panes
    are compared within a host only.
    """
    hidden = 0
    if not show_all:
        kept = [a for a in activities if not hidden_after(a, now_ms)]
        hidden = len(activities) - len(kept)
        activities = kept
    shown = {
        host: pane_winners([a for a in activities if a.key.host == host])
        for host in {a.key.host for a in activities}
    }
    header: tuple[str, ...] = (
        "PANE", "HARNESS", "SESSION", "PRESENCE", "TURN", "ATTENTION", "SOURCE", "AGE"
    )
    if fleet:
        header = ("HOST", *header)
    rows = [header]
    # Ids, panes and reasons come from payloads: escaped (never raw control characters), and
    # cut after escaping, so a cut cannot leave an escape sequence open.
    for a in sorted(activities, key=attention_order):
        att = a.attention
        attention = f"{attention_label(a, now_ms)}: {att.reason}" if att else "-"
        pane = printable(a.pane) if a.pane is not None else "-"
        if a.pane is not None and shown[a.key.host][a.pane].key != a.key:
            pane = f"({pane})"
        evidence = a.evidence
        host = () if not fleet else (printable(a.key.host or "local"),)
        rows.append(
            (
                *host,
                pane,
                a.key.harness,
                clip(a.key.session_id, 13),
                a.presence,
                a.turn,
                ellipsize(attention, ATTENTION_WIDTH),
                evidence.source,
                _age(now_ms, evidence.at_ms or evidence.observed_at_ms),
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    if len(rows) == 1 and not hidden:
        lines.append("(no sessions yet)")
    if hidden:
        lines.append(f"({hidden} more ended more than a day ago: paneward status --all)")
    return "\n".join(lines)


def host_line(hosts: Sequence[Mapping[str, Any]], now_ms: int) -> str:
    """The fleet's health under the table: ``hosts: gpu1 connected 2h · box stale since
    08:31:02 (3m) · vm unreachable 1m: permission denied ...`` (the ``hosts`` of
    :meth:`actors.sources.fleet.FleetView.hosts`)."""
    parts = []
    for host in hosts:
        name, health, since = printable(host["host"]), host["health"], host["since_ms"]
        if health == "stale":
            clock = time.strftime("%H:%M:%S", time.localtime(since / 1000))
            text = f"{name} stale since {clock} ({_age(now_ms, since)})"
        else:
            text = f"{name} {health} {_age(now_ms, since)}"
        if host.get("reason"):
            text += f": {printable(host['reason'])}"
        parts.append(text)
    return "hosts: " + " · ".join(parts)


def counter_line(stats: Mapping[str, Any]) -> str:
    """The table's summary line: the counters one looks at first (from ``statistics``).
    ``drops`` counts every message or row paneward lost on purpose -- the supervisor's
    (crashing or refused messages), the store's (rows it could not keep) and the frames the
    OpenCode/Pi forwarders dropped in the agent's process; ``LOST N committed rows`` ends it
    when the store found, at start, committed rows its database no longer holds
    (``store.lost_committed``)."""
    sup = stats.get("supervisor", {})
    hook = stats.get("hook_listener", {})
    store = stats.get("store", {})
    control = stats.get("control", {})
    rejected_frames = sum((hook.get("rejected") or {}).values())
    rejected = sup.get("rejected", 0) + rejected_frames + control.get("bad_requests", 0)
    drops = (
        sup.get("drops", 0) + sup.get("forwarder_dropped", 0)
        + store.get("dropped", 0) + store.get("gap_transitions", 0)
    )
    # Hub subscribers that fell behind, and watch clients (which share one subscription).
    overflows = sup.get("overflows", 0) + (control.get("watch") or {}).get("overflows", 0)
    # Committed rows the database lost (a damaged write-ahead log): in capitals, never missed.
    lost = store.get("lost_committed", 0)
    return (
        f"messages {sup.get('messages', 0)} · transitions {sup.get('transitions', 0)} · "
        f"rejected {rejected} · unmapped {sup.get('unmapped', 0)}"
        f" · drops {drops} · overflows {overflows}"
        f" · restarts {sup.get('restarts', 0)}"
        + (f" · LOST {lost} committed rows" if lost else "")
    )


def actor_line(stats: Mapping[str, Any]) -> str:
    """Every long-running actor's state (``running``, ``restarting``, ``stopped``, ``done``),
    a stopped one first and in capitals so it cannot be missed; a notification channel that
    is paused (it kept timing out) follows its actor, in capitals too
    (``notify running (desktop PAUSED 25 s after 2 timeouts)``). A running tmux bridge that has
    no connection shows where it is instead, in capitals with the reason
    (``tmux WAITING: tmux -L work: no server running on …``), right after the stopped ones; so
    does a NATS publisher without a connection (``nats DISCONNECTED: <reason>``), and one with
    transitions waiting or dropped says how many (:func:`_publisher`)."""
    states: dict[str, str] = stats.get("supervisor", {}).get("actor_states") or {}
    if not states:
        return "actors: none"
    order = {"stopped": 0, "restarting": 2, "running": 3, "done": 4}
    labels: dict[str, tuple[int, str]] = {}
    for name, state in states.items():
        label = (state.upper() if state == "stopped" else state) + _paused(stats.get(name))
        labels[name] = (order.get(state, 9), label)
    bridge = stats.get("tmux")
    if states.get("tmux") == "running" and isinstance(bridge, Mapping):
        where = bridge.get("state")
        if isinstance(where, str) and where not in ("connected", "connecting"):
            reason = bridge.get("last_error")
            label = where.upper() + (f": {clip(str(reason), 300)}" if reason else "")
            labels["tmux"] = (1, label)
    publisher = stats.get("nats")
    if states.get("nats") == "running" and isinstance(publisher, Mapping):
        labels["nats"] = _publisher(publisher, labels["nats"])
    parts = [
        f"{name} {label}"
        for name, (_rank, label) in sorted(labels.items(), key=lambda kv: (kv[1][0], kv[0]))
    ]
    return "actors: " + " · ".join(parts)


def _publisher(stats: Mapping[str, Any], running: tuple[int, str]) -> tuple[int, str]:
    """The NATS publisher's label: ``DISCONNECTED: <reason>`` (in capitals, after the stopped
    actors) while it has no connection; else ``running``, with what waits for the server's acks
    and what the full buffer dropped when there is any (``running (500 waiting for the
    server, 1504 dropped)``)."""
    extra = []
    if stats.get("buffered"):
        extra.append(f"{stats['buffered']} waiting for the server")
    if stats.get("dropped"):
        extra.append(f"{stats['dropped']} dropped")
    detail = f" ({', '.join(extra)})" if extra else ""
    if not stats.get("connected"):
        reason = stats.get("last_error")
        label = "DISCONNECTED" + (f": {clip(str(reason), 300)}" if reason else "")
        return (1, label + detail)
    return (running[0], running[1] + detail)


def _paused(part: Any) -> str:
    """`` (desktop PAUSED 25 s after 2 timeouts)`` for the paused channels of ``part``'s
    statistics (the notifier's ``channels``), else nothing."""
    channels = part.get("channels") if isinstance(part, Mapping) else None
    if not isinstance(channels, Mapping):
        return ""
    paused = [
        f"{name} PAUSED {round(c['paused_s'])} s after {c['timeouts_in_row']} timeouts"
        for name, c in sorted(channels.items())
        if isinstance(c, Mapping) and c.get("paused_s")
    ]
    return f" ({', '.join(paused)})" if paused else ""
