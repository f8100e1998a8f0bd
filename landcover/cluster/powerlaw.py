"""A power law fitted to epoch times: the scaling exponent of measured or predicted curves."""

from __future__ import annotations

import math
from collections.abc import Sequence


def fit_power_law(counts: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """Fits ``time = a * count ** k`` by least squares on the logarithms.

    Args:
        counts: GPU counts (> 0).
        times: Epoch times (> 0), one per count.

    Returns:
        ``(k, a)``: the exponent and the coefficient.

    Raises:
        ValueError: With fewer than two distinct counts, unequal lengths or values <= 0.
    """
    if len(counts) != len(times):
        raise ValueError(f"{len(counts)} counts but {len(times)} times")
    if len(set(counts)) < 2:
        raise ValueError("a power law needs at least two distinct counts")
    if min(counts) <= 0 or min(times) <= 0:
        raise ValueError("counts and times must be positive")
    xs = [math.log(c) for c in counts]
    ys = [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )
    return k, math.exp(my - k * mx)
