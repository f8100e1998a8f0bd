"""Dealing tiles (landcover.mapping.deal), in process: each tile claimed exactly once.

The board runs against a real c10d TCPStore on loopback (the store a torch job's workers
share), with threads standing in for workers; the expected claims are simply 0..N-1.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from torch.distributed import TCPStore

from landcover.mapping.deal import TileBoard


@pytest.fixture
def store() -> TCPStore:
    return TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)


def _claim_all(board: TileBoard, claimed: list[int]) -> None:
    while (index := board.claim()) is not None:
        claimed.append(index)
        board.finish("done", cost=10, pixels=100)


@pytest.mark.parametrize("shared", [True, False], ids=["store", "in-process"])
def test_every_tile_is_claimed_exactly_once_by_concurrent_workers(shared: bool, store) -> None:
    total = 57
    # four workers, each with its own board over the one store (as each rank has)
    boards = [TileBoard(total, store if shared else None) for _ in range(4 if shared else 1)]
    claims: list[list[int]] = [[] for _ in boards]
    threads = [
        threading.Thread(target=_claim_all, args=(board, mine))
        for board, mine in zip(boards, claims, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [index for mine in claims for index in mine]
    assert Counter(every) == Counter(range(total))
    counts = boards[0].counts()
    assert (counts.claimed, counts.done, counts.finished) == (total, total, total)
    assert (counts.cost_done, counts.cost_finished, counts.pixels_done) == (570, 570, 5700)
    assert not counts.stopped


def test_a_stop_on_one_board_ends_the_claims_on_every_board(store) -> None:
    first, second = TileBoard(10, store), TileBoard(10, store)
    assert first.claim() == 0
    assert second.claim() == 1
    first.finish("failed", cost=3)
    second.stop()
    assert first.claim() is None and second.claim() is None
    counts = first.counts()
    assert counts.stopped
    assert (counts.claimed, counts.failed, counts.done, counts.cost_finished) == (2, 1, 0, 3)


def test_skipped_tiles_count_as_finished_but_not_as_predicted_pixels() -> None:
    board = TileBoard(3)
    for status in ("skipped", "done", "failed"):
        assert board.claim() is not None
        board.finish(status, cost=7, pixels=49)
    assert board.claim() is None
    counts = board.counts()
    assert (counts.done, counts.skipped, counts.failed, counts.finished) == (1, 1, 1, 3)
    assert (counts.cost_done, counts.cost_finished, counts.pixels_done) == (7, 21, 49)


def test_a_tile_is_claimed_ahead_only_while_every_other_worker_has_one_left(store) -> None:
    """Two workers on one store, 5 tiles: worker A claims ahead while the unclaimed tiles are at
    least the workers; past that it gets none ahead, and a claim when free still gets one."""
    a, b = TileBoard(5, store, workers=2), TileBoard(5, store, workers=2)
    got = [a.claim(), a.claim_ahead(), b.claim(), a.claim_ahead()]
    # unclaimed before each claim ahead: 4 and 2 (>= 2 workers), then 1 (< 2): none ahead
    assert got == [0, 1, 2, 3]
    assert a.claim_ahead() is None and b.claim_ahead() is None
    assert b.claim() == 4 and a.claim() is None
    alone = TileBoard(3, workers=1)  # one worker never leaves another idle: always ahead
    assert [alone.claim(), alone.claim_ahead(), alone.claim_ahead(), alone.claim_ahead()] == [
        0,
        1,
        2,
        None,
    ]
    a.stop()
    assert TileBoard(5, store, workers=2).claim_ahead() is None  # a stopped job: none


def test_rows_of_tiles_in_progress_count_until_the_tile_finishes(
    store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The progress line moved only when a whole tile finished: with a few large tiles it
    read 0 tiles and 0.00 Mpx/s, without a share or an ETA, for minutes."""
    from landcover.mapping import progress as progress_module
    from landcover.mapping.progress import JobProgress

    ours, theirs = TileBoard(2, store), TileBoard(2, store)  # two workers, one store
    progress = JobProgress(ours, total_cost=2000, every_s=60, enabled=False)
    now = progress._start + 10  # ten seconds in, whatever the machine's load
    monkeypatch.setattr(progress_module.time, "perf_counter", lambda: now)
    ours.advance(400, 400_000)  # 40 % of worker 0's tile: 400 of its 1000 px of cost
    theirs.advance(100, 100_000)
    counts = ours.counts()
    assert (counts.cost_partial, counts.pixels_partial) == (500, 500_000)
    line = progress.line(counts)
    assert line.startswith("tiles 0/2 (0 predicted")
    assert " 0.05 Mpx/s, 25 % ETA 0:00:30" in line  # 500 of 2000 in 10 s: 1500 left
    ours.advance(-400, -400_000)  # worker 0's tile finishes: it counts whole instead
    assert ", 25 % ETA" in progress.line(ours.counts())  # read between the two: never lower
    ours.finish("done", cost=1000, pixels=1_000_000)
    counts = theirs.counts()
    assert (counts.cost_partial, counts.pixels_partial, counts.cost_done) == (100, 100_000, 1000)
    assert progress.line(counts, final=True).endswith("0.10 Mpx/s")  # finished tiles only
