"""``model``: the architecture, encoder and decoder (segmentation-models-pytorch)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from landcover.archregistry import ARCHITECTURES, arch_key, registered_architectures
from landcover.config.base import Section

LIST_DECODER_ARCHITECTURES = ("unet", "unetplusplus", "manet")
"""Architectures whose decoder takes one width per encoder stage (``model.decoder_channels``)."""


OWNED_OPTIONS = {
    "activation": "the model gives logits (predict, evaluate and export apply the softmax)",
    "aux_params": "the model gives one output, its logits (no auxiliary classification head)",
    "encoder_name": "set model.encoder",
    "encoder_weights": "set model.weights (a local file, or imagenet)",
    "encoder_depth": "set model.encoder_depth",
    "in_channels": "the bands come from data.bands",
    "classes": "the classes come from data.classes",
}
"""smp's keyword arguments that ``arch_options`` may not set, and what sets them instead."""


class ModelConfig(Section):
    """The segmentation model: a segmentation-models-pytorch architecture and encoder.

    Attributes:
        arch: Architecture, any of smp's (case-insensitive): ``unet`` (default),
            ``unetplusplus``, ``fpn``, ``pspnet``, ``deeplabv3``, ``deeplabv3plus``,
            ``linknet``, ``manet``, ``pan``, ``upernet``, ``segformer``, ``dpt`` (DPT needs a
            ViT encoder, e.g. ``tu-vit_tiny_patch16_224``).
        encoder: smp encoder name (``resnet18``, ``resnet34``, ``efficientnet-b0``, ...) or a
            timm encoder through smp's ``tu-`` prefix (``tu-convnext_tiny``).
        encoder_depth: Number of encoder stages (3..5).
        decoder_channels: Decoder widths, one per encoder stage (U-Net, U-Net++ and MAnet;
            the other architectures keep smp's defaults, changed through ``arch_options``).
        arch_options: Further keyword arguments for the smp architecture, e.g.
            ``{decoder_attention_type: scse}`` for a U-Net or ``{encoder_output_stride: 8}``
            for DeepLabV3+.
        weights: Optional initial weights: a local file or ``imagenet``. A file (``.pt``,
            ``.pth``, ``.bin`` loaded with ``weights_only=True``, or ``.safetensors``) may hold a
            landcover checkpoint, a whole-model state dict (bare, in ``{"state_dict": ...}`` or
            ``{"model": ...}``, or with DDP's ``module.`` prefix), or an encoder-only state dict
            in torchvision's, timm's or smp's key layout: its classifier head is dropped, an RGB
            first convolution is extended to the band count as smp does (band i from RGB band
            i % 3, scaled by 3/bands; one band: the sum), and the decoder keeps its random
            init. ``imagenet`` downloads smp's pretrained encoder; without internet training
            stops at once with an error saying how to use a local file instead.
    """

    arch: str = "unet"
    encoder: str = "resnet34"
    encoder_depth: int = Field(5, ge=3, le=5)
    decoder_channels: list[int] = Field(default_factory=lambda: [256, 128, 64, 32, 16])
    arch_options: dict[str, Any] = Field(default_factory=dict)
    weights: str | None = None

    @field_validator("arch", mode="before")
    @classmethod
    def _known_arch(cls, value: Any, info: ValidationInfo) -> str:
        name = arch_key(value)
        if info.context and info.context.get("any_arch"):  # an exported model's: not built
            return name
        if name not in ARCHITECTURES and name not in registered_architectures():
            known = [*ARCHITECTURES, *registered_architectures()]
            raise ValueError(f"unknown architecture {value!r}; choose one of {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _options_landcover_leaves(self) -> ModelConfig:
        """Refuses smp keywords landcover sets itself (a registered architecture reads its own)."""
        if self.arch not in ARCHITECTURES:
            return self
        owned = sorted(
            k for k, v in self.arch_options.items() if k in OWNED_OPTIONS and v is not None
        )
        if owned:
            name = owned[0]
            raise ValueError(f"arch_options.{name} is not an option here: {OWNED_OPTIONS[name]}")
        return self

    @property
    def uses_decoder_channels(self) -> bool:
        """Whether the architecture takes ``decoder_channels`` (one width per stage)."""
        return self.arch in LIST_DECODER_ARCHITECTURES

    @model_validator(mode="after")
    def _decoder_matches_depth(self) -> ModelConfig:
        if self.uses_decoder_channels and len(self.decoder_channels) != self.encoder_depth:
            raise ValueError(
                f"decoder_channels needs {self.encoder_depth} values (encoder_depth), "
                f"got {len(self.decoder_channels)}"
            )
        return self
