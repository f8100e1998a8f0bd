"""smp's ImageNet-pretrained encoders (``model.weights: imagenet``), failing fast when offline.

smp 0.6 fetches its own encoders from the Hugging Face hub; ``tu-`` encoders come through timm,
from the hub or, for a few models, from a URL (torch.hub). Offline, the hub client retries for
about 40 s and a URL fetch has no timeout at all, so before fetching anything not already
cached this module checks in a few seconds that the server (or the configured proxy) answers,
and otherwise fails at once with one line that says how to use a local file instead.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import segmentation_models_pytorch as smp
import timm
import torch
from huggingface_hub import constants as hf_constants
from huggingface_hub import try_to_load_from_cache

from landcover.config import ModelConfig
from landcover.errors import CheckpointError, ConfigError

IMAGENET = "imagenet"
"""The ``model.weights`` value that asks for smp's pretrained encoder."""

PROBE_TIMEOUT_S = 5.0
"""How long the reachability check waits for a TCP connection."""


@dataclass(frozen=True)
class _Source:
    url: str  # where the weights come from
    cached: bool  # whether they are on this machine already
    hub: bool  # Hugging Face hub (honours HF_HUB_OFFLINE) rather than a plain URL


def fetch_pretrained_encoder(
    config: ModelConfig, in_channels: int
) -> tuple[dict[str, torch.Tensor], str]:
    """Builds smp's pretrained encoder for the model and returns its weights.

    smp adapts the RGB first convolution to ``in_channels`` bands itself.

    Args:
        config: The model configuration.
        in_channels: The model's band count.

    Returns:
        The encoder's state dict (smp's keys, without the ``encoder.`` prefix) and the URL
        it came from.

    Raises:
        ConfigError: If smp (or timm) has no pretrained weights for the encoder.
        CheckpointError: If the weights are not cached and cannot be downloaded.
    """
    name = config.encoder
    source = _source(name)
    if not source.cached and not (source.hub and hf_constants.HF_HUB_OFFLINE):
        problem = _unreachable(source.url)
        if problem:
            raise CheckpointError(_cannot_download(name, source.url, problem))
    tu = name.startswith("tu-")
    try:
        encoder = smp.encoders.get_encoder(
            name,
            in_channels=in_channels,
            depth=config.encoder_depth,
            weights=True if tu else IMAGENET,
        )
    except Exception as exc:  # hub, HTTP and file errors come in many types
        if source.hub and hf_constants.HF_HUB_OFFLINE:
            reason = "not in the local Hugging Face cache and HF_HUB_OFFLINE is set"
        else:
            reason = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0][:160]
        raise CheckpointError(_cannot_download(name, source.url, reason)) from None
    return encoder.state_dict(), source.url


def _source(name: str) -> _Source:
    if name.startswith("tu-"):
        cfg = timm.models.get_pretrained_cfg(name[3:])
        if cfg is None or not (cfg.hf_hub_id or cfg.url):
            raise ConfigError(f"model.weights imagenet: timm has no pretrained {name[3:]}")
        if cfg.hf_hub_id:
            repo, _, revision = cfg.hf_hub_id.partition("@")
            return _hub_source(repo, revision or None, ("model.safetensors", "pytorch_model.bin"))
        cached = os.path.join(
            torch.hub.get_dir(), "checkpoints", os.path.basename(urlsplit(cfg.url).path)
        )
        return _Source(url=cfg.url, cached=os.path.isfile(cached), hub=False)
    settings = smp.encoders.encoders.get(name, {}).get("pretrained_settings", {})
    if IMAGENET not in settings:
        raise ConfigError(
            f"model.weights imagenet: smp has no ImageNet weights for encoder {name} "
            f"(it has: {', '.join(settings) or 'none'}); use a local weights file"
        )
    return _hub_source(
        settings[IMAGENET]["repo_id"], settings[IMAGENET]["revision"], ("model.safetensors",)
    )


def _hub_source(repo: str, revision: str | None, files: tuple[str, ...]) -> _Source:
    cached = any(
        isinstance(try_to_load_from_cache(repo, name, revision=revision), str) for name in files
    )
    return _Source(url=f"{hf_constants.ENDPOINT}/{repo}", cached=cached, hub=True)


def _unreachable(url: str) -> str | None:
    """Checks that a TCP connection to the URL's server (or its proxy) opens in a few seconds.

    Args:
        url: The download URL.

    Returns:
        None if it opens, else what went wrong.
    """
    parts = urlsplit(url)
    proxy = None if proxy_bypass(parts.hostname or "") else getproxies().get(parts.scheme)
    server = urlsplit(proxy) if proxy else parts
    host = server.hostname or ""
    port = server.port or (443 if server.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"cannot connect to {host}:{port}: {exc.strerror or exc}"


def _cannot_download(name: str, url: str, reason: str) -> str:
    if name.startswith("tu-"):
        save = f"timm.create_model('{name[3:]}', pretrained=True).state_dict()"
    else:
        save = f"smp.encoders.get_encoder('{name}', weights='imagenet').state_dict()"
    return (
        f"model.weights imagenet: the pretrained {name} encoder could not be downloaded from "
        f"{url}: {reason}; use a local file instead: on a machine with internet run "
        f"torch.save({save}, '{name}.pth') (or save torchvision's or timm's weights), "
        f"copy the file here and set model.weights: /path/{name}.pth"
    )
