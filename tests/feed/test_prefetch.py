import threading

import pytest
import torch

from landcover.feed.prefetch import Prefetcher


def test_batches_come_in_order_from_another_thread() -> None:
    threads = set()
    counter = iter(range(100))

    def make() -> tuple[torch.Tensor]:
        threads.add(threading.current_thread().name)
        return (torch.tensor(next(counter)),)

    got = [int(b[0]) for b in Prefetcher(make, steps=10, depth=3)]
    assert got == list(range(10))
    assert threads == {"landcover-prefetch"}


def test_producer_errors_reach_the_consumer() -> None:
    calls = iter(range(100))

    def make() -> tuple[torch.Tensor]:
        if next(calls) == 3:
            raise ValueError("bad tile")
        return (torch.zeros(1),)

    with pytest.raises(ValueError, match="bad tile"):
        list(Prefetcher(make, steps=10))


def test_leaving_early_stops_the_producer() -> None:
    made = []

    def make() -> tuple[torch.Tensor]:
        made.append(1)
        return (torch.zeros(1),)

    prefetcher = Prefetcher(make, steps=1000, depth=2)
    for i, _ in enumerate(prefetcher):
        if i == 2:
            break
    prefetcher.close()
    assert not prefetcher._thread.is_alive()
    assert len(made) < 10
