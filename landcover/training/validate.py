"""Validation over whole tiles: sliding-window prediction, confusion matrix summed across workers."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from landcover.data.raster import TileArrays
from landcover.distributed import all_reduce_sum
from landcover.inference.sliding import predict_probabilities
from landcover.training.metrics import confusion_matrix


def validation_confusion(
    model: nn.Module,
    tiles: list[TileArrays],
    num_classes: int,
    patch_size: int,
    overlap: int,
    batch_size: int,
    prepare: Callable[[torch.Tensor], torch.Tensor],
    device: torch.device,
    autocast_dtype: torch.dtype | None,
    reduce_device: torch.device,
) -> torch.Tensor:
    """Predicts this worker's validation tiles and sums confusion matrices over all workers.

    Every worker must call this (it ends in an all-reduce), also with no tiles.

    Args:
        model: The bare model (not the DDP wrapper).
        tiles: This worker's validation tiles.
        num_classes: Number of classes.
        patch_size: Window size.
        overlap: Window overlap.
        batch_size: Windows per forward pass.
        prepare: Turns uint8 channels-last batches into model input.
        device: The model's device.
        autocast_dtype: Autocast dtype on CUDA, or ``None``.
        reduce_device: Device of the collective backend (CUDA for NCCL, CPU for Gloo).

    Returns:
        The ``(K, K)`` int64 confusion matrix over every worker's tiles.
    """
    was_training = model.training
    model.eval()
    total = torch.zeros((num_classes, num_classes), dtype=torch.int64)
    for tile in tiles:
        probs = predict_probabilities(
            model, tile.image, patch_size, overlap, batch_size, prepare, device, autocast_dtype
        )
        pred = probs.argmax(dim=0)
        total += confusion_matrix(pred, torch.from_numpy(tile.label), num_classes)
    model.train(was_training)
    total = total.to(reduce_device)
    all_reduce_sum(total)
    return total.cpu()
