"""Load benchmark: time to get each worker's share of tiles into memory.

From local disk and from a real Azurite blob server on loopback, with serial (one file at a
time) and parallel fetch, for 1 and 2 workers (2 worker processes load their shares at the same
time, as in training). Reports per-worker load time (the slowest worker), MB fetched per
worker, fetch MB/s, and the 2-worker / 1-worker ratio (goal: at most 0.6).

Usage: python benchmarks/load_bench.py [--quick] [--tiles 16] [--size 1024] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from common import RESULTS, Goal, write_results  # noqa: E402

RATIO_GOAL = 0.6


def _load_share(args: tuple[str, int, int, int, dict[str, str]]) -> dict:
    root, rank, world, concurrency, env = args
    os.environ.update(env)
    import torch

    from landcover.classes import resolve_mapping
    from landcover.data.pairs import discover_pairs
    from landcover.data.sharding import shard
    from landcover.feed.memory import load_tiles

    torch.set_num_threads(1)
    pairs = shard(discover_pairs(root, "_naip.tif", "_lc.tif"), rank, world)
    _, report = load_tiles(pairs, resolve_mapping("chesapeake7"), 4, concurrency=concurrency)
    return {
        "seconds": report.seconds,
        "file_mb": report.file_bytes / 1e6,
        "fetch_mb_s": report.fetch_mb_per_s,
    }


def measure(root: str, world: int, concurrency: int, env: dict[str, str]) -> dict:
    ctx = mp.get_context("spawn")
    with ctx.Pool(world) as pool:
        results = pool.map(_load_share, [(root, r, world, concurrency, env) for r in range(world)])
    return {
        "worker_s": max(r["seconds"] for r in results),
        "mb_per_worker": sum(r["file_mb"] for r in results) / world,
        "fetch_mb_s": sum(r["fetch_mb_s"] for r in results) / world,
    }


def run(
    quick: bool, out: Path, tiles: int | None = None, size: int = 1024, repeats: int = 2
) -> list[Goal]:
    """Runs the load benchmark part.

    Args:
        quick: Fewer tiles (8 instead of 16) and one repeat.
        out: Results folder.
        tiles: Tile pairs (default: 8 quick, 16 full).
        size: Tile side in pixels.
        repeats: Best of this many runs per setting (1 when quick).

    Returns:
        Goal 5 of the benchmark issue, per source and fetch mode.
    """
    from azurite import Azurite

    from landcover.storage.transfer import upload
    from landcover.synthetic.synthetic import write_synthetic_dataset

    tiles = tiles or (8 if quick else 16)
    repeats = 1 if quick else repeats
    with tempfile.TemporaryDirectory(prefix="landcover-load-") as tmp:
        local = Path(tmp, "data")
        write_synthetic_dataset(local, tiles, size, seed=1, prefix="load")
        server = Azurite(Path(tmp))
        server.start()
        try:
            env = server.env("connection_string")
            os.environ.update(env)
            container = server.create_container()
            remote = f"az://{container}/data"
            upload(local, remote, 8)
            rows = []
            for source, root in (("local disk", str(local)), ("azurite", remote)):
                for mode, concurrency in (("serial", 1), ("parallel", 8)):
                    timing = {}
                    for world in (1, 2):
                        runs = [measure(root, world, concurrency, env) for _ in range(repeats)]
                        best = min(runs, key=lambda r: r["worker_s"])
                        timing[world] = best
                        rows.append(
                            {
                                "source": source,
                                "fetch": mode,
                                "workers": world,
                                "worker_load_s": round(best["worker_s"], 3),
                                "mb_per_worker": round(best["mb_per_worker"], 1),
                                "fetch_mb_per_s": round(best["fetch_mb_s"], 1),
                            }
                        )
                    rows[-1]["ratio_2_over_1"] = round(
                        timing[2]["worker_s"] / timing[1]["worker_s"], 2
                    )
                    rows[-2]["ratio_2_over_1"] = ""
        finally:
            server.stop()
    for r in rows:
        r.setdefault("ratio_2_over_1", "")
    goals = [
        Goal(
            "load",
            f"per-worker load time, 2 workers / 1 worker ({r['source']}, {r['fetch']} fetch)",
            r["ratio_2_over_1"],
            f"<= {RATIO_GOAL}",
            r["ratio_2_over_1"] <= RATIO_GOAL,
            f"{tiles} tiles of {size} px; 2 cores shared by the workers"
            + (" and Azurite" if r["source"] == "azurite" else ""),
        )
        for r in rows
        if r["ratio_2_over_1"] != ""
    ]
    write_results(
        "load", rows, {"tiles": tiles, "size": size, "goal_ratio": RATIO_GOAL}, out, goals
    )
    return goals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 tiles, one repeat")
    parser.add_argument("--tiles", type=int, default=None)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=2, help="best of N")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    run(args.quick, args.out, args.tiles, args.size, args.repeats)


if __name__ == "__main__":
    main()
