"""``paneward top``: the full-screen live view of every session, a thin Textual shell.

Every decision (rows, order, filters, the strips) is :mod:`actors.core.views.top`'s; this module
does the I/O. It reads the control socket's watch stream with its snapshot first and the journal's
last hour after it (``{"op": "watch", "snapshot": true, "since_ms": ...}``, served by
:mod:`actors.sources.control_server`), asks tmux every few seconds where each pane is and in
which directory, and draws the rows in a table. With a fleet (``fleet``: the daemon follows
hosts) the rows have a HOST column, ``local`` for this machine's, and the hosts' health is
asked as often as tmux and shown under the head line; ``--host`` / ``--local`` keep one side.
Keys: Enter jumps to the selected session's pane (:func:`actors.cli.jump.jump_to`, what
``paneward next`` runs; a ``turn_done`` jumped to is acknowledged, as ``next`` does; a fleet
host's session that needs you is reached as ``next`` reaches it, through a local window attached
to its pane), ``a`` acknowledges its ``turn_done`` / ``failed``
(:class:`messages.Acknowledge` to the hook socket), ``/`` filters by text, ``n`` shows only the
sessions that need you, Escape clears the filter, ``q`` quits.

Textual is an optional extra (``pip install 'paneward[top]'``): only ``paneward top``
(:func:`actors.cli.top_command.run_top`) imports this module, and says how to install it when the
import fails. After an ``Overflow`` (the view fell behind) or the daemon's
restart it subscribes again, and the snapshot starts it afresh.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable
from typing import ClassVar, Final

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Input, Static
from textual.widgets.data_table import CellDoesNotExist

import messages
from actors.cli.common import START_HINT, TmuxFailed, send_frames, status_line, tmux
from actors.cli.jump import jump_remote, jump_to
from actors.core import paths
from actors.core.clock import now_ms
from actors.core.text import printable
from actors.core.views.jump import LOCATIONS_COMMAND, parse_locations
from actors.core.views.status_table import host_line
from actors.core.views.top import (
    DIRECTORIES_COMMAND,
    STRIP_CHARS,
    Filter,
    StripState,
    TopModel,
    TopRow,
    parse_directories,
)
from messages.activity import Overflow, Snapshot, Transition

__all__ = ["TopApp", "run"]

#: How often tmux is asked where the panes are and in which directory (seconds).
PANES_EVERY_S: Final = 5.0
#: How often durations and strips are redrawn with no transition (seconds).
TICK_S: Final = 1.0
#: The longest wait before a changed view is drawn (seconds): a burst is drawn once.
REDRAW_S: Final = 0.05
#: Wait before subscribing again after the daemon went away (seconds).
RECONNECT_S: Final = 1.0

_STYLES: Final[dict[StripState, str]] = {
    "absent": "",
    "gone": "dim",
    "unknown": "magenta",
    "idle": "grey62",
    "working": "green",
    "needs_input": "bold red",
}
_KIND_STYLES: Final = {"needs_input": "bold red", "failed": "bold yellow", "turn_done": "cyan"}
COLUMNS: Final = ("ATTENTION", "HARNESS", "SESSION", "PANE", "STATE", "LAST HOUR", "DIRECTORY",
                  "REASON")
#: With a fleet: the host first (``local`` for this machine's sessions).
FLEET_COLUMNS: Final = ("HOST", *COLUMNS)
LEGEND: Final = (
    f"last hour, 2 min a cell: {STRIP_CHARS['needs_input']} needs you  "
    f"{STRIP_CHARS['working']} working  {STRIP_CHARS['idle']} idle  "
    f"{STRIP_CHARS['unknown']} unknown  {STRIP_CHARS['gone']} not running"
)


def _strip(row: TopRow) -> Text:
    text = Text(no_wrap=True)
    for cell in row.cells:
        text.append(STRIP_CHARS[cell], style=_STYLES[cell])
    return text


def _cells(row: TopRow, *, fleet: bool) -> tuple[Text, ...]:
    # Text objects, never strings: a DataTable string is Rich markup, and these come from
    # hook payloads (already escaped for the terminal by actors.core.views.top).
    kind_style = _KIND_STYLES.get(row.kind or "", "")
    host = (Text(row.host, no_wrap=True),) if fleet else ()
    return (
        *host,
        Text(row.attention or "-", style=kind_style, no_wrap=True),
        Text(row.harness, no_wrap=True),
        Text(row.session, no_wrap=True),
        Text(row.where, no_wrap=True),
        Text(row.state, no_wrap=True),
        _strip(row),
        Text(row.directory, no_wrap=True),
        Text(row.reason, no_wrap=True, overflow="ellipsis"),
    )


class _Table(DataTable[Text]):
    """The rows; Enter (the table's own select) shows in the footer as ``jump``."""

    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("enter", "select_cursor", "jump"),
    ]


class TopApp(App[int]):
    """The view (see the module). ``args``: the parsed ``paneward top`` arguments (``socket``,
    ``tmux_socket_name`` / ``tmux_socket_path``, ``client``, ``all``, ``host`` / ``local``).
    ``rows`` are the rows drawn last, in order; ``note`` the last thing said on the status line;
    ``hosts`` the fleet's health line last asked (``""`` without a fleet). ``clock``: the time
    now in epoch milliseconds (what the durations and the strips' window end at). ``fleet``:
    the daemon follows fleet hosts (the HOST column)."""

    TITLE = "paneward top"
    CSS = """
    #head { height: 1; background: $boost; }
    #note { height: 1; }
    #hosts { height: 1; color: $text-muted; }
    #hosts.none { display: none; }
    #legend { height: 1; color: $text-muted; }
    #filter { display: none; }
    #filter.shown { display: block; }
    DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("a", "acknowledge", "acknowledge"),
        Binding("slash", "filter", "filter"),
        Binding("n", "needs_you", "needs you only"),
        Binding("escape", "clear_filter", "clear filter"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self, args: argparse.Namespace, clock: Callable[[], int] = now_ms, *, fleet: bool = False
    ) -> None:
        super().__init__()
        self.args = args
        self.clock = clock
        self.fleet = fleet
        self.hosts = ""
        self.model = TopModel()
        self.view = Filter()
        self.rows: list[TopRow] = []
        self.note = ""
        self.locations: dict[str, str] = {}
        self.directories: dict[str, str] = {}
        self.subscriptions = 0  # snapshots received (1 + each resubscription)
        self.decode_errors = 0
        self._dirty = False
        self._home = os.path.expanduser("~")

    # -------------------------------------------------------------------- layout

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        yield Static(id="hosts", classes="" if self.fleet else "none")
        table = _Table(id="table", cursor_type="row", zebra_stripes=True)
        table.add_columns(*(FLEET_COLUMNS if self.fleet else COLUMNS))
        yield table
        yield Input(placeholder="filter (Enter keeps it, Escape clears it)", id="filter")
        yield Static(LEGEND, id="legend")
        yield Static(id="note")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.run_worker(self._follow(), group="feed", exclusive=True)
        self.run_worker(self._panes(), group="panes", exclusive=True)
        self.set_interval(TICK_S, self._tick)
        self.set_interval(REDRAW_S, self._redraw_if_dirty)
        self._redraw()

    # -------------------------------------------------------------------- drawing

    def _tick(self) -> None:
        self.model.prune(self.clock())
        self._redraw()

    def _redraw_if_dirty(self) -> None:
        if self._dirty:
            self._redraw()

    def _redraw(self) -> None:
        self._dirty = False
        tables = list(self.query(_Table).results(_Table))
        heads = list(self.query("#head").results(Static))
        if not tables or not heads:
            return  # shutting down: a timer may still fire after the widgets are gone
        table, head_line = tables[0], heads[0]
        every = self.model.rows(
            self.clock(), locations=self.locations, directories=self.directories, home=self._home,
            show_all=bool(getattr(self.args, "all", False)),
        )
        rows = [row for row in every if self.view.keeps(row)]
        selected = self.selected_row()
        table.clear()
        for row in rows:
            table.add_row(*_cells(row, fleet=self.fleet), key=row.id)
        self.rows = rows
        if selected is not None:
            for index, row in enumerate(rows):
                if row.id == selected.id:
                    table.move_cursor(row=index, animate=False)
                    break
        need = sum(1 for row in every if row.kind == "needs_input")
        sessions = "1 session" if len(every) == 1 else f"{len(every)} sessions"
        parts = [f"paneward top · {sessions} · {need} need you"]
        if self.view.text:
            parts.append(f"filter {self.view.text!r}")
        if self.view.needs_you:
            parts.append("needs you only")
        if len(rows) != len(every):
            parts.append(f"{len(rows)} shown")
        head_line.update(Text(" · ".join(parts), no_wrap=True))

    def say(self, text: str) -> None:
        """Put ``text`` on the status line (plain text: never markup)."""
        self.note = text
        for note in self.query("#note").results(Static):  # none while shutting down
            note.update(Text(text, no_wrap=True))

    def selected_row(self) -> TopRow | None:
        """The row under the cursor, ``None`` when the table is empty."""
        tables = self.query(_Table).results(_Table)
        table = next(tables, None)
        if table is None or not self.rows or table.row_count == 0:
            return None
        try:
            key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except CellDoesNotExist:  # a cursor past a table that shrank
            return None
        return next((row for row in self.rows if row.id == key), None)

    # -------------------------------------------------------------------- the stream

    def _control_path(self) -> str:
        return paths.control_path(getattr(self.args, "socket", None))

    async def _follow(self) -> None:
        """Subscribe (snapshot, the last hour, then live) and feed the model, for as long as the
        view runs; again after an Overflow or when the daemon goes away."""
        import json

        while True:
            since_ms = self.clock() - self.model.window_ms
            body: dict[str, object] = {"op": "watch", "snapshot": True, "since_ms": since_ms}
            if getattr(self.args, "local", False):
                body["local"] = True
            elif getattr(self.args, "host", None) is not None:
                body["host"] = self.args.host
            request = json.dumps(body)
            try:
                stream = await anyio.connect_unix(self._control_path())
            except OSError as exc:
                self.say(f"no daemon at {self._control_path()} ({exc.strerror or exc}); "
                         f"{START_HINT} -- retrying")
                await anyio.sleep(RECONNECT_S)
                continue
            async with stream:
                try:
                    await stream.send(request.encode() + b"\n")
                except (OSError, anyio.BrokenResourceError):
                    why = "the daemon went away -- reconnecting"
                else:
                    why = await self._read(BufferedByteReceiveStream(stream))
            self.say(why)
            await anyio.sleep(RECONNECT_S)

    async def _read(self, reader: BufferedByteReceiveStream) -> str:
        """Feed lines to the model until the stream ends; why it ended."""
        while True:
            try:
                line = await reader.receive_until(b"\n", 1 << 28)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return "the daemon went away -- reconnecting"
            try:
                item = messages.decode_outbound(line)
            except messages.MessageError as exc:
                self.decode_errors += 1
                self.say(f"a line of the watch stream does not decode: {exc}")
                continue
            if isinstance(item, Snapshot):
                self.model.snapshot(item)
                self.subscriptions += 1
                if self.subscriptions > 1:
                    self.say("subscribed again")
            elif isinstance(item, Transition):
                self.model.transition(item, self.clock())
            elif isinstance(item, Overflow):
                return "fell behind the daemon -- subscribing again"
            self._dirty = True

    async def _panes(self) -> None:
        """Where each pane is and its directory, from tmux, every few seconds; the fleet's
        health as often."""
        while True:
            try:
                locations, directories = await anyio.to_thread.run_sync(self._read_panes)
            except TmuxFailed:
                locations, directories = {}, {}
            if (locations, directories) != (self.locations, self.directories):
                self.locations, self.directories = locations, directories
                self._dirty = True
            if self.fleet:
                await self._read_hosts()
            await anyio.sleep(PANES_EVERY_S)

    async def _read_hosts(self) -> None:
        import json

        try:
            line = await anyio.to_thread.run_sync(status_line, self.args, b"hosts")
        except OSError:
            return  # the daemon went away: the stream's reconnect says so
        hosts = json.loads(line)
        text = host_line(hosts, self.clock()) if isinstance(hosts, list) and hosts else ""
        self.hosts = text
        for shown in self.query("#hosts").results(Static):  # none while shutting down
            shown.update(Text(text, no_wrap=True))

    def _read_panes(self) -> tuple[dict[str, str], dict[str, str]]:
        return (
            parse_locations(tmux(self.args, LOCATIONS_COMMAND)),
            parse_directories(tmux(self.args, DIRECTORIES_COMMAND)),
        )

    # -------------------------------------------------------------------- keys

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # Enter on the table: the table's own binding selects the row.
        event.stop()
        self.action_jump()

    def action_jump(self) -> None:
        row = self.selected_row()
        if row is None:
            self.say("nothing to jump to")
            return
        if row.key.host is not None:
            if not row.queued or row.where == "-":
                self.say(f"{row.host} {row.harness}:{row.session} is a pane on {row.host}: "
                         "Enter reaches a fleet host's session when it needs you")
                return
            self.run_worker(self._jump_remote(row), group="act")
            return
        if row.pane is None:
            self.say(f"{row.harness}:{row.session} is in no tmux pane")
            return
        self.run_worker(self._jump(row), group="act")

    async def _jump_remote(self, row: TopRow) -> None:
        """A fleet host's item: as ``paneward next`` reaches it (its ``attach`` command in a
        local window, :func:`actors.cli.jump.jump_remote`)."""
        try:
            client = await anyio.to_thread.run_sync(jump_remote, self.args, row.key)
        except TmuxFailed as exc:
            self.say(f"tmux: {exc}")
            return
        except (OSError, LookupError) as exc:
            self.say(f"{row.host} {row.harness}:{row.session}: {exc}")
            return
        where = f" on {client}" if client else ""
        self.say(f"jumped to {row.host} {row.where}{where}")

    async def _jump(self, row: TopRow) -> None:
        assert row.pane is not None
        try:
            client = await anyio.to_thread.run_sync(jump_to, self.args, row.pane)
        except TmuxFailed as exc:
            self.say(f"tmux: {exc}")
            return
        where = f" on {client}" if client else ""
        self.say(f"jumped to {row.where}{where}")
        if row.kind == "turn_done":
            # As `paneward next` does: the done jumped to is seen.
            await self._send_acknowledge(row)

    def action_acknowledge(self) -> None:
        row = self.selected_row()
        if row is None:
            self.say("nothing to acknowledge")
            return
        if row.key.host is not None:
            # its state is its host's daemon's: acknowledged there (or by looking at its pane)
            self.say(f"{row.host} {row.harness}:{row.session} is {row.host}'s: acknowledge it "
                     f"there (ssh {row.host} paneward ack {printable(row.key.session_id)})")
            return
        if row.kind not in ("turn_done", "failed"):
            self.say(
                "needs you: answer it in its pane (Enter jumps there)"
                if row.kind == "needs_input" else f"{row.harness}:{row.session}: nothing open"
            )
            return
        self.run_worker(self._acknowledge(row), group="act")

    async def _acknowledge(self, row: TopRow) -> None:
        if await self._send_acknowledge(row):
            self.say(f"acknowledged {row.harness}:{row.session} ({row.attention})")

    async def _send_acknowledge(self, row: TopRow) -> bool:
        ack = messages.Acknowledge(at_ms=now_ms(), key=row.key)
        send = functools.partial(send_frames, self.args, [messages.encode(ack) + b"\n"])
        try:
            await anyio.to_thread.run_sync(send)
        except OSError as exc:
            self.say(f"could not acknowledge: {exc}")
            return False
        return True

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("shown")
        box.value = self.view.text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.view = Filter(event.value, self.view.needs_you)
        self._redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.input.remove_class("shown")
        self.query_one(DataTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.remove_class("shown")
        self.view = Filter("", self.view.needs_you)
        self.query_one(DataTable).focus()
        self._redraw()

    def action_needs_you(self) -> None:
        self.view = Filter(self.view.text, not self.view.needs_you)
        self._redraw()


def run(args: argparse.Namespace, *, fleet: bool = False) -> int:
    """Run the view until ``q``; 0. ``fleet``: the daemon follows fleet hosts."""
    TopApp(args, fleet=fleet).run()
    return 0
