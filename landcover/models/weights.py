"""Initial weights for training (``model.weights``): a local file, or smp's ImageNet encoder.

A local file may hold a landcover checkpoint, a whole-model state dict (optionally wrapped in
``{"state_dict": ...}`` or ``{"model": ...}``, optionally with DDP's ``module.`` prefix), or an
encoder-only state dict in the key layout of torchvision, timm or smp; :mod:`.keymap` fits it
to the model. Files load with ``torch.load(..., weights_only=True)`` (or safetensors).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import nn

from landcover.archregistry import registered_builder
from landcover.config import ModelConfig
from landcover.errors import CheckpointError
from landcover.models.keymap import KeyMismatchError, fit_state_dict, strip_wrapper
from landcover.models.pretrained import IMAGENET, fetch_pretrained_encoder

_CHECKPOINT_FORMAT = "landcover-checkpoint"
_WRAPPER_KEYS = ("state_dict", "model")


@dataclass(frozen=True)
class LoadedWeights:
    """What :func:`load_initial_weights` put into the model.

    Attributes:
        source: The file, or a description of the downloaded encoder.
        layout: How the weights were laid out (for example ``landcover checkpoint``).
        tensors: Number of tensors loaded.
        encoder_only: Whether only the encoder was loaded (decoder and head keep their init).
        first_conv: The first convolution's key and old/new band counts, if it was adapted.
        dropped_head: Number of classifier-head tensors dropped.
        unused: Number of encoder tensors the model does not build.
    """

    source: str
    layout: str
    tensors: int
    encoder_only: bool
    first_conv: tuple[str, int, int] | None = None
    dropped_head: int = 0
    unused: int = 0

    def summary(self) -> str:
        """One log line saying what was loaded."""
        into = "the encoder" if self.encoder_only else "the whole model"
        parts = [f"initial weights from {self.source} ({self.layout}): {self.tensors} tensors "]
        parts[0] += f"loaded into {into}"
        if self.first_conv:
            key, old, new = self.first_conv
            rule = (
                "the sum of the RGB kernels"
                if new == 1
                else f"band i takes RGB band i % 3, kernel scaled by 3/{new}"
            )
            parts.append(f"first conv {key} adapted from {old} to {new} bands (smp's rule: {rule})")
        if self.dropped_head:
            parts.append(f"{self.dropped_head} classifier-head tensors dropped")
        if self.unused:
            parts.append(f"{self.unused} tensors of stages the encoder does not build skipped")
        if self.encoder_only:
            parts.append("decoder and segmentation head left at random init")
        return "; ".join(parts)


def load_initial_weights(model: nn.Module, config: ModelConfig, in_channels: int) -> LoadedWeights:
    """Loads ``config.weights`` into a freshly built model.

    Args:
        model: The smp U-Net built from ``config``.
        config: The model configuration; ``weights`` is a local file or ``imagenet``.
        in_channels: The model's band count.

    Returns:
        What was loaded, for the log.

    Raises:
        CheckpointError: If the file is missing, not loadable or does not fit the model (naming
            the first mismatched key), or the ImageNet encoder cannot be downloaded.
        ConfigError: If smp has no ImageNet weights for the encoder.
    """
    if config.weights is None:
        raise ValueError("config.weights is not set")
    if config.weights == IMAGENET:
        state, url = fetch_pretrained_encoder(config, in_channels)
        model.encoder.load_state_dict(state)
        first = ("of the encoder", 3, in_channels)
        return LoadedWeights(
            source=url,
            layout=f"smp's {IMAGENET} {config.encoder} encoder",
            tensors=len(state),
            encoder_only=True,
            first_conv=first if in_channels != 3 else None,
        )
    path = config.weights
    state, wrapper = read_state_dict(path)
    if registered_builder(config.arch) is not None:  # a registered architecture: its keys
        return _load_whole(model, state, path, wrapper)
    try:
        fitted = fit_state_dict(state, model, config.encoder)
    except KeyMismatchError as exc:
        raise CheckpointError(
            f"{path}: weights do not fit the configured {config.encoder} model: {exc}"
        ) from None
    result = model.load_state_dict(fitted.state, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys  # fit_state_dict checked them
    layout = ", ".join(p for p in (wrapper, fitted.layout) if p)
    if fitted.stripped_prefix:
        layout += f", {fitted.stripped_prefix!r} prefix stripped"
    return LoadedWeights(
        source=path,
        layout=layout,
        tensors=len(fitted.state),
        encoder_only=fitted.encoder_only,
        first_conv=fitted.first_conv,
        dropped_head=fitted.dropped_head,
        unused=fitted.unused,
    )


def _load_whole(
    model: nn.Module, state: dict[str, torch.Tensor], path: str, wrapper: str
) -> LoadedWeights:
    """Loads a whole-model state dict into a model that is not smp's (strict, wrappers off).

    Raises:
        CheckpointError: If its keys or shapes are not the model's (one line).
    """
    state, stripped = strip_wrapper(state)
    layout = ", ".join(
        p for p in (wrapper, f"{stripped!r} prefix stripped" if stripped else "") if p
    )
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        why = str(exc).splitlines()[1].strip() if "\n" in str(exc) else str(exc)
        raise CheckpointError(f"{path}: weights do not fit the registered model: {why}") from None
    return LoadedWeights(path, layout or "whole model", len(state), encoder_only=False)


def read_state_dict(path: str) -> tuple[dict[str, torch.Tensor], str]:
    """Reads the tensors of a weights file, unwrapping checkpoints and ``state_dict`` wrappers.

    Args:
        path: A local ``.pt``/``.pth``/``.bin`` file (``torch.load(..., weights_only=True)``)
            or a ``.safetensors`` file.

    Returns:
        The tensors by key, and the wrapper found (``landcover checkpoint``,
        ``'state_dict' wrapper``, ...; "" for a bare state dict).

    Raises:
        CheckpointError: If the file is missing, not loadable or holds no state dict.
    """
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: weights file not found")
    try:
        if path.endswith(".safetensors"):
            blob: Any = load_file(path, device="cpu")
        else:
            blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for bad files
        raise CheckpointError(
            f"{path}: not a loadable weights file ({exc.__class__.__name__})"
        ) from None
    wrapper = ""
    if isinstance(blob, dict) and blob.get("format") == _CHECKPOINT_FORMAT:
        blob, wrapper = blob.get("model"), "landcover checkpoint"
    elif isinstance(blob, dict) and not _is_state_dict(blob):
        for key in _WRAPPER_KEYS:
            if isinstance(blob.get(key), dict):
                blob, wrapper = blob[key], f"{key!r} wrapper"
                break
    if not isinstance(blob, dict) or not blob or not _is_state_dict(blob):
        raise CheckpointError(f"{path}: holds no state dict (a dict of tensors by name)")
    return blob, wrapper


def _is_state_dict(blob: dict[Any, Any]) -> bool:
    return all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in blob.items())
