"""The model factory: any segmentation-models-pytorch architecture, built from the config.

Encoders are always built without pretrained weights (nothing is downloaded here); initial
weights (``model.weights``) are loaded by :mod:`landcover.models.weights`.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from typing import Any

import segmentation_models_pytorch as smp
import torch
from torch import nn

from landcover.archregistry import Builder, registered_builder
from landcover.config import ARCHITECTURES, ModelConfig
from landcover.config.model import OWNED_OPTIONS
from landcover.errors import ConfigError, first_line
from landcover.models.pretrained import IMAGENET

log = logging.getLogger("landcover")


def build_model(
    config: ModelConfig,
    in_channels: int,
    num_classes: int,
    patch_size: int = 64,
    strict: bool = True,
) -> nn.Module:
    """Builds the segmentation model through ``smp.create_model``.

    Args:
        config: The model configuration (architecture, encoder, decoder, options).
        in_channels: Number of input bands.
        num_classes: Number of output classes.
        patch_size: The training patch size: the model is checked on an input this large
            (some architectures, e.g. PAN, need more than 64 px; DPT's ViT a fixed size).
        strict: Refuse an ``arch_options`` name the architecture does not take (training);
            else warn (a checkpoint trained before the check: the name did nothing then).

    Returns:
        The smp model producing ``(B, num_classes, H, W)`` logits for ``(B, bands, H, W)``
        input; parameters its forward pass never uses (deep encoder stages with
        ``encoder_depth < 5``) are frozen.

    Raises:
        ConfigError: An encoder, option or combination smp refuses, or a model whose output
            is not the size of its input.
    """
    custom = registered_builder(config.arch)
    if custom is not None:
        return _build_registered(custom, config, in_channels, num_classes, patch_size)
    name = ARCHITECTURES[config.arch]
    parameters = inspect.signature(getattr(smp, name).__init__).parameters
    kwargs: dict[str, Any] = {}
    if "encoder_depth" in parameters:
        kwargs["encoder_depth"] = config.encoder_depth
    if config.uses_decoder_channels:
        kwargs["decoder_channels"] = tuple(config.decoder_channels)
    where = f"model.arch {config.arch!r} with model.encoder {config.encoder!r}"
    _check_options(config, getattr(smp, name), where, strict)
    kwargs.update(config.arch_options)
    model = _create(name, config.encoder, in_channels, num_classes, kwargs, where)
    if "upsampling" in parameters and "upsampling" not in kwargs:
        # smp's head upsampling defaults assume one encoder depth (PSPNet 3, FPN 5): set it
        # from what the model gives, so its logits come out at the input's size
        side = _output_side(model, in_channels, patch_size, where)
        if side != patch_size:
            kwargs["upsampling"] = parameters["upsampling"].default * patch_size / side
            model = _create(name, config.encoder, in_channels, num_classes, kwargs, where)
    freeze_unused_parameters(model, in_channels, where, patch_size)
    return model


def _build_registered(
    build: Builder, config: ModelConfig, in_channels: int, num_classes: int, patch_size: int
) -> nn.Module:
    """A registered architecture's model (:mod:`landcover.archregistry`), checked as smp's are.

    Raises:
        ConfigError: If the builder fails, returns no module, or its logits are not the
            input's size (one line naming the architecture).
    """
    where = f"model.arch {config.arch!r} (registered)"
    if config.weights == IMAGENET:
        raise ConfigError(f"{where}: model.weights imagenet is smp's encoders'; use a file")
    try:
        model = build(config, in_channels, num_classes)
    except Exception as exc:  # a plugin's builder may raise anything
        raise ConfigError(f"{where}: its builder failed: {first_line(exc, typed=True)}") from None
    if not isinstance(model, nn.Module):
        raise ConfigError(f"{where}: its builder gave {type(model).__name__}, not a torch module")
    freeze_unused_parameters(model, in_channels, where, patch_size)
    return model


def _check_options(config: ModelConfig, cls: type, where: str, strict: bool) -> None:
    """Refuses (or warns of) an ``arch_options`` name the architecture does not take.

    smp hands the names it does not know to the encoder: a timm (``tu-``) encoder takes
    them, smp's own encoders drop them unsaid (a misspelt option trained the plain model).
    The architecture takes its ``__init__``'s parameters and the older names it still reads
    from its keyword arguments (``decoder_use_batchnorm``, read from its source).

    Raises:
        ConfigError: Naming the option, and the closest one the architecture takes.
    """
    if config.encoder.startswith("tu-"):
        return
    parameters = inspect.signature(cls.__init__).parameters
    taken = [n for n, p in parameters.items() if n != "self" and p.kind is p.POSITIONAL_OR_KEYWORD]
    known = [n for n in taken if n not in OWNED_OPTIONS]  # those to suggest
    try:
        older = re.findall(r"kwargs\.pop\(\s*[\"'](\w+)[\"']", inspect.getsource(cls.__init__))
    except (OSError, TypeError):  # no source (a frozen install): take any name
        return
    for name in config.arch_options:
        if name not in taken and name not in older:
            close = difflib.get_close_matches(name, known, 1)
            hint = f"did you mean {close[0]}?" if close else f"it takes {', '.join(known)}"
            message = f"model.arch_options.{name}: {where} has no such option; {hint}"
            if strict:
                raise ConfigError(message)
            log.warning("%s (ignored, as when the model was trained)", message)


def _create(
    name: str, encoder: str, in_channels: int, num_classes: int, kwargs: dict[str, Any], where: str
) -> nn.Module:
    """``smp.create_model`` without pretrained weights; refusals become one-line errors."""
    try:
        return smp.create_model(
            name,
            encoder_name=encoder,
            encoder_weights=None,
            in_channels=in_channels,
            classes=num_classes,
            **kwargs,
        )
    except (KeyError, ValueError, TypeError, AssertionError, RuntimeError) as exc:
        raise ConfigError(f"{where}: {first_line(exc)}") from None


def _output_side(model: nn.Module, in_channels: int, size: int, where: str) -> int:
    """The side of the logits the model gives for a square input of ``size`` px."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            return int(model(torch.zeros(1, in_channels, size, size)).shape[-1])
    except (RuntimeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"{where} cannot run on a {size} px input: {first_line(exc)}") from None
    finally:
        model.train(was_training)


UNITS_PER_CLASS = 2
"""Units the last decoder stage should have per class (smp's default 16 gives 2 for 8 classes)."""


def final_stage_warning(config: ModelConfig, num_classes: int) -> str | None:
    """Says when the last decoder stage is too narrow for the number of classes.

    The last U-Net decoder stage is a full-resolution conv + batch-norm + ReLU block whose
    units are all the segmentation head sees. When every unit is inactive at the pixels of a
    class (ReLU outputs 0), no gradient from those pixels reaches the network any more, so the
    class is never learned; with about one unit per class (8 channels for 6 classes) a large
    early update switches a rare class's only unit off for good. This is how the CPU config
    once stopped learning water. Two or more units per class make it unlikely.

    Args:
        config: The model configuration.
        num_classes: Number of output classes.

    Returns:
        A warning to log, or ``None`` when the stage is wide enough.
    """
    if not config.uses_decoder_channels:
        return None
    last = config.decoder_channels[-1]
    if last >= UNITS_PER_CLASS * num_classes:
        return None
    return (
        f"model.decoder_channels ends with {last} channels for {num_classes} classes: a final "
        f"decoder stage this narrow can switch a class's units off for good (dead ReLUs) and "
        f"that class is never learned; use at least {UNITS_PER_CLASS * num_classes}"
    )


def freeze_unused_parameters(
    model: nn.Module, in_channels: int, where: str = "the model", size: int = 64
) -> list[str]:
    """Stops gradients for parameters the forward pass never uses.

    With ``encoder_depth < 5`` smp keeps the deeper encoder stages but skips them. DDP waits
    for a gradient of every parameter that requires one, so such parameters would stall its
    all-reduce; freezing them keeps DDP exact without ``find_unused_parameters`` overhead.

    The same probe forward pass checks that the logits come out at the input's size.

    Args:
        model: The model (on the CPU, freshly built).
        in_channels: Number of input bands.
        where: The model's description, for messages.
        size: Side of the square probe input (the training patch size).

    Returns:
        Names of the parameters frozen.

    Raises:
        ConfigError: The model fails on, or does not keep the size of, a probe input.
    """
    was_training = model.training
    model.eval()
    try:
        logits = model(torch.zeros(1, in_channels, size, size))
    except (RuntimeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"{where} cannot run on a {size} px input: {first_line(exc)}") from None
    if tuple(logits.shape[-2:]) != (size, size):
        raise ConfigError(
            f"{where} gives {tuple(logits.shape[-2:])} px logits for a {size} px input; "
            "set model.arch_options (e.g. upsampling) so the output matches the input"
        )
    logits.sum().backward()
    unused = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    for name, param in model.named_parameters():
        if name in unused:
            param.requires_grad_(False)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return unused
