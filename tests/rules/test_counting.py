"""The lock-free counting and the amortised pruning rule, stated once in ``_base.counting``."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from retry_transport._base.counting import PRUNE_AT, Bucket, Tally, counter, next_prune_at


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


def test_a_bucket_takes_whole_or_nothing_and_clips_what_comes_back() -> None:
    bucket = Bucket(12)
    take5, put1, put5 = bucket.taker(5), bucket.putter(1), bucket.putter(5)
    next(take5)
    next(take5)
    assert len(bucket) == 2
    with pytest.raises(IndexError):
        next(take5)  # two left: none taken
    assert len(bucket) == 2
    put1()
    assert len(bucket) == 3
    for expected in (8, 12, 12):  # the last one would make 13: clipped
        put5()
        assert len(bucket) == expected
    free = bucket.taker(0)
    next(free)
    assert len(bucket) == 12
    bucket.putter(0)()
    assert len(bucket) == 12


@pytest.fixture
def switching() -> Iterator[None]:
    """Threads switch every microsecond, between any two bytecodes of the code under test."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def test_no_thread_sees_a_bucket_change_half_made(switching: None) -> None:
    """Threads take 5 or 10 tokens and put them back, while a reader reads: every read is a
    multiple of 5 between 0 and the capacity (a take is never seen with some of its tokens
    gone), no take ever finds fewer tokens than it looked for, and every token comes back."""
    bucket = Bucket(100)
    reads: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def worker(n: int) -> None:
        take, put = bucket.taker(n), bucket.putter(n)
        try:
            for _ in range(10_000):
                try:
                    next(take)
                except IndexError:
                    continue  # fewer than n: nothing taken
                put()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        while not done.is_set():
            reads.append(len(bucket))

    threads = [threading.Thread(target=worker, args=(n,)) for n in (5, 10, 5, 10, 5, 10)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    watcher.join()
    assert errors == []
    assert reads and all(read % 5 == 0 and 0 <= read <= 100 for read in reads)
    assert len(bucket) == 100
