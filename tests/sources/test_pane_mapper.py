"""The pane mapper: the pure PaneMap over synthetic trees, the actor over real process trees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import msgspec
import pytest

import messages
from actors.core.session.pane_map import (
    EXITED_CLIENT,
    MAX_VISIT,
    Binding,
    BindingLookup,
    PaneChange,
    PaneMap,
)
from actors.harnesses import catalog
from actors.harnesses.catalog import BINDERS
from actors.harnesses.codex.tui import codex_resume_thread, codex_tui_key, is_codex_tui
from actors.sources import procfs
from actors.sources.pane_mapper import PaneMapper
from tests.support.sinks import ListSink

AT = 1_800_000_000_000
KEY_A = messages.SessionKey("claude-code", "a")
KEY_B = messages.SessionKey("claude-code", "b")
KEY_X = messages.SessionKey("codex", "thread-x")


def binders(
    described: dict[int, tuple[str, Sequence[str]]], tokens: dict[int, str] | None = None
) -> BindingLookup:
    """What each process of a synthetic tree proves, as the harness catalog says."""

    def bind(pid: int) -> Binding | None:
        found = described.get(pid)
        if found is None:
            return None
        return catalog.process_binding(pid, found[0], found[1], (tokens or {}).get(pid))

    return bind


def registry(key: messages.SessionKey, pid: int, token: str = "1") -> messages.RegistryStatus:
    return messages.RegistryStatus(
        key=key, pid=pid, start_token=token, status="idle", at_ms=AT, observed_at_ms=AT
    )


# ---------------------------------------------------------------- pure


@pytest.mark.parametrize(
    ("comm", "argv", "thread"),
    [
        ("codex", ["codex", "resume", "0199-abc"], "0199-abc"),
        ("codex", ["/usr/bin/codex", "-m", "gpt", "resume", "0199-abc"], "0199-abc"),
        ("codex", ["codex", "resume", "--", "0199-abc"], "0199-abc"),
        ("codex", ["codex", "resume", "--last"], None),
        ("codex", ["codex", "resume"], None),
        ("codex", ["codex"], None),
        ("codex", ["codex", "exec", "hi"], None),
        ("node", ["node", "codex", "resume", "0199-abc"], None),
        ("codex", ["codex", "resume", "x" * 257], None),
    ],
)
def test_codex_resume_thread(comm: str, argv: list[str], thread: str | None) -> None:
    assert codex_resume_thread(comm, argv) == thread


def test_walk_finds_the_nearest_owner_breadth_first() -> None:
    m = PaneMap()
    edges = {1: [2, 3], 2: [4], 3: [5], 4: [6]}
    m.observe(registry(KEY_A, 6))
    m.observe(registry(KEY_B, 5))
    # 5 is at depth 2, 6 at depth 3.
    assert m.walk(1, lambda p: edges.get(p, [])) == Binding(KEY_B, "claude_registry_pid")
    assert m.walk(4, lambda p: edges.get(p, [])) == Binding(KEY_A, "claude_registry_pid")
    assert m.walk(6, lambda p: edges.get(p, [])) == Binding(KEY_A, "claude_registry_pid")
    assert m.walk(3, lambda p: []) is None


def test_same_depth_prefers_most_recently_learnt_owner() -> None:
    m = PaneMap()
    edges = {1: [2, 3]}
    m.observe(registry(KEY_A, 3))
    m.observe(registry(KEY_B, 2))
    assert m.walk(1, lambda p: edges.get(p, [])) == Binding(KEY_B, "claude_registry_pid")


def test_a_known_owner_again_walks_nothing_and_children_are_read_only_when_needed() -> None:
    """Cost follows changes: a status edge of a session the mapper knows (the same owner again)
    marks no pane for a walk; a walk asks for a process's children only when its level proved
    nothing (the pane's own process is usually the owner)."""
    m = PaneMap()
    for pane, root in (("%1", 10), ("%2", 20), ("%3", 30)):
        m.observe(messages.PaneOpened(pane=pane, root_pid=root, at_ms=AT))
    asked: list[int] = []
    edges = {30: [31]}

    def children(pid: int) -> list[int]:
        asked.append(pid)
        return edges.get(pid, [])

    m.observe(registry(KEY_A, 10))
    m.observe(registry(KEY_B, 31))
    assert m.dirty == {"%1", "%2", "%3"}
    bound = m.rebind(children, None, AT)
    assert {(c.pane, c.key) for c in bound if isinstance(c, messages.PaneBound)} == {
        ("%1", KEY_A), ("%3", KEY_B)
    }
    assert sorted(asked) == [20, 30]  # roots that own (10) or levels that do (31): no read
    m.observe(registry(KEY_A, 10))  # the next status edge of a
    m.observe(registry(KEY_B, 31, token="1"))
    assert m.dirty == set()
    m.observe(registry(KEY_A, 10, token="2"))  # a new incarnation is news
    assert m.dirty == {"%1", "%2", "%3"}


def test_walk_visits_at_most_256_processes_and_survives_cycles() -> None:
    m = PaneMap()
    chain = {n: [n + 1] for n in range(1, 400)}
    m.observe(registry(KEY_A, MAX_VISIT + 1))
    assert m.walk(1, lambda p: chain.get(p, [])) is None
    assert m.truncated == 1
    m.observe(registry(KEY_B, MAX_VISIT))
    assert m.walk(1, lambda p: chain.get(p, [])) == Binding(KEY_B, "claude_registry_pid")
    cyclic = {1: [2], 2: [1, 3]}
    m.observe(registry(KEY_A, 3))
    assert m.walk(1, lambda p: cyclic.get(p, [])) == Binding(KEY_A, "claude_registry_pid")


def test_codex_resume_argv_binds_only_with_no_owner_at_that_depth() -> None:
    m = PaneMap()
    edges = {1: [2, 3]}
    descr: dict[int, tuple[str, Sequence[str]]] = {3: ("codex", ["codex", "resume", "thread-x"])}
    walk = m.walk(1, lambda p: edges.get(p, []), binders(descr))
    assert walk == Binding(KEY_X, "codex_resume_argv")
    m.observe(registry(KEY_A, 2))
    walk = m.walk(1, lambda p: edges.get(p, []), binders(descr))
    assert walk == Binding(KEY_A, "claude_registry_pid")


def test_daemon_mode_tui_binds_to_itself_not_to_the_daemons_threads() -> None:
    """shell -> node -> codex TUI -> codex app-server (holds every thread's rollout)."""
    m = PaneMap()
    edges = {1: [2], 2: [3], 3: [4]}
    descr: dict[int, tuple[str, Sequence[str]]] = {
        3: ("codex", ["codex"]),
        4: ("codex", ["codex", "app-server", "--listen", "unix://", "--managed-daemon"]),
    }
    tokens = {3: "300", 4: "400"}
    m.observe(
        messages.RolloutOwned(key=KEY_X, pid=4, start_token="400", at_ms=AT, observed_at_ms=AT)
    )
    found = m.walk(1, lambda p: edges.get(p, []), binders(descr, tokens))
    assert found == Binding(codex_tui_key(3, "300"), "codex_tui_process", 3, "300")
    # without a token lookup (or with the TUI gone) there is no proof at that depth, and the
    # in-process case -- the TUI itself holding its rollout -- still binds the thread
    walk = m.walk(1, lambda p: edges.get(p, []), binders(descr))
    assert walk == Binding(KEY_X, "codex_rollout_owner")
    m.observe(
        messages.RolloutOwned(key=KEY_A, pid=3, start_token="300", at_ms=AT, observed_at_ms=AT)
    )
    assert m.walk(1, lambda p: edges.get(p, []), binders(descr, tokens)) == Binding(
        KEY_A, "codex_rollout_owner"
    )


def test_rebind_announces_a_tui_process_before_binding_it() -> None:
    m = PaneMap()
    m.observe(messages.PaneOpened(pane="%1", root_pid=1, at_ms=AT))
    descr: dict[int, tuple[str, Sequence[str]]] = {2: ("codex", ["codex"])}
    out = m.rebind(lambda p: [2] if p == 1 else [], binders(descr, {2: "9"}), AT)
    key = codex_tui_key(2, "9")
    assert out == [
        messages.ProcessSeen(pid=2, start_token="9", at_ms=AT, observed_at_ms=AT, key=key),
        messages.PaneBound(key=key, pane="%1", at_ms=AT, proof="codex_tui_process"),
    ]


def test_an_in_process_tui_s_own_session_gives_way_to_the_rollout_it_holds() -> None:
    """``codex --no-daemon``: the pane shows the TUI's own session until the TUI holds its
    thread's rollout; then that session, which stood only for the TUI, gives way (ended and
    forgotten, as it does to an attached thread in daemon mode): no second session of the one
    process stays behind with the turn it last heard, to 'exit while working' later."""
    m = PaneMap()
    m.observe(messages.PaneOpened(pane="%1", root_pid=1, at_ms=AT))
    descr: dict[int, tuple[str, Sequence[str]]] = {2: ("codex", ["codex", "--no-daemon"])}
    lookup = binders(descr, {2: "9"})
    m.rebind(lambda p: [2] if p == 1 else [], lookup, AT)
    own = codex_tui_key(2, "9")
    assert m.bindings["%1"].key == own
    m.observe(
        messages.RolloutOwned(key=KEY_X, pid=2, start_token="9", at_ms=AT, observed_at_ms=AT)
    )
    out = m.rebind(lambda p: [2] if p == 1 else [], lookup, AT + 1)
    assert out == [
        messages.PaneUnbound(key=own, pane="%1", at_ms=AT + 1, replaced=True),
        messages.Forget(own, AT + 1),
        messages.PaneBound(key=KEY_X, pane="%1", at_ms=AT + 1, proof="codex_rollout_owner"),
    ]


@pytest.mark.parametrize(
    ("argv", "tui"),
    [
        (["codex"], True),
        (["codex", "resume", "--last"], True),
        (["codex", "exec", "say hi"], False),
        (["codex", "app-server", "--listen", "unix://"], False),
        (["codex", "app-server", "daemon", "pid-update-loop"], False),
    ],
)
def test_is_codex_tui(argv: list[str], tui: bool) -> None:
    assert is_codex_tui("codex", argv) is tui
    assert is_codex_tui("node", argv) is False


def test_proof_words_per_evidence() -> None:
    m = PaneMap()
    m.observe(
        messages.RolloutOwned(key=KEY_X, pid=10, start_token="t", at_ms=AT, observed_at_ms=AT)
    )
    child = messages.SessionKey("codex", "child")
    m.observe(
        messages.RolloutOwned(
            key=child, pid=11, start_token="t", at_ms=AT, observed_at_ms=AT, root_key=KEY_X
        ),
    )
    m.observe(
        messages.HookHint(
            key=KEY_A, source="claude_hook", event="UserPromptSubmit", hint="working",
            at_ms=AT, observed_at_ms=AT, pid=12,
        ),
    )  # fmt: skip
    assert m.walk(10, lambda p: []) == Binding(KEY_X, "codex_rollout_owner")
    assert m.walk(11, lambda p: []) is None  # a child rollout never binds a pane
    assert m.walk(12, lambda p: []) == Binding(KEY_A, "hook_owner_pid")
    # The registry is better proof for the same pid and key, and replaces the hook owner.
    m.observe(registry(KEY_A, 12))
    assert m.walk(12, lambda p: []) == Binding(KEY_A, "claude_registry_pid")
    assert len(m.owners[12]) == 1


def test_rebind_flow_open_bind_rebind_close() -> None:
    m = PaneMap()
    edges: dict[int, list[int]] = {100: [101], 101: [102]}
    assert m.observe(messages.PaneOpened(pane="%1", root_pid=100, at_ms=AT)) == []
    assert m.rebind(lambda p: edges.get(p, []), None, AT) == []  # nothing owns anything yet
    m.observe(registry(KEY_A, 102))
    assert m.rebind(lambda p: edges.get(p, []), None, AT) == [
        messages.PaneBound(key=KEY_A, pane="%1", at_ms=AT, proof="claude_registry_pid")
    ]
    # The same proof again changes nothing.
    m.observe(registry(KEY_A, 102))
    assert m.rebind(lambda p: edges.get(p, []), None, AT) == []
    # The agent exits: the pane keeps its last session until another agent is proven.
    m.observe(messages.ProcessGone(pid=102, start_token="1", at_ms=AT, observed_at_ms=AT))
    del edges[101]
    assert m.rebind(lambda p: edges.get(p, []), None, AT) == []
    assert m.bindings["%1"].key == KEY_A
    edges[101] = [103]
    m.observe(registry(KEY_B, 103))
    assert m.rebind(lambda p: edges.get(p, []), None, AT) == [
        messages.PaneUnbound(key=KEY_A, pane="%1", at_ms=AT),
        messages.PaneBound(key=KEY_B, pane="%1", at_ms=AT, proof="claude_registry_pid"),
    ]
    assert m.observe(messages.PaneClosed(pane="%1", at_ms=AT + 1)) == [
        messages.PaneUnbound(key=KEY_B, pane="%1", at_ms=AT + 1)
    ]
    assert m.panes == {} and m.bindings == {}


def test_owner_removal_rules() -> None:
    m = PaneMap()
    m.observe(registry(KEY_A, 5, token="1"))
    # Another incarnation's death does not remove this owner.
    m.observe(messages.ProcessGone(pid=5, start_token="2", at_ms=AT, observed_at_ms=AT))
    assert 5 in m.owners
    m.observe(messages.RegistryRemoved(key=KEY_A, pid=5, at_ms=AT, observed_at_ms=AT, rotated=True))
    assert 5 not in m.owners
    m.observe(messages.RolloutOwned(key=KEY_X, pid=6, start_token="t", at_ms=AT, observed_at_ms=AT))
    m.observe(messages.RolloutReleased(key=KEY_X, pid=6, at_ms=AT, observed_at_ms=AT))
    assert m.owners == {}
    m.observe(registry(KEY_A, 7, token="1"))
    m.observe(messages.ProcessGone(pid=7, at_ms=AT, observed_at_ms=AT))  # any incarnation
    assert m.owners == {}
    m.observe(messages.PaneFocused(pane="%1", at_ms=AT))
    assert m.ignored == 1


def test_claude_rotation_replaces_the_registry_owner_of_a_pid() -> None:
    m = PaneMap()
    m.observe(registry(KEY_A, 5))
    m.observe(registry(KEY_B, 5))
    assert [o.key for o in m.owners[5]] == [KEY_B]


def attached(key: messages.SessionKey, pid: int, at: int = 0) -> messages.ClientAttached:
    return messages.ClientAttached(
        key=key, pid=pid, start_token=str(pid * 10), proof="codex_daemon_mcp", at_ms=AT + at,
        observed_at_ms=AT + at,
    )


# shell 1 -> node 2 -> codex TUI 3 -> codex app-server 4 (the shared daemon, holding every
# thread's rollout); shell 11 -> node 12 -> codex TUI 13 (a second pane)
DAEMON_TREE = {1: [2], 2: [3], 3: [4], 11: [12], 12: [13]}
DAEMON_PROCS: dict[int, tuple[str, Sequence[str]]] = {
    3: ("codex", ["codex"]),
    4: ("codex", ["codex", "app-server", "--listen", "unix://", "--managed-daemon"]),
    13: ("codex", ["codex"]),
}
DAEMON_TOKENS = {3: "30", 4: "40", 13: "130"}
KEY_Y = messages.SessionKey("codex", "thread-y")


def daemon_map() -> PaneMap:
    m = PaneMap()
    for key in (KEY_X, KEY_Y):
        m.observe(
            messages.RolloutOwned(key=key, pid=4, start_token="40", at_ms=AT, observed_at_ms=AT)
        )
    m.observe(messages.PaneOpened(pane="%1", root_pid=1, at_ms=AT))
    m.observe(messages.PaneOpened(pane="%2", root_pid=11, at_ms=AT))
    return m


def rebind(m: PaneMap) -> list[PaneChange]:
    return m.rebind(lambda p: DAEMON_TREE.get(p, []), binders(DAEMON_PROCS, DAEMON_TOKENS), AT)


def test_the_daemons_attachment_binds_each_tui_pane_to_its_thread() -> None:
    m = daemon_map()
    rebind(m)  # at first, each pane shows its TUI process (nothing proves a thread)
    assert {p: b.proof for p, b in m.bindings.items()} == {
        "%1": "codex_tui_process", "%2": "codex_tui_process"}
    m.observe(attached(KEY_X, 3))
    m.observe(attached(KEY_Y, 13))
    out = rebind(m)
    assert messages.PaneBound(key=KEY_X, pane="%1", at_ms=AT, proof="codex_daemon_mcp") in out
    assert messages.PaneBound(key=KEY_Y, pane="%2", at_ms=AT, proof="codex_daemon_mcp") in out
    # the TUI attached to a second thread (/new, /resume): the newest attachment is shown
    m.observe(attached(KEY_Y, 3, at=5))
    out = rebind(m)
    assert m.bindings["%1"].key == KEY_Y
    # ... and a thread has one client at a time: pane %2's TUI no longer shows it
    assert m.bindings["%2"].key == codex_tui_key(13, "130")


def test_a_dead_client_unbinds_its_pane_at_once_and_its_own_session_shows_it_ended() -> None:
    m = daemon_map()
    m.observe(attached(KEY_X, 13))
    rebind(m)
    own = codex_tui_key(13, "130")
    assert m.bindings["%2"] == Binding(KEY_X, "codex_daemon_mcp", client=13, itself=own)
    # the thread lives on in the daemon: the pane of the TUI that quit shows it no longer, and
    # shows the TUI's own session instead, ended (its badge: exited)
    gone = messages.ProcessGone(pid=13, start_token="130", at_ms=AT + 9, observed_at_ms=AT + 9)
    assert m.observe(gone) == [
        messages.PaneUnbound(key=KEY_X, pane="%2", at_ms=AT + 9),
        messages.ProcessGone(pid=13, start_token="130", at_ms=AT + 9, observed_at_ms=AT + 9,
                             key=own),
        messages.PaneBound(key=own, pane="%2", at_ms=AT + 9, proof=EXITED_CLIENT),
    ]
    assert m.bindings["%2"] == Binding(own, EXITED_CLIENT)
    # the ProcessGone naming it comes back to the mapper (it is a listener): nothing more
    named = messages.ProcessGone(pid=13, start_token="130", at_ms=AT + 9,
                                 observed_at_ms=AT + 9, key=own)
    assert m.observe(named) == []
    assert rebind(m) == []  # the shell left in the pane proves nothing: it keeps showing it


def test_a_tuis_own_session_gives_way_ended_to_the_thread_it_shows() -> None:
    m = daemon_map()
    rebind(m)
    own = codex_tui_key(3, "30")
    assert m.bindings["%1"].key == own
    m.observe(attached(KEY_X, 3))
    out = rebind(m)
    assert out == [
        messages.PaneUnbound(key=own, pane="%1", at_ms=AT, replaced=True),
        messages.Forget(own, AT),  # it stood only for the process: gone from every view
        messages.PaneBound(key=KEY_X, pane="%1", at_ms=AT, proof="codex_daemon_mcp"),
    ]
    # another thread of the same TUI moves the pane without any "replaced"
    m.observe(attached(KEY_Y, 3, at=5))
    assert rebind(m)[0] == messages.PaneUnbound(key=KEY_X, pane="%1", at_ms=AT)


def test_a_tuis_own_session_gives_way_to_a_thread_proven_through_another_of_its_processes(
) -> None:
    """The attachment names the TUI's launcher (node 2 above codex 3), not the process the
    pane showed: the own session, which stood only for its process, still gives way (ended and
    forgotten), instead of staying behind running without a pane."""
    m = daemon_map()
    rebind(m)
    own = codex_tui_key(3, "30")
    assert m.bindings["%1"].key == own
    m.observe(attached(KEY_X, 2))
    assert rebind(m) == [
        messages.PaneUnbound(key=own, pane="%1", at_ms=AT, replaced=True),
        messages.Forget(own, AT),
        messages.PaneBound(key=KEY_X, pane="%1", at_ms=AT, proof="codex_daemon_mcp"),
    ]


def test_a_closed_thread_or_a_dead_daemon_leaves_the_tuis_showing_themselves() -> None:
    m = daemon_map()
    m.observe(attached(KEY_X, 3))
    m.observe(attached(KEY_Y, 13))
    rebind(m)
    closed = messages.ThreadStatus(key=KEY_X, status="closed", at_ms=AT, observed_at_ms=AT)
    m.observe(closed)
    rebind(m)
    assert m.bindings["%1"].key == codex_tui_key(3, "30")
    assert m.bindings["%2"].key == KEY_Y
    # the daemon dies: what it ran is shown by no TUI any more
    m.observe(messages.ProcessGone(pid=4, start_token="40", at_ms=AT, observed_at_ms=AT))
    rebind(m)
    assert m.bindings["%2"].key == codex_tui_key(13, "130")
    # another status word changes no binding
    active = messages.ThreadStatus(key=KEY_Y, status="active", at_ms=AT, observed_at_ms=AT)
    ignored = m.ignored
    m.observe(active)
    assert m.ignored == ignored + 1


# ---------------------------------------------------------------- the actor, real processes

AGENT = (
    "import os, sys\n"
    "with open('/proc/self/comm', 'w') as f: f.write(sys.argv[1])\n"
    "print(os.getpid(), flush=True)\n"
    "sys.stdin.read()\n"
)


class PaneTree:
    """``sh -> sh -> python agents``, started in their own session like a pane."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.buffer = b""

    async def next_pid(self) -> int:
        assert self.process.stdout is not None
        while b"\n" not in self.buffer:
            self.buffer += await self.process.stdout.receive()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return int(line)


@asynccontextmanager
async def pane_tree(*agents: list[str]) -> AsyncIterator[PaneTree]:
    py = sys.executable
    inner = "; ".join(f'{py} -c "$AGENT" {" ".join(args)}' for args in agents)
    # "; true" keeps each sh from exec-ing its last command, so the tree really is
    # sh -> sh -> agent.
    process = await anyio.open_process(
        ["sh", "-c", f"sh -c '{inner}; true'; true"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "AGENT": AGENT},
        start_new_session=True,
    )
    async with process:
        try:
            yield PaneTree(process)
        finally:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


@asynccontextmanager
async def running(mapper: PaneMapper, sink: ListSink) -> AsyncIterator[None]:
    async with anyio.create_task_group() as tg:
        tg.start_soon(mapper.run, sink)
        yield
        tg.cancel_scope.cancel()


async def test_real_tree_binds_rebinds_and_unbinds() -> None:
    sink = ListSink()
    mapper = PaneMapper(BINDERS, rescan_interval=None)
    with anyio.fail_after(20):
        async with pane_tree(["claude"], ["claude"]) as pane, running(mapper, sink):
            first = await pane.next_pid()
            inner_sh = procfs.read_ppid(first)
            assert inner_sh is not None and procfs.read_ppid(inner_sh) == pane.process.pid
            assert procfs.read_comm(first) == "claude"
            mapper.send_nowait(messages.PaneOpened(pane="%7", root_pid=pane.process.pid, at_ms=AT))
            await mapper.wait_idle()
            assert sink.items == []  # nothing owns a session yet
            mapper.send_nowait(registry(KEY_A, first, procfs.start_token(first) or "?"))
            [bound] = await sink.wait_count(1)
            assert isinstance(bound, messages.PaneBound)
            assert bound == messages.PaneBound(
                key=KEY_A,
                pane="%7",
                at_ms=bound.at_ms,
                proof="claude_registry_pid",
            )
            # The first agent exits; the pane's shell starts a second one.
            os.kill(first, signal.SIGKILL)
            second = await pane.next_pid()
            assert procfs.read_ppid(second) == inner_sh
            mapper.send_nowait(registry(KEY_B, second, procfs.start_token(second) or "?"))
            items = await sink.wait_count(3)
            assert [(type(m).__name__, getattr(m, "key", None)) for m in items[1:]] == [
                ("PaneUnbound", KEY_A),
                ("PaneBound", KEY_B),
            ]
            mapper.send_nowait(messages.PaneClosed(pane="%7", at_ms=AT))
            items = await sink.wait_count(4)
            stats = mapper.statistics()
    assert items[3] == messages.PaneUnbound(key=KEY_B, pane="%7", at_ms=AT)
    assert stats.panes == 0 and stats.bound == 0
    assert stats.bound_sent == 2 and stats.unbound_sent == 2
    assert stats.received == 4 and stats.ignored == 0


def _at_AT(message: messages.Inbound) -> messages.Inbound:
    """The message with its times set to AT (they are "now" when the mapper sent it)."""
    if isinstance(message, messages.ProcessSeen):
        return msgspec.structs.replace(message, at_ms=AT, observed_at_ms=AT)
    return msgspec.structs.replace(message, at_ms=AT)


async def test_codex_daemon_tui_is_bound_only_by_real_proof() -> None:
    sink = ListSink()
    mapper = PaneMapper(BINDERS, rescan_interval=None)
    with anyio.fail_after(20):
        async with (
            pane_tree(["codex"]) as plain,
            pane_tree(["codex", "resume", "thread-x"]) as resumed,
            running(mapper, sink),
        ):
            plain_tui = await plain.next_pid()
            tui = await resumed.next_pid()
            assert procfs.read_comm(tui) == "codex"
            mapper.send_nowait(messages.PaneOpened(pane="%1", root_pid=plain.process.pid, at_ms=AT))
            mapper.send_nowait(
                messages.PaneOpened(pane="%2", root_pid=resumed.process.pid, at_ms=AT)
            )
            await sink.wait_count(3)
            await mapper.wait_idle()
            token = procfs.start_token(plain_tui)
    assert token is not None
    own = codex_tui_key(plain_tui, token)
    # The resumed TUI names its thread; the plain one is shown as itself (presence only,
    # turn unknown): the pane is never lent a guessed thread.
    expected = [
        messages.ProcessSeen(
            pid=plain_tui, start_token=token, at_ms=AT, observed_at_ms=AT, key=own
        ),
        messages.PaneBound(key=own, pane="%1", at_ms=AT, proof="codex_tui_process"),
        messages.PaneBound(key=KEY_X, pane="%2", at_ms=AT, proof="codex_resume_argv"),
    ]
    assert sorted(map(_at_AT, sink.items), key=repr) == sorted(expected, key=repr)
    assert mapper.bindings() == {"%1": own, "%2": KEY_X}


async def test_periodic_rescan_finds_processes_no_message_announced() -> None:
    sink = ListSink()
    mapper = PaneMapper(BINDERS, rescan_interval=0.05)
    with anyio.fail_after(20):
        async with (
            running(mapper, sink),
            pane_tree(["sleep-first"], ["codex", "resume", "thread-x"]) as pane,
        ):
            first = await pane.next_pid()
            mapper.send_nowait(messages.PaneOpened(pane="%3", root_pid=pane.process.pid, at_ms=AT))
            await mapper.wait_idle()
            assert sink.items == []
            os.kill(first, signal.SIGKILL)
            await pane.next_pid()
            [bound] = await sink.wait_count(1)
    assert isinstance(bound, messages.PaneBound)
    assert bound.key == KEY_X


def test_full_mailbox_is_counted() -> None:
    mapper = PaneMapper(BINDERS, mailbox_size=1)
    mapper.send_nowait(messages.PaneClosed(pane="%1", at_ms=AT))
    with pytest.raises(anyio.WouldBlock):
        mapper.send_nowait(messages.PaneClosed(pane="%2", at_ms=AT))
    assert mapper.statistics().mailbox_overflow == 1
    mapper.close()
    with pytest.raises(anyio.ClosedResourceError):
        mapper.send_nowait(messages.PaneClosed(pane="%3", at_ms=AT))
