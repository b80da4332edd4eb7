"""The real Gemini CLI 0.61.0, OpenCode 1.18.33, Pi 0.73.1 and Hermes Agent 0.19.0, each in a pane
of a private tmux server, with paneward's hooks (or plugin, or extension) installed by
``paneward install-hooks <name>``, against a loopback mock API the test starts
(tests/support/mock_apis.py: Gemini ``streamGenerateContent`` or Chat Completions), driven by keys
as a user would drive them.

Nothing is injected: the CLI fires its hooks, the hook client or the in-process forwarder sends
them to the real daemon (``paneward run --tmux``), the pane mapper binds the session to its pane
by process identity (the owner pid the hook reported, below the pane's root), the reducer decides
and the badge appears as pane options. Each test walks a turn with a tool, a permission wait
where the harness has one, an interrupt and the exit, and asserts what the harness can prove --
and, where it cannot (Gemini's Esc is an ``AfterAgent`` like a completion), that the declared
limit is what shows.

The CLIs come from their caches (``.ci/run`` installs them, pinned): ``$HOME/.cache/paneward-
{gemini,opencode,pi}/node_modules/.bin`` and the venv ``$HOME/.cache/paneward-hermes``. A missing
CLI skips the test, except under ``CI=true``, where it is a failure.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Final

import anyio
import psutil
import pytest

from actors.sources import procfs
from tests.support.daemon import PANEWARD, Daemon
from tests.support.mock_apis import MockServer
from tests.support.polling import poll_until
from tests.support.tmux import TmuxServer

pytestmark = [
    pytest.mark.skipif(not procfs.HAVE_PROCFS, reason="pane binding needs Linux /proc"),
    pytest.mark.timeout(300),
]

CACHE: Final = Path.home() / ".cache"
VERSIONS: Final = {
    "gemini": "0.61.0",
    "opencode": "1.18.33",
    "pi": "0.73.1",
    "hermes": "0.19.0",
}


def _cli(name: str) -> Path:
    binary = {
        "gemini": CACHE / "paneward-gemini" / "node_modules" / ".bin" / "gemini",
        "opencode": CACHE / "paneward-opencode" / "node_modules" / ".bin" / "opencode",
        "pi": CACHE / "paneward-pi" / "node_modules" / ".bin" / "pi",
        "hermes": CACHE / "paneward-hermes" / "bin" / "hermes",
    }[name]
    if not binary.exists():
        message = f"{name} {VERSIONS[name]} not installed at {binary} (bash .ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return binary




class Lab:
    """One test's world: a home, a work directory, the daemon on the private tmux server."""

    def __init__(self, tmp: Path, server: TmuxServer) -> None:
        self.tmp = tmp
        self.server = server
        self.home = tmp / "home"
        self.work = tmp / "work"
        self.state = tmp / "state"
        for d in (self.home, self.work):
            d.mkdir(parents=True)
        self.daemon = Daemon(self.state, extra_args=["--tmux", "-L", server.name])
        self.pane = ""
        self.key: dict[str, str] | None = None  # the session shown in the pane, once seen

    def install(self, harness: str, env: dict[str, str]) -> str:
        """``paneward install-hooks <harness>``: what it printed."""
        done = subprocess.run(
            [os.fspath(PANEWARD), "install-hooks", harness, "--executable", os.fspath(PANEWARD)],
            env={**self.base_env(), **env}, capture_output=True, text=True, check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def base_env(self) -> dict[str, str]:
        # Only what the CLI needs, and the daemon's state dir (its hook socket is there).
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.fspath(self.home),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "PANEWARD_STATE_DIR": os.fspath(self.state),
        }

    async def start(self, argv: list[str], env: dict[str, str]) -> str:
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**self.base_env(), **env}.items())
        line = f"cd {shlex.quote(os.fspath(self.work))} && exec env -i {exports} {shlex.join(argv)}"
        self.pane = await self.server.new_pane(line)
        await self.server.arun("resize-pane", "-t", self.pane, "-x", "150", "-y", "45")
        return self.pane

    async def screen(self) -> str:
        return await self.server.arun("capture-pane", "-p", "-J", "-t", self.pane, "-S", "-100")

    async def wait_text(self, text: str, within: float = 60) -> None:
        async def shown() -> bool:
            return text in await self.screen()

        await poll_until(shown, f"{text!r} on the screen", within=within, interval=0.1)

    async def keys(self, *keys: str, literal: bool = False) -> None:
        await self.server.arun("send-keys", "-t", self.pane, *(["-l"] if literal else []), *keys)

    async def option(self, name: str) -> str | None:
        return await self.server.show(self.pane, name)

    async def shows(self, turn: str, attention: str = "", within: float = 60) -> None:
        """Until the pane's options show ``turn`` and ``attention`` ("" for none)."""

        async def check() -> bool:
            return (
                await self.option("@paneward_turn") == turn
                and (await self.option("@paneward_attention") or "") == attention
            )

        await poll_until(check, f"turn {turn} / attention {attention!r}", within=within,
                         interval=0.05)

    async def submit(self, text: str, turn: str, attention: str = "") -> None:
        """Type ``text``, press Enter until the turn has started, then wait for the pane to show
        ``turn`` / ``attention``. (A TUI can take an Enter right after typed text as part of a
        paste, so Enter is repeated -- but only until the daemon has seen the turn start: one
        more could answer the dialog the turn opens.)"""
        before = await self._evidence()
        await self.keys(text, literal=True)
        await self.wait_text(text)

        async def started() -> bool:
            return await self._evidence() != before

        for _ in range(15):
            await self.keys("Enter")
            with suppress(AssertionError):  # not yet: press again
                await poll_until(started, "the turn's start", within=2, interval=0.05)
                break
        else:
            raise AssertionError(f"{text!r} never started a turn")
        await self.shows(turn, attention)

    async def _evidence(self) -> tuple[object, ...] | None:
        """What the daemon last published for the pane's session (``None``: nothing yet)."""
        for a in (await self.daemon.status())["activities"]:
            if a["pane"] == self.pane or (self.key is not None and a["key"] == self.key):
                return (a["turn"], a["attention"], a["evidence"]["at_ms"])
        return None

    async def press_until(self, key: str, turn: str, attention: str = "") -> None:
        """Press ``key`` every 2 s until the pane shows ``turn`` / ``attention``."""
        for _ in range(15):
            await self.keys(key)
            with suppress(AssertionError):  # not yet: press again
                await self.shows(turn, attention, within=2)
                return
        raise AssertionError(f"{key!r} never led to turn {turn} / attention {attention!r}")

    async def activity(self, harness: str) -> dict[str, Any]:
        """The activity of the session in the pane (after the exit, of that same session: the
        pane is gone with the program)."""
        found = [
            a for a in (await self.daemon.status())["activities"]
            if a["key"]["harness"] == harness
            and (a["key"] == self.key if self.key is not None else a["pane"] == self.pane)
        ]
        assert len(found) == 1, found
        first: dict[str, Any] = found[0]
        self.key = first["key"]
        return first

    async def quit(self, command: str, harness: str) -> dict[str, Any]:
        """Type ``command`` and Enter until the session has ended (presence ``persisted``)."""
        await self.activity(harness)  # remember the key while the pane still shows it
        await self.keys(command, literal=True)
        await self.wait_text(command)
        async def ended() -> bool:
            presence: str = (await self.activity(harness))["presence"]
            return presence == "persisted"

        for _ in range(15):
            with suppress(subprocess.CalledProcessError):
                await self.keys("Enter")  # the pane may be gone already
            with suppress(AssertionError):  # not yet: press again
                await poll_until(ended, "the session's end", within=2, interval=0.05)
                return await self.activity(harness)
        raise AssertionError(f"{command!r} never ended the session")


@asynccontextmanager
async def lab(tmp_path: Path, server: TmuxServer) -> AsyncIterator[Lab]:
    world = Lab(tmp_path, server)
    async with world.daemon:
        try:
            yield world
        except BaseException:
            with suppress(Exception):
                print(f"--- pane {world.pane} ---\n{await world.screen()}")
            print(world.daemon.stderr()[-4000:])
            raise


# ------------------------------------------------------------------------------ Gemini CLI


async def test_gemini_cli_hooks_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, gemini_api: MockServer
) -> None:
    gemini = _cli("gemini")
    async with lab(tmp_path, server) as world:
        settings = world.home / ".gemini" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(json.dumps({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }, indent=2))
        said = world.install("gemini", {})
        assert "only the events paneward needs are installed" in said
        env = {
            "GEMINI_API_KEY": "mock-key",
            "GOOGLE_GEMINI_BASE_URL": gemini_api.url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }
        with anyio.fail_after(240):
            await world.start([os.fspath(gemini), "-m", "gemini-2.5-flash"], env)
            await world.wait_text("Type your message")
            # SessionStart: the hook's parent (Gemini's node process) is a live owner below
            # the pane's root -- bound to the pane, turn not yet known.
            await world.shows("unknown")
            assert await world.option("@paneward_harness") == "gemini"
            assert await world.option("@paneward_presence") == "running"

            await world.submit("please TOOL now", "idle", "turn_done")
            assert "Shell echo hi" in await world.screen()

            (world.work / "junkdir").mkdir()
            await world.submit("please DANGER now", "needs_input", "needs_input")
            await world.wait_text("Allow execution of")
            needs = await world.activity("gemini")
            assert needs["attention"]["reason"] == "permission: run_shell_command: rm -rf ./junkdir"
            # The answer has no event: the AfterTool that follows closes the wait.
            await world.press_until("Enter", "idle", "turn_done")
            assert not (world.work / "junkdir").exists()

            gemini_api.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(gemini_api.stalled.wait, 30)
            await world.keys("Escape")
            # What Gemini can prove: an Esc ends the turn with an AfterAgent like any other,
            # with no flag -- so the interrupted turn shows as done (declared in its PROOFS).
            await world.shows("idle", "turn_done")
            await world.wait_text("Request cancelled")

            done = await world.quit("/quit", "gemini")
            assert done["attention"]["kind"] == "turn_done"
            assert done["evidence"]["source"] == "gemini_hook"
            assert done["evidence"]["native_state"] == "exit"  # SessionEnd reason


# ------------------------------------------------------------------------------ OpenCode


async def test_opencode_plugin_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    opencode = _cli("opencode")
    async with lab(tmp_path, server) as world:
        config = world.home / ".config" / "opencode"
        config.mkdir(parents=True)
        (config / "opencode.json").write_text(json.dumps({
            "model": "mock/mock-model", "small_model": "mock/mock-model", "autoupdate": False,
            "share": "disabled",
            "provider": {"mock": {
                "npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{chat.url}/v1", "apiKey": "mock-key"},
                "models": {"mock-model": {"name": "Mock Model", "tool_call": True}},
            }},
            "permission": {"bash": "ask", "edit": "ask"},
        }))
        said = world.install("opencode", {})
        assert "without waiting for it" in said
        env = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"}
        with anyio.fail_after(240):
            await world.start([os.fspath(opencode)], env)
            await world.wait_text("Ask anything")

            # bash is "ask": the permission wait (session.status stays busy meanwhile).
            await world.submit("please TOOL now", "needs_input", "needs_input")
            await world.wait_text("Permission required")
            reason = (await world.activity("opencode"))["attention"]["reason"]
            assert reason == "permission: bash: echo hi"
            assert await world.option("@paneward_harness") == "opencode"
            await world.press_until("Enter", "idle", "turn_done")  # "Allow once"

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            # Esc twice interrupts: MessageAbortedError, then idle -- not a completion.
            await world.keys("Escape")
            await world.press_until("Escape", "idle", "")
            await world.wait_text("interrupted")
            assert (await world.activity("opencode"))["evidence"]["native_state"] == (
                "session.idle"
            )

            # server.instance.disposed does not reach the plugin before opencode ends: the
            # process's death is the proof (pid watcher), and it was idle -- nothing failed.
            gone = await world.quit("/exit", "opencode")
            assert gone["attention"] is None
            assert gone["evidence"]["source"] == "pid_probe"


# ------------------------------------------------------------------------------ Pi


async def test_pi_extension_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    pi = _cli("pi")
    async with lab(tmp_path, server) as world:
        _pi_models(world, chat)
        said = world.install("pi", {})
        assert "no permission prompt" in said
        with anyio.fail_after(240):
            await world.start([os.fspath(pi), "--provider", "mock", "--model", "mock-model"], {})
            await world.wait_text("paneward.ts")  # Pi lists the extensions it loaded
            await world.shows("unknown")  # session_start: bound, no turn yet
            assert await world.option("@paneward_harness") == "pi"

            await world.submit("please TOOL now", "idle", "turn_done")

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            await world.press_until("Escape", "idle", "")  # stopReason "aborted": no turn_done
            await world.wait_text("Operation aborted")

            gone = await world.quit("/quit", "pi")
            assert gone["evidence"]["source"] == "pi_extension"  # session_shutdown
            assert gone["attention"] is None


async def test_pi_killed_after_a_finished_turn_says_exited_until_seen(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    """Pi killed with SIGKILL after a turn it finished: the pane it ran in (its shell stays)
    says the agent is gone with the done nobody saw (``■ exited · done``), and is a plain shell
    with no option of paneward's once the user has looked at it."""
    pi = _cli("pi")
    async with lab(tmp_path, server) as world:
        _pi_models(world, chat)
        world.install("pi", {})
        with anyio.fail_after(240):
            command = shlex.join([os.fspath(pi), "--provider", "mock", "--model", "mock-model"])
            pane = await world.start(["sh", "-c", f"{command}; exec sleep 600"], {})
            await world.wait_text("paneward.ts")
            await world.shows("unknown")
            await world.submit("please TOOL now", "idle", "turn_done")
            root = psutil.Process(int(await server.arun(
                "display-message", "-p", "-t", pane, "#{pane_pid}")))
            [agent] = root.children()  # the shell's one child: Pi's node process
            os.kill(agent.pid, signal.SIGKILL)

            async def badge(want: str | None) -> bool:
                return await world.option("@paneward_badge") == want

            await poll_until(lambda: badge("■ exited · done"), "exited · done", within=60,
                             interval=0.05)
            assert await world.option("@paneward_presence") == "persisted"
            assert (await world.activity("pi"))["attention"]["kind"] == "turn_done"
            await server.arun("select-pane", "-t", pane)  # the user looks at it

            async def bare() -> bool:
                return await server.pane_option_names(pane) == []

            await poll_until(bare, "a plain shell again", within=60, interval=0.05)
            seen = await world.activity("pi")
            assert (seen["presence"], seen["attention"], seen["pane"]) == ("persisted", None, None)


def _pi_models(world: Lab, chat: MockServer) -> None:
    """Pi's model list: one model, served by the loopback Chat Completions mock."""
    agent = world.home / ".pi" / "agent"
    agent.mkdir(parents=True)
    (agent / "models.json").write_text(json.dumps({"providers": {"mock": {
        "baseUrl": f"{chat.url}/v1", "api": "openai-completions", "apiKey": "mock-key",
        "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
        "models": [{"id": "mock-model"}],
    }}}))


# ------------------------------------------------------------------------------ Hermes Agent


async def test_hermes_interactive_hooks_through_the_daemon_to_its_pane(
    tmp_path: Path, server: TmuxServer, chat: MockServer
) -> None:
    hermes = _cli("hermes")
    async with lab(tmp_path, server) as world:
        hermes_home = world.tmp / "hermes-home"
        hermes_home.mkdir()
        (hermes_home / "config.yaml").write_text(
            "# my Hermes settings\n"
            "model:\n"
            "  provider: custom\n"
            f"  base_url: {chat.url}/v1\n"
            "  default: mock-model\n"
            "  api_key: mock-key\n"
        )
        env = {"HERMES_HOME": os.fspath(hermes_home)}
        said = world.install("hermes", env)
        assert "Allow this hook to run?" in said and "--accept-hooks" in said
        with anyio.fail_after(280):
            await world.start([os.fspath(hermes)], env)
            # The consent Hermes asks once per hook, on its terminal: answered as a user would.
            for n in range(8):
                await world.wait_text("Allow this hook to run?")
                await world.keys("y", "Enter")
                await poll_until(
                    _consents(hermes_home, n + 1), "the answer recorded", within=30, interval=0.1
                )
            await world.wait_text("Welcome to Hermes Agent")
            allow = json.loads((hermes_home / "shell-hooks-allowlist.json").read_text())
            assert len(allow["approvals"]) == 8

            # on_session_start comes with the first prompt, then the turn.
            await world.submit("please TOOL now", "idle", "turn_done")
            assert await world.option("@paneward_harness") == "hermes"

            (world.work / "junkdir").mkdir()
            await world.submit("please DANGER now", "needs_input", "needs_input")
            await world.wait_text("Allow once")
            reason = (await world.activity("hermes"))["attention"]["reason"]
            assert reason == "permission: terminal: rm -rf ./junkdir"
            await world.press_until("Enter", "idle", "turn_done")  # "Allow once" is preselected
            assert not (world.work / "junkdir").exists()

            chat.stalled.clear()
            await world.submit("be SLOW now", "working")
            assert await anyio.to_thread.run_sync(chat.stalled.wait, 30)
            await world.press_until("C-c", "idle", "")  # on_session_end interrupted: no done
            await world.wait_text("Interrupted")

            gone = await world.quit("/exit", "hermes")
            assert gone["evidence"]["native_state"] == "shutdown"  # on_session_finalize


def _consents(home: Path, count: int) -> Callable[[], Awaitable[bool]]:
    """Until Hermes has recorded ``count`` answers in its allowlist."""

    async def recorded() -> bool:
        try:
            approvals = json.loads((home / "shell-hooks-allowlist.json").read_text())["approvals"]
        except (OSError, ValueError, KeyError):
            return False
        return len(approvals) >= count

    return recorded
