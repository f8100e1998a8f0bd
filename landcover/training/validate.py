"""Validation over whole tiles: blended sliding windows, confusion summed across workers."""

from __future__ import annotations

from collections.abc import Callable

import torch

from landcover.data.raster import TileArrays
from landcover.inference.sliding import SlidingWindowPredictor
from landcover.metrics import confusion_matrix
from landcover.parallel.engine import Engine


def validation_confusion(
    predictor: SlidingWindowPredictor,
    tiles: list[TileArrays],
    num_classes: int,
    reduce_device: torch.device,
    engine: Engine,
    prepare_for: Callable[[int], Callable[[torch.Tensor], torch.Tensor]] | None = None,
) -> torch.Tensor:
    """Predicts this worker's validation tiles and sums confusion matrices over all workers.

    Every worker must call this (it ends in an all-reduce), also with no tiles.

    Args:
        predictor: The sliding-window predictor over the bare model (not the DDP wrapper).
        tiles: This worker's validation tiles.
        num_classes: Number of classes.
        reduce_device: Device of the collective backend (CUDA for NCCL, CPU for Gloo).
        engine: The engine whose group sums the matrices.
        prepare_for: The normaliser of the i-th tile (``data.normalize: per_tile``), set as the
            predictor's before the tile; ``None`` keeps the predictor's.

    Returns:
        The ``(K, K)`` int64 confusion matrix over every worker's tiles.
    """
    total = torch.zeros((num_classes, num_classes), dtype=torch.int64)
    for i, tile in enumerate(tiles):
        if prepare_for is not None:
            predictor.prepare = prepare_for(i)
        height, width = tile.label.shape
        for row, probs in predictor.iter_strips(lambda a, b, t=tile: t.image[a:b], height, width):
            label = torch.from_numpy(tile.label[row : row + probs.shape[1]])
            total += confusion_matrix(probs.argmax(dim=0), label, num_classes)
    total = total.to(reduce_device)
    engine.all_reduce_sum(total)
    return total.cpu()
