"""Fitting a state dict's keys to the model: whole-model and encoder-only layouts.

A weights file may hold a whole smp U-Net, or only an encoder in the key layout of
torchvision, timm or smp. The layout is found by trying each candidate key transform and
keeping the one whose keys match most of the model's own keys; the file's classifier head is
dropped, and an RGB first convolution is extended to the model's band count the way smp
extends pretrained encoders (the arithmetic of smp's ``patch_first_conv``, repeated in
:func:`adapt_first_conv`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import timm
import torch
from torch import nn

HEAD_PREFIXES = ("fc", "classifier", "head", "last_linear", "_fc")
"""First key components of classifier heads, which an encoder has no use for."""

_WRAPPER_PREFIXES = ("module.", "_orig_mod.")  # DDP / DataParallel, torch.compile
_RGB = 3


@dataclass(frozen=True)
class _Layout:
    name: str
    to_model: Callable[[str], str]


_WHOLE = _Layout("whole model", lambda key: key)
_LAYOUTS = (
    _WHOLE,
    _Layout("encoder only, torchvision/timm/smp-encoder keys", lambda key: f"encoder.{key}"),
    _Layout("encoder only, timm keys of an smp tu- encoder", lambda key: f"encoder.model.{key}"),
)


class KeyMismatchError(ValueError):
    """The state dict does not fit the model; the message names the first mismatched key."""


@dataclass(frozen=True)
class FittedState:
    """A state dict renamed, filtered and adapted to fit the model.

    Attributes:
        state: Tensors under the model's own keys, ready for ``load_state_dict``.
        layout: The key layout found in the file.
        encoder_only: Whether the file held only an encoder (decoder and head keep their init).
        stripped_prefix: A wrapper prefix removed from every key (``module.`` from DDP), or "".
        first_conv: The first convolution's key and old/new band counts, if it was adapted.
        dropped_head: Number of classifier-head tensors dropped.
        unused: Number of encoder tensors the model does not build (stages beyond its depth,
            the last convolution of a timm feature extractor).
    """

    state: dict[str, torch.Tensor]
    layout: str
    encoder_only: bool
    stripped_prefix: str
    first_conv: tuple[str, int, int] | None
    dropped_head: int
    unused: int


def fit_state_dict(state: dict[str, torch.Tensor], model: nn.Module, encoder: str) -> FittedState:
    """Maps a state dict's keys onto the model's, drops heads and adapts an RGB first conv.

    Args:
        state: The file's tensors by key.
        model: The freshly built smp U-Net.
        encoder: The model's smp encoder name (``resnet18``, ``tu-convnext_atto``, ...).

    Returns:
        The fitted state.

    Raises:
        KeyMismatchError: If the state dict does not fit the model; the message names the
            first missing key, unexpected key, or shape mismatch (with both shapes).
    """
    state, stripped = strip_wrapper(state)
    target = {key: value.shape for key, value in model.state_dict().items()}
    index = _canonical_index(target)
    layout, mapped, unmatched = max(
        (_apply(layout, state, target, index) for layout in _LAYOUTS),
        key=lambda result: len(result[1]),
    )
    if not mapped:
        first_model = next(k for k in target if k.startswith("encoder."))
        raise KeyMismatchError(
            f"no key matches the model's (the file's first key is {next(iter(state), None)!r}, "
            f"the model's encoder starts with {first_model!r}); is it weights for "
            f"another architecture than {encoder}?"
        )
    encoder_only = all(key.startswith("encoder.") for key in mapped)
    dropped_head, unused = _check_unmatched(unmatched, layout, encoder, index)
    required = [k for k in target if k.startswith("encoder.") or not encoder_only]
    first_conv = _first_conv(model)
    adapted = None
    for key in required:
        if key not in mapped:
            if key.endswith("num_batches_tracked"):
                continue  # old files lack it; BatchNorm starts the count at 0
            raise KeyMismatchError(f"missing key {key!r}")
        have, want = tuple(mapped[key].shape), tuple(target[key])
        if have == want:
            continue
        if key == first_conv and _adaptable(have, want):
            mapped[key] = adapt_first_conv(mapped[key], want[1])
            adapted = (key, have[1], want[1])
            continue
        raise KeyMismatchError(f"shape mismatch at {key!r}: file {have}, model {want}")
    return FittedState(
        state=mapped,
        layout="encoder only, smp keys with 'encoder.'"
        if encoder_only and layout is _WHOLE
        else layout.name,
        encoder_only=encoder_only,
        stripped_prefix=stripped,
        first_conv=adapted,
        dropped_head=dropped_head,
        unused=unused,
    )


def adapt_first_conv(weight: torch.Tensor, in_channels: int) -> torch.Tensor:
    """Extends an RGB first-convolution kernel to ``in_channels`` bands exactly as smp does.

    smp's ``patch_first_conv`` sums the RGB kernels for one band; otherwise band ``i`` takes
    the kernel of RGB band ``i % 3`` (so NIR starts from red) and the whole kernel is scaled
    by ``3 / in_channels``.

    Args:
        weight: The ``(out, 3, kh, kw)`` kernel.
        in_channels: The model's band count.

    Returns:
        The ``(out, in_channels, kh, kw)`` kernel.
    """
    weight = weight.detach()
    if in_channels == 1:
        return weight.sum(1, keepdim=True)
    rgb = weight.shape[1]
    return weight[:, torch.arange(in_channels) % rgb] * (rgb / in_channels)


def strip_wrapper(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], str]:
    """A state dict without the prefix every key of a wrapped model has (DDP, torch.compile).

    Args:
        state: The tensors by key.

    Returns:
        The tensors by their bare keys, and the prefixes removed ("" for none).
    """
    stripped = ""
    for prefix in _WRAPPER_PREFIXES:
        if state and all(key.startswith(prefix) for key in state):
            state = {key[len(prefix) :]: value for key, value in state.items()}
            stripped += prefix
    return state, stripped


def _canonical(key: str) -> str:
    # timm's feature extractors flatten nested Sequentials: "stages.1" becomes "stages_1"
    return re.sub(r"_(\d+)(?=\.|$)", r".\1", key)


def _canonical_index(target: dict[str, torch.Size]) -> dict[str, str]:
    index: dict[str, str] = {}
    for key in target:
        index.setdefault(_canonical(key), key)
    return index


def _apply(
    layout: _Layout,
    state: dict[str, torch.Tensor],
    target: dict[str, torch.Size],
    index: dict[str, str],
) -> tuple[_Layout, dict[str, torch.Tensor], list[str]]:
    mapped: dict[str, torch.Tensor] = {}
    unmatched: list[str] = []
    for key, value in state.items():
        name = layout.to_model(key)
        model_key = name if name in target else index.get(_canonical(name))
        if model_key is None or model_key in mapped:
            unmatched.append(key)
        else:
            mapped[model_key] = value
    return layout, mapped, unmatched


def _check_unmatched(
    unmatched: list[str], layout: _Layout, encoder: str, index: dict[str, str]
) -> tuple[int, int]:
    reference = _full_timm_keys(encoder)
    dropped = unused = 0
    for key in unmatched:
        bare = key.removeprefix("encoder.").removeprefix("model.")
        if bare.split(".")[0] in HEAD_PREFIXES:
            dropped += 1
        elif _canonical(layout.to_model(key)) in reference:
            unused += 1
        else:
            raise KeyMismatchError(f"unexpected key {key!r} (file layout: {layout.name})")
    return dropped, unused


def _full_timm_keys(encoder: str) -> set[str]:
    """Canonical keys of the whole timm network behind a ``tu-`` encoder, as smp names them.

    smp's timm feature extractors stop at the last stage they use, so a complete timm state
    dict has keys the encoder lacks that are no mismatch. smp's own encoders keep every stage.
    """
    if not encoder.startswith("tu-"):
        return set()
    with torch.device("meta"):
        network = timm.create_model(encoder[3:], pretrained=False)
    return {_canonical(f"encoder.model.{key}") for key in network.state_dict()}


def _first_conv(model: nn.Module) -> str | None:
    for name, module in model.encoder.named_modules():
        if isinstance(module, nn.Conv2d):
            return f"encoder.{name}.weight"
    return None


def _adaptable(have: tuple[int, ...], want: tuple[int, ...]) -> bool:
    return (
        len(have) == len(want) == 4
        and have[1] == _RGB
        and want[1] != _RGB
        and have[0] == want[0]
        and have[2:] == want[2:]
    )
