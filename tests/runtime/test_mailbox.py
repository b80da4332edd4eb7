"""The bounded mailbox and the restart-intensity rule every actor shares."""

from __future__ import annotations

import anyio
import pytest

from actors.runtime.mailbox import Mailbox, MailboxClosed, MailboxFull, RestartWindow


def test_mailbox_is_bounded_and_counts_refusals() -> None:
    box: Mailbox[int] = Mailbox(2)
    box.send_nowait(1)
    box.send_nowait(2)
    with pytest.raises(MailboxFull, match=r"mailbox full \(2 pending\)"):
        box.send_nowait(3)
    stats = box.statistics()
    assert (stats.size, stats.pending, stats.sent, stats.overflows) == (2, 2, 2, 1)
    assert box.receive_nowait() == 1
    box.close()
    assert box.receive_nowait() == 2
    with pytest.raises(anyio.EndOfStream):
        box.receive_nowait()
    box.close_receiving()


def test_sending_to_a_stopped_actor_raises_mailbox_closed() -> None:
    box: Mailbox[int] = Mailbox(1)
    box.close_receiving()
    with pytest.raises(MailboxClosed):
        box.send_nowait(1)
    box.close()


async def test_send_waits_for_room_then_delivers() -> None:
    box: Mailbox[str] = Mailbox(1)
    box.send_nowait("first")
    got: list[str] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:

            async def consume() -> None:
                for _ in range(2):
                    got.append(await box.receive())

            tg.start_soon(consume)
            await box.send("second")  # blocks until the consumer made room
    assert got == ["first", "second"]
    box.close()
    box.close_receiving()


def test_mailbox_needs_room_for_one_message() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Mailbox(0)


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        pytest.param([0.0, 1.0, 2.0], [True, True, True], id="within-budget"),
        pytest.param([0.0, 1.0, 2.0, 3.0], [True, True, True, False], id="one-too-many"),
        pytest.param([0.0, 1.0, 2.0, 20.0], [True, True, True, True], id="window-slides"),
    ],
)
def test_restart_window(times: list[float], expected: list[bool]) -> None:
    window = RestartWindow(max_restarts=3, period=10.0)
    assert [window.crash(t) for t in times] == expected
