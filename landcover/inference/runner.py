"""The model runner predict calls: a checkpoint's torch model, or an exported ONNX model.

``landcover predict --model model.onnx`` (and ``evaluate --model``) run the same region job,
windows, blending and outputs as with a checkpoint; only the forward pass differs. It is
:class:`OnnxRunner`: a module whose forward hands the normalised batch to ONNX Runtime (the
CPU provider, or CUDA's where the installed onnxruntime has it) and gives back its logits, so
:class:`~landcover.inference.sliding.SlidingWindowPredictor` and the
:class:`~landcover.inference.predict.TileMapper` call it as they call a torch model. The rest
(bands, normalisation, classes, patch and pixel size) comes from the model's ``model.json``
(:mod:`landcover.inference.exported`). On this path torch runs only the normalisation and
the blending, as it does with a checkpoint; smp builds nothing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from landcover.checkpoint import load_checkpoint
from landcover.config import Config, config_from_dict
from landcover.data.normalize import BandNormalizer
from landcover.errors import CheckpointError, ConfigError, first_line
from landcover.inference.exported import METADATA_NAME, is_exported_model, read_metadata
from landcover.inference.loader import InferenceModel, checkpoint_pixel_size, load_inference_model

CPU_PROVIDER = "CPUExecutionProvider"
CUDA_PROVIDER = "CUDAExecutionProvider"


class OnnxRunner(nn.Module):
    """An ONNX model run by ONNX Runtime, called as a torch module.

    Its one buffer, ``onnx_sha256``, is the model file's sha256 (a state dict that differs
    from file to file); the maps name the weights the file was exported from
    (:attr:`~landcover.inference.loader.InferenceModel.exported_from`).

    Args:
        session: The ONNX Runtime session.
        input_name: The model's input.
        digest: sha256 of the model file.
    """

    def __init__(self, session: Any, input_name: str, digest: bytes) -> None:
        super().__init__()
        self.session = session
        self.input_name = input_name
        self.register_buffer("onnx_sha256", torch.frombuffer(bytearray(digest), dtype=torch.uint8))

    @property
    def providers(self) -> list[str]:
        """The execution providers the session runs on, preferred first."""
        return list(self.session.get_providers())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch.

        Args:
            x: ``(B, C, H, W)`` normalised input (any memory layout) on the CPU.

        Returns:
            ``(B, K, H, W)`` float32 logits on the CPU.
        """
        array = x.detach().float().contiguous().numpy()
        (logits,) = self.session.run(None, {self.input_name: array})
        return torch.from_numpy(logits)


def onnx_providers(device: str) -> list[str]:
    """The ONNX Runtime providers for ``--device``.

    Args:
        device: ``auto`` (CUDA's where onnxruntime has it, else the CPU), ``cpu`` or ``cuda``.

    Returns:
        Providers, preferred first.

    Raises:
        ConfigError: ``cuda`` asked of an onnxruntime without the CUDA provider.
    """
    import onnxruntime

    available = onnxruntime.get_available_providers()
    if device == "cpu":
        return [CPU_PROVIDER]
    if CUDA_PROVIDER in available:
        return [CUDA_PROVIDER, CPU_PROVIDER]
    if device == "cuda":
        raise ConfigError(
            "--device cuda: the installed onnxruntime has no CUDA provider "
            f"(it has {', '.join(available)}); install onnxruntime-gpu, or use --device cpu"
        )
    return [CPU_PROVIDER]


def load_onnx_model(path: str | Path, device: str = "auto") -> InferenceModel:
    """Loads an exported ONNX model and its metadata for predict and evaluate.

    Args:
        path: The ``.onnx`` file, ``model.json`` beside it.
        device: ``auto``, ``cpu`` or ``cuda`` (the provider; torch's part stays on the CPU).

    Returns:
        The model, as a checkpoint's would be loaded.

    Raises:
        CheckpointError: If the model or its metadata is missing, or ONNX Runtime cannot
            load it.
        ConfigError: If the CUDA provider is asked for and missing.
    """
    try:
        import onnxruntime
    except ImportError:
        raise ConfigError(
            f"{path}: running an ONNX model needs onnxruntime: pip install 'landcover[onnx]'"
        ) from None
    meta = read_metadata(path)
    config = meta.resolved_config(str(path))
    providers = onnx_providers(device)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()  # the worker's share of the cores
    # its threads sleep between runs, as OpenMP's do here (landcover.threads): spinning, they
    # would take the cores from the reader, the writer and the blending between forwards
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data)
    if meta.model_sha256 is not None and digest.hexdigest() != meta.model_sha256:
        raise CheckpointError(  # replaced since read_metadata checked it
            f"{path}: changed while it was loaded: not the model {METADATA_NAME} describes"
        )
    try:
        session = onnxruntime.InferenceSession(data, options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own types for a bad file
        raise CheckpointError(f"{path}: ONNX Runtime cannot load it ({first_line(exc)})") from None
    runner = OnnxRunner(session, meta.input_name, digest.digest()).eval()
    cpu = torch.device("cpu")
    return InferenceModel(
        model=runner,
        config=config,
        device=cpu,
        prepare=BandNormalizer(meta.normalization.mean, meta.normalization.std, cpu),
        autocast_dtype=None,
        checkpoint=str(path),
        epoch=meta.epoch,
        pixel_size_m=meta.pixel_size_m,
        exported_from=meta.weights_sha256,
    )


def load_model(path: str | Path, device: str = "auto", local_rank: int = 0) -> InferenceModel:
    """Loads a checkpoint (``.pt``) or an exported ONNX model (``.onnx``) for inference.

    Args:
        path: The checkpoint or model.
        device: ``auto``, ``cpu`` or ``cuda``.
        local_rank: Selects the GPU of a checkpoint's model (see
            :func:`~landcover.inference.loader.load_inference_model`).

    Returns:
        The loaded model.

    Raises:
        CheckpointError: If it cannot be loaded.
        ConfigError: If the device cannot be had.
    """
    if is_exported_model(path):
        return load_onnx_model(path, device)
    return load_inference_model(path, device, local_rank)


@dataclass(frozen=True)
class ModelSettings:
    """What a job checks its tiles against before loading the model.

    Attributes:
        config: The training run's configuration.
        pixel_size_m: The training pixel size (``None``: unknown).
    """

    config: Config
    pixel_size_m: float | None


def model_settings(path: str | Path) -> ModelSettings:
    """A checkpoint's or exported model's settings, without building the model.

    Args:
        path: The checkpoint or ``.onnx`` model.

    Returns:
        The settings.

    Raises:
        CheckpointError: If it cannot be read.
    """
    if is_exported_model(path):
        meta = read_metadata(path)
        return ModelSettings(meta.resolved_config(str(path)), meta.pixel_size_m)
    state = load_checkpoint(path)
    config = config_from_dict(state.config, source=f"{path}: config")
    return ModelSettings(config, checkpoint_pixel_size(state.pixel_size_m))
