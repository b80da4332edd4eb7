"""The one retry rule (actors/core/backoff.py): pure, driven with explicit clock values."""

from __future__ import annotations

import pytest

from actors.core.backoff import HEALTHY_AFTER_S, Backoff, retry_delay
from actors.core.ingress.limits import ACCEPT_BACKOFF_MAX_S, ACCEPT_BACKOFF_S, accept_backoff


def test_failures_in_a_row_double_the_wait_up_to_the_maximum() -> None:
    backoff = Backoff(0.25, 2.0)
    assert [backoff.failed() for _ in range(6)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    assert retry_delay(10_000, 0.25, 2.0) == 2.0  # no overflow however long it fails


def test_only_a_connection_that_worked_for_a_while_resets_the_wait() -> None:
    backoff = Backoff(1.0, 64.0)
    assert backoff.failed() == 1.0
    backoff.connected(100.0)
    assert backoff.ended(100.5) == 2.0  # accepted, then failed at once: one more failure
    backoff.connected(200.0)
    assert backoff.ended(200.0 + HEALTHY_AFTER_S - 0.001) == 4.0
    backoff.connected(300.0)
    assert backoff.ended(300.0 + HEALTHY_AFTER_S) == 1.0  # it worked: from the start again
    assert backoff.ended(400.0) == 2.0  # an end with no connection is a failure


def test_the_accept_pause_is_the_same_curve() -> None:
    assert [accept_backoff(n) for n in (1, 2, 3)] == [
        ACCEPT_BACKOFF_S, 2 * ACCEPT_BACKOFF_S, 4 * ACCEPT_BACKOFF_S]
    assert accept_backoff(1000) == ACCEPT_BACKOFF_MAX_S


def test_a_maximum_below_the_initial_wait_caps_it() -> None:
    backoff = Backoff(0.25, 0.2)
    assert [backoff.failed() for _ in range(2)] == [0.2, 0.2]


@pytest.mark.parametrize(("initial", "maximum"), [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0)])
def test_a_nonsense_policy_is_refused(initial: float, maximum: float) -> None:
    with pytest.raises(ValueError, match="positive waits"):
        Backoff(initial, maximum)
