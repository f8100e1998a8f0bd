"""Blending predict's windows on the CPU: the softmax block by block against whole windows.

``landcover predict`` adds every window's class probabilities, weighted, into the strip it
is building (:class:`~landcover.inference.blend.StripBlender`). A U-Net on the CPU returns its
logits channels-last, so the softmax over the classes first copies them class-major, and the
whole-window path then passes over the window's 6 x 1,024 x 1,024 floats (24 MB) four times:
the copy, the softmax, the weighting and the sum. Since 2026-11-27 the blender does the four
on 64 rows at a time (:func:`~landcover.inference.blend.add_weighted_softmax`), which stay in
a core's cache. Both paths go through the blender here, on one row of windows of the ceiling
tile's width (7,500 px: 8 windows of predict's default 1,024 px with 64 px of overlap; the
second row of a tile, which adds to the first row's overlap rows), with fixed channels-last
logits standing in for the model (returned at no cost), on 1 and 2 threads, alternately, best
of ``repeats``; the two paths' strips are checked equal.

The class map's arg-max of that strip too (:func:`~landcover.inference.encode.first_argmax`):
its ``K`` passes with a ``masked_fill_`` of the uint8 index, as until 2026-11-27, against the
index kept as ``max(index, k * [p_k > best])``; the two class strips are checked equal.

Usage: python benchmarks/run.py blend  (or: python benchmarks/blend_bench.py [--quick])
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, Goal, write_results

from landcover.inference.blend import StripBlender, StripPlan, blend_weights
from landcover.inference.encode import first_argmax
from landcover.inference.sliding import window_starts

WIDTH = 7500
WINDOW = 1024
OVERLAP = 64
CLASSES = 6


def _blender(plan: StripPlan, logits: torch.Tensor, blocked: bool) -> StripBlender:
    """A blender of ``plan`` whose windows all have these logits (block by block or whole)."""
    weights = blend_weights(plan.window, OVERLAP)
    if blocked:
        return StripBlender(plan, lambda crops: logits, 1, weights, logits=True)
    return StripBlender(plan, lambda crops: torch.softmax(logits.float(), dim=1), 1, weights)


def time_row(blocked: bool, threads: int, repeats: int) -> tuple[float, torch.Tensor]:
    """Seconds to blend one row of windows (best of ``repeats``) and the strip it makes."""
    torch.set_num_threads(threads)
    height = WINDOW * 3  # a middle row of windows: rows above and below overlap it
    plan = StripPlan(
        height,
        WIDTH,
        WINDOW,
        tuple(window_starts(height, WINDOW, OVERLAP)),
        tuple(window_starts(WIDTH, WINDOW, OVERLAP)),
    )
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn((1, CLASSES, WINDOW, WINDOW), generator=gen).mul_(3.0)
    logits = logits.contiguous(memory_format=torch.channels_last)  # as a U-Net's on the CPU
    rows = torch.zeros((WINDOW, plan.padded_width, 4), dtype=torch.uint8)
    best = float("inf")
    strip = None
    for _ in range(repeats + 1):  # the first is a warm-up
        blender = _blender(plan, logits, blocked)
        blender.add(rows)  # the first row of windows; the second carries its overlap rows
        start = time.perf_counter()
        strip = blender.add(rows)
        best = min(best, time.perf_counter() - start)
    assert strip is not None
    return best, strip.clone()


def masked_argmax(probs: torch.Tensor) -> torch.Tensor:
    """:func:`first_argmax` as it was until 2026-11-27: the uint8 index set by ``masked_fill_``."""
    best = probs[0].clone()
    index = torch.zeros(best.shape, dtype=torch.uint8)
    larger = torch.empty(best.shape, dtype=torch.bool)
    for k in range(1, probs.shape[0]):
        torch.gt(probs[k], best, out=larger)
        index.masked_fill_(larger, k)
        torch.maximum(best, probs[k], out=best)
    return index


def time_argmax(strip: torch.Tensor, masked: bool, threads: int, repeats: int) -> float:
    """Seconds of the arg-max of a strip (best of ``repeats``, after a warm-up)."""
    torch.set_num_threads(threads)
    argmax = masked_argmax if masked else first_argmax
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        argmax(strip)
        best = min(best, time.perf_counter() - start)
    return best


def run(quick: bool, out: Path) -> list[Goal]:
    """Runs the blend benchmark part.

    Args:
        quick: Fewer repeats.
        out: Results folder.

    Returns:
        The ratio of the whole-window path's time to the blocked path's, and of the masked
        arg-max's to the kept one's, per thread count.

    Raises:
        SystemExit: If the two paths' strips, or the two arg-maxes, differ.
    """
    repeats = 3 if quick else 8
    windows = len(window_starts(WIDTH, WINDOW, OVERLAP))
    rows, goals = [], []

    def report(stage: str, paths: dict[str, float], threads: int, goal: str, note: str) -> None:
        """Rows of ``paths`` (name: seconds; the one before first) and their ratio's goal."""
        for path, seconds in paths.items():
            rows.append(
                {
                    "stage": stage,
                    "path": path,
                    "threads": threads,
                    "ms_per_window": round(1000 * seconds / windows, 2),
                    "window_mpx_per_s": round(windows * WINDOW**2 / 1e6 / seconds, 1),
                }
            )
        before, after = paths.values()
        ratio = round(before / after, 2)
        goals.append(Goal("blend", goal, ratio, ">= 1", ratio >= 1, note))

    for threads in (1, 2):
        seconds: dict[bool, float] = {}
        strips: dict[bool, torch.Tensor] = {}
        for blocked in (False, True, False, True):  # alternately
            s, strips[blocked] = time_row(blocked, threads, repeats)
            seconds[blocked] = min(seconds.get(blocked, float("inf")), s)
        if not torch.equal(strips[False], strips[True]):
            raise SystemExit("blend: the blocked softmax's strip differs from the whole windows'")
        report(
            "softmax + blend",
            {"whole window": seconds[False], "blocked (64 rows)": seconds[True]},
            threads,
            f"predict's blending of a {WINDOW} px window of {CLASSES} classes on the CPU, "
            f"{threads} thread(s): whole-window softmax time / blocked",
            f"one row of {windows} windows, {WIDTH} px wide, channels-last logits; "
            "the strips are equal",
        )
        strip = strips[True]
        if not torch.equal(masked_argmax(strip), first_argmax(strip)):
            raise SystemExit("blend: the arg-max differs from the masked one")
        spent = {masked: float("inf") for masked in (True, False)}
        for masked in (True, False, True, False):  # alternately
            spent[masked] = min(spent[masked], time_argmax(strip, masked, threads, repeats))
        report(
            "arg-max",
            {"masked uint8 (before)": spent[True], "max(index, k * larger)": spent[False]},
            threads,
            f"the class map's arg-max over {CLASSES} classes on the CPU, {threads} "
            "thread(s): masked uint8 index time / max(index, k * larger)",
            f"the blended strip of {strip.shape[1]} x {WIDTH} px; the class strips are equal",
        )
    write_results("blend", rows, {"window": WINDOW, "width": WIDTH}, out, goals)
    return goals


if __name__ == "__main__":
    run("--quick" in sys.argv, RESULTS / "quick" if "--quick" in sys.argv else RESULTS)
