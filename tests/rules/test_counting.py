"""The lock-free counting and the amortised pruning rule, stated once in ``_base.counting``."""

from __future__ import annotations

import threading

import pytest

from retry_transport._base.counting import PRUNE_AT, Tally, counter, next_prune_at


def test_a_tally_takes_what_was_added_since_the_last_take() -> None:
    tally = Tally()
    assert tally.take() == 0
    for _ in range(5):
        next(tally)
    assert tally.take() == 5
    assert tally.take() == 0
    next(tally)
    assert tally.take() == 1


def test_no_addition_is_lost_under_threads() -> None:
    """Four threads add without a lock while a reader takes: every addition is taken once."""
    tally = Tally()
    taken = 0
    lock = threading.Lock()

    def add() -> None:
        for _ in range(20_000):
            next(tally)

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        with lock:
            taken += tally.take()
    for thread in threads:
        thread.join()
    assert taken + tally.take() == 80_000


@pytest.mark.parametrize(("kept", "then"), [(0, PRUNE_AT), (100, PRUNE_AT),
                                            (PRUNE_AT // 2, PRUNE_AT), (PRUNE_AT, 2 * PRUNE_AT),
                                            (5_000, 10_000)])
def test_a_table_looks_again_at_twice_what_it_kept(kept: int, then: int) -> None:
    assert next_prune_at(kept) == then


def test_a_counter_counts_from_its_start_under_threads() -> None:
    numbers = counter(1)
    drawn: list[int] = []

    def draw() -> None:
        drawn.extend(next(numbers) for _ in range(5_000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(drawn) == list(range(1, 20_001))
