"""Run configuration: pydantic models, YAML loading and command-line overrides.

A configuration has four sections: ``data``, ``model``, ``optim`` and ``run``. YAML files in
``configs/`` set any subset of it (a file may ``include:`` others, merged under its own keys);
command-line flags and ``--set section.key=value`` override them; ``auto`` values are measured
when training starts; the resolved configuration is saved as ``config.yaml`` in the run folder
and inside every checkpoint.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from landcover.classes import ClassMapping, resolve_mapping
from landcover.errors import ConfigError
from landcover.registry import DEFAULT_ENGINE, check_engine_name

LrScaling = Literal["linear", "sqrt", "none"]
"""How the peak learning rate follows the global batch (``optim.lr_scaling``)."""

AUTO = "auto"
"""Value of a setting measured from the training data when training starts."""


SectionT = TypeVar("SectionT", bound="_Section")


class _Section(BaseModel):
    """A configuration model: unknown keys refused.

    A loaded configuration is not changed afterwards: values settled when training starts
    (measured statistics, the worker count) make a new configuration (:meth:`replace`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    def replace(self: SectionT, **changes: Any) -> SectionT:
        """A copy with some keys changed, validated like a loaded one; this one is unchanged.

        Args:
            **changes: Keys of this model and their new values (models or plain data).

        Returns:
            The new model.

        Raises:
            ValidationError: If a new value, or the model with it, is invalid.
        """
        return type(self).model_validate({**dict(self), **changes})


def _no_credentials_in_url(value: str | None) -> str | None:
    """Refuses a data or output URL that carries a shared access signature."""
    from landcover.storage.errors import StorageError
    from landcover.storage.urls import check_no_credentials

    if value is not None:
        try:
            check_no_credentials(value)
        except StorageError as exc:
            raise ValueError(str(exc)) from None
    return value


def _numbers_or_auto(value: Any, what: str) -> Any:
    """Rejects anything but a list or ``auto`` up front, with a message users can act on."""
    if isinstance(value, str) and value != AUTO:
        raise ValueError(f"must be a list of numbers ({what}) or auto, not {value!r}")
    return value


class DataConfig(_Section):
    """Where the tile pairs are and how they become training samples.

    Attributes:
        root: Folder (or URL) holding ``{name}{image_suffix}`` / ``{name}{label_suffix}`` pairs.
            ``None`` uses the built-in synthetic sample dataset.
        manifest: Optional CSV with columns ``image,label`` and an optional ``split`` column
            (``train``/``val``/``test``; test rows are not trained on); paths relative to the
            manifest's folder. Overrides ``root``.
        image_suffix: File-name suffix of the imagery.
        label_suffix: File-name suffix of the labels.
        val_root: Optional separate folder of validation pairs.
        val_tiles: Names of tiles held out for validation.
        val_fraction: Fraction of tiles (the last ones by name) held out when neither
            ``val_root`` nor ``val_tiles`` nor a manifest split is given.
        classes: A preset name (``chesapeake7``, ``cvpr4``, ``tutorial5``) or an explicit mapping.
        bands: Names of the image bands, in file order; their count is the model's input channels.
        mean: Per-band mean on the 0..1 scale, subtracted before the model; ``auto`` measures it
            on the training tiles when training starts (the resolved run config and every
            checkpoint then hold the numbers, so predict and evaluate use them).
        std: Per-band standard deviation on the 0..1 scale; ``auto`` as for ``mean``.
        class_frequencies: Optional pixel frequency of each class (by class name) in the
            training data, as ``landcover data stats`` writes it; ``optim.loss.class_weights:
            auto`` derives its weights from it when given (else it measures them). A run that
            measures frequencies records them here.
        patch_size: Side of the square training patches in pixels.
        max_nodata_fraction: Training patches with more ignored pixels than this are redrawn.
        oversample_rare: Probability that a patch is centred on a pixel of a rare class, the
            class drawn with probability inversely proportional to its pixel count (applies to
            the patches ``class_balance`` leaves random).
        class_balance: Fraction of every batch's patches centred on a pixel of a class, the
            classes present in the worker's share taking equal turns: each of the ``K``
            present classes is at the centre of about ``class_balance / K`` of every batch's
            patches, however rare it is; 0 turns it off.
        augment: Random flips and 90-degree rotations.
        fetch_concurrency: Files each worker fetches (and decodes) at once when loading.
        cache_dir: Optional local folder caching remote (blob) files, so a second run reads
            them from local disk.
        resolution: Pixel size in metres every tile is resampled to on load (imagery bilinear,
            labels nearest), for tiles of mixed pixel sizes (0.6 m and 1 m NAIP); ``None``
            keeps each tile's own. Checkpoints record the pixel size trained at.
        photometric: Probability that a training patch is perturbed photometrically (per-band
            gain and offset of tens of DN, gamma, sensor noise, blur; see
            :mod:`landcover.data.photometric`), against radiometric shift between flights;
            0 turns it off. Labels never change.
        photometric_strength: Scales the photometric ranges (1: gains 0.67..1.5, offsets up to
            30 DN, gamma 0.7..1.4, noise up to 5 DN).
        normalize: ``global`` standardises every tile by ``mean``/``std``; ``per_tile`` by the
            tile's own band mean and standard deviation over its valid pixels (training,
            validation, predict and evaluate alike; the checkpoint's config records it).
    """

    root: str | None = None
    manifest: str | None = None
    image_suffix: str = "_naip.tif"
    label_suffix: str = "_lc.tif"
    val_root: str | None = None
    val_tiles: list[str] = Field(default_factory=list)
    val_fraction: float = Field(0.2, ge=0.0, lt=1.0)
    classes: ClassMapping = Field(default_factory=lambda: resolve_mapping("chesapeake7"))
    bands: list[str] = Field(default_factory=lambda: ["red", "green", "blue", "nir"])
    mean: list[float] | Literal["auto"] = "auto"
    std: list[float] | Literal["auto"] = "auto"
    class_frequencies: dict[str, float] | None = None
    patch_size: int = Field(256, ge=32)
    max_nodata_fraction: float = Field(0.5, ge=0.0, le=1.0)
    oversample_rare: float = Field(0.0, ge=0.0, le=1.0)
    class_balance: float = Field(0.0, ge=0.0, le=1.0)
    augment: bool = True
    fetch_concurrency: int = Field(8, ge=1)
    cache_dir: str | None = None
    resolution: float | None = Field(None, gt=0)
    photometric: float = Field(0.0, ge=0.0, le=1.0)
    photometric_strength: float = Field(1.0, ge=0.0, le=2.0)
    normalize: Literal["global", "per_tile"] = "global"

    @field_validator("root", "manifest", "val_root", "cache_dir")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        return _no_credentials_in_url(value)

    @field_validator("mean", "std", mode="before")
    @classmethod
    def _band_values(cls, value: Any) -> Any:
        return _numbers_or_auto(value, "one per band")

    @field_validator("classes", mode="before")
    @classmethod
    def _resolve_classes(cls, value: Any) -> ClassMapping:
        return resolve_mapping(value)

    @field_validator("patch_size")
    @classmethod
    def _patch_multiple_of_32(cls, value: int) -> int:
        if value % 32:
            raise ValueError(f"patch_size {value} must be a multiple of 32 (the U-Net's stride)")
        return value

    @model_validator(mode="after")
    def _band_stats_match(self) -> DataConfig:
        n = len(self.bands)
        for key in ("mean", "std"):
            value = getattr(self, key)
            if value != AUTO and len(value) != n:
                raise ValueError(
                    f"{key} needs one value per band ({n} bands: {self.bands}) or auto"
                )
        if self.std != AUTO and any(s <= 0 for s in self.std):
            raise ValueError("std values must be positive")
        if self.class_frequencies is not None:
            unknown = sorted(set(self.class_frequencies) - set(self.classes.names))
            if unknown:
                raise ValueError(
                    f"class_frequencies names classes {unknown} that the class mapping "
                    f"{self.classes.name} does not have ({', '.join(self.classes.names)})"
                )
            if any(f < 0 for f in self.class_frequencies.values()):
                raise ValueError("class_frequencies must not be negative")
        return self

    @property
    def stats_auto(self) -> bool:
        """Whether ``mean`` or ``std`` is still to be measured (``auto``)."""
        return self.mean == AUTO or self.std == AUTO


ARCHITECTURES = {
    "unet": "Unet",
    "unetplusplus": "UnetPlusPlus",
    "fpn": "FPN",
    "pspnet": "PSPNet",
    "deeplabv3": "DeepLabV3",
    "deeplabv3plus": "DeepLabV3Plus",
    "linknet": "Linknet",
    "manet": "MAnet",
    "pan": "PAN",
    "upernet": "UPerNet",
    "segformer": "Segformer",
    "dpt": "DPT",
}
"""segmentation-models-pytorch architectures by lower-case name (``model.arch``)."""

LIST_DECODER_ARCHITECTURES = ("unet", "unetplusplus", "manet")
"""Architectures whose decoder takes one width per encoder stage (``model.decoder_channels``)."""


class ModelConfig(_Section):
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
    def _known_arch(cls, value: Any) -> str:
        name = str(value).lower().replace("_", "").replace("-", "")
        if name not in ARCHITECTURES:
            raise ValueError(
                f"unknown architecture {value!r}; choose one of {', '.join(ARCHITECTURES)}"
            )
        return name

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


LOSS_TERMS = ("ce_weight", "dice_weight", "focal_weight", "lovasz_weight", "tversky_weight")
"""The weights of ``optim.loss``'s terms."""


ClassWeightScheme = Literal["median_frequency", "inverse_sqrt"]
"""How ``optim.loss.class_weights: auto`` turns class frequencies into weights."""


class LossConfig(_Section):
    """The training loss: a weighted sum of terms that all ignore no-data pixels.

    The terms are cross-entropy and, from ``segmentation_models_pytorch.losses``, Dice, focal,
    Lovasz-softmax and Tversky (see :class:`landcover.training.losses.SegmentationLoss`); a
    weight of 0 leaves a term out.

    Attributes:
        ce_weight: Weight of the cross-entropy term.
        dice_weight: Weight of the multi-class Dice term (0 disables it).
        focal_weight: Weight of the focal term (smp's multi-class focal loss: one-vs-rest,
            averaged over the classes; 0 disables it).
        focal_gamma: Focusing exponent of the focal term (0 gives one-vs-rest BCE).
        lovasz_weight: Weight of the Lovasz-softmax term, a surrogate of the IoU of the
            classes present in the batch (0 disables it).
        tversky_weight: Weight of the Tversky term (0 disables it).
        tversky_alpha: Tversky's weight of false positives.
        tversky_beta: Tversky's weight of false negatives (``beta > alpha`` favours recall,
            what a rare class needs; ``alpha = beta = 0.5`` is Dice).
        class_weights: Optional per-class weights of the cross-entropy and focal terms, or
            ``auto``: derived from the training data's class frequencies by
            ``class_weight_scheme`` (see :func:`landcover.training.losses.frequency_weights`)
            and clipped to ``[1 / class_weight_cap, class_weight_cap]``, resolved to numbers
            when training starts.
        class_weight_scheme: ``median_frequency`` (``median(f) / f_c``, Eigen & Fergus 2015)
            or ``inverse_sqrt`` (``sqrt(median(f) / f_c)``, milder).
        class_weight_cap: Largest weight ``auto`` gives a class (the smallest is its inverse).
    """

    ce_weight: float = Field(1.0, ge=0.0)
    dice_weight: float = Field(0.0, ge=0.0)
    focal_weight: float = Field(0.0, ge=0.0)
    focal_gamma: float = Field(2.0, ge=0.0)
    lovasz_weight: float = Field(0.0, ge=0.0)
    tversky_weight: float = Field(0.0, ge=0.0)
    tversky_alpha: float = Field(0.3, ge=0.0)
    tversky_beta: float = Field(0.7, ge=0.0)
    class_weights: list[float] | Literal["auto"] | None = None
    class_weight_scheme: ClassWeightScheme = "median_frequency"
    class_weight_cap: float = Field(10.0, ge=1.0)

    @field_validator("class_weights", mode="before")
    @classmethod
    def _class_values(cls, value: Any) -> Any:
        return _numbers_or_auto(value, "one per class")

    @model_validator(mode="after")
    def _some_term(self) -> LossConfig:
        if not any(getattr(self, key) > 0 for key in LOSS_TERMS):
            raise ValueError(f"at least one of {', '.join(LOSS_TERMS)} must be positive")
        if self.tversky_alpha + self.tversky_beta <= 0:
            raise ValueError("tversky_alpha + tversky_beta must be positive")
        return self


class OptimConfig(_Section):
    """Optimisation and epoch settings.

    Attributes:
        optimizer: ``adamw``, ``adam`` or ``sgd``.
        lr: Learning rate at a global batch of ``ref_batch`` samples.
        ref_batch: Global batch size at which ``lr`` applies.
        lr_scaling: How the peak rate follows the global batch: ``linear``
            (``lr x global_batch / ref_batch``, Goyal et al. 2017, for SGD), ``sqrt``
            (``lr x sqrt(global_batch / ref_batch)``, Malladi et al. 2022, for Adam and
            AdamW) or ``none`` (``lr``). Unset (or ``auto``), it is resolved from
            ``optimizer``: ``sqrt`` for ``adam``/``adamw``, ``linear`` for ``sgd``; the saved
            config holds the resolved rule. The deprecated ``scale_lr: false`` (of configs
            and checkpoints from before this key) means ``none``; ``scale_lr: true`` means
            the rule that fits the optimizer.
        weight_decay: Weight decay.
        momentum: Momentum (SGD) or beta1 (Adam).
        warmup_epochs: Epochs of linear warm-up from ``lr`` to the peak rate.
        schedule: ``cosine`` (to ``min_lr_ratio``), ``step`` or ``constant`` after warm-up.
        min_lr_ratio: Final rate of the cosine schedule, relative to the peak.
        step_epochs: Epoch interval of the step schedule.
        gamma: Factor of the step schedule.
        batch_size: Samples per worker per step.
        samples_per_epoch: Global number of samples in one epoch, whatever the worker count.
        epochs: Total number of epochs (a resumed run trains up to this).
        grad_clip: Optional gradient-norm clip.
        accumulate: Micro-batches per optimizer step (gradient accumulation): one all-reduce
            per ``accumulate`` micro-batches; the global batch (which sets the peak learning
            rate) is ``batch_size x workers x accumulate``.
        ema_decay: Decay of an exponential moving average of the weights, updated after every
            optimizer step (0: off). The average is what validation scores and what
            checkpoints give predict and evaluate; the raw weights are kept for resuming.
        loss: The loss.
    """

    optimizer: Literal["adamw", "adam", "sgd"] = "adamw"
    lr: float = Field(1e-3, gt=0.0)
    ref_batch: int = Field(16, ge=1)
    lr_scaling: LrScaling = "sqrt"  # replaced by the optimizer's rule when unset or "auto"
    weight_decay: float = Field(1e-4, ge=0.0)
    momentum: float = Field(0.9, ge=0.0, lt=1.0)
    warmup_epochs: float = Field(1.0, ge=0.0)
    schedule: Literal["cosine", "step", "constant"] = "cosine"
    min_lr_ratio: float = Field(0.01, ge=0.0, le=1.0)
    step_epochs: int = Field(30, ge=1)
    gamma: float = Field(0.1, gt=0.0, le=1.0)
    batch_size: int = Field(16, ge=1)
    samples_per_epoch: int = Field(16384, ge=1)
    epochs: int = Field(50, ge=1)
    grad_clip: float | None = Field(None, gt=0.0)
    accumulate: int = Field(1, ge=1)
    ema_decay: float = Field(0.0, ge=0.0, lt=1.0)
    loss: LossConfig = Field(default_factory=LossConfig)

    @model_validator(mode="before")
    @classmethod
    def _resolve_lr_scaling(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        scale = data.pop("scale_lr", None)  # deprecated: the key before lr_scaling
        rule = data.get("lr_scaling")
        if scale is not None:
            if not isinstance(scale, bool):
                raise ValueError(f"scale_lr (deprecated) must be true or false, not {scale!r}")
            if rule not in (None, "auto") and (rule == "none") == scale:
                raise ValueError(
                    f"scale_lr: {str(scale).lower()} (deprecated) contradicts "
                    f"lr_scaling: {rule}; keep only lr_scaling"
                )
            if not scale:
                rule = "none"
        if rule in (None, "auto"):
            rule = default_lr_scaling(data.get("optimizer", "adamw"))
        data["lr_scaling"] = rule
        return data


def default_lr_scaling(optimizer: Any) -> LrScaling:
    """The learning-rate scaling rule that fits an optimizer.

    Args:
        optimizer: ``optim.optimizer`` (``adamw``, ``adam`` or ``sgd``).

    Returns:
        ``linear`` for SGD (Goyal et al. 2017), ``sqrt`` for the Adam family (Malladi et al.
        2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms").
    """
    return "linear" if optimizer == "sgd" else "sqrt"


class RunConfig(_Section):
    """Workers, devices and the run folder.

    Attributes:
        out: Run folder (config, metrics, TensorBoard logs, checkpoints, plots).
        workers: Number of worker processes on this machine (one per GPU on CUDA).
        engine: The data-parallel engine, one of :data:`landcover.registry.ENGINES`:
            ``torch`` (DDP under torchrun's elastic agent) or ``horovod``
            (``hvd.DistributedOptimizer`` under ``horovodrun``).
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda``.
        backend: torch.distributed backend; ``auto`` is NCCL on CUDA, Gloo on CPU.
        bf16: bf16 autocast on CUDA (ignored on CPU, which trains in fp32).
        channels_last: channels_last memory format on CUDA.
        threads_per_worker: CPU threads per worker; default: cores / workers.
        seed: Base random seed (each rank and epoch derive their own).
        val_every: Validate every K epochs (and after the last).
        val_overlap: Overlap in pixels between sliding windows in validation; default a
            quarter of the patch size.
        keep_last: Number of per-epoch checkpoints kept besides ``last.pt`` and ``best.pt``.
        log_every_s: Seconds between progress lines when the output is not a terminal.
        timeout_s: Collective-operation timeout in seconds.
        max_restarts: Restarts of the worker group by the elastic agent after a failure;
            restarted workers resume from the latest checkpoint.
        nnodes: Number of nodes (machines) in the job; each runs one elastic agent.
        workers_per_node: Workers on each node (default: ``workers / nnodes``).
        rdzv_endpoint: ``host:port`` of the c10d rendezvous (one node's address) when
            ``nnodes > 1``.
        rdzv_id: Rendezvous id shared by the nodes (default: derived from ``out``).
        rdzv_timeout_s: Seconds the nodes wait for each other at the rendezvous (the join,
            and at most 60 s for each read from the rendezvous store).
        node_rank: This node's rank; node 0 hosts the c10d rendezvous store (default:
            torch decides from whether the endpoint's host name is this machine's).
        local_addr: This node's address as the other nodes reach it (default: its host
            name); set it on hosts with several interfaces.
        grad_compression: ``none``, ``fp16`` or ``powersgd`` (DDP communication hooks;
            Horovod offers ``none`` and ``fp16``).
        powersgd_rank: Rank of PowerSGD's gradient approximation.
        powersgd_warmup_steps: Optimizer steps of plain all-reduce before PowerSGD starts.
        local_sgd_period: Average models every H optimizer steps instead of all-reducing
            gradients every step (0: off).
        compile: Compile the model with ``torch.compile`` for training (``landcover predict
            --compile`` for maps); the first steps pay the compile time.
        mlflow: Log the run to MLflow from rank 0 (the flattened config as parameters, each
            epoch's loss, learning rate, samples/s, per-class IoU, mIoU and accuracy, and
            ``curves.png``), to the tracking server of ``MLFLOW_TRACKING_URI``; also on, whatever
            this says, when that variable is set (Azure ML sets it). Needs ``mlflow-skinny``
            (``pip install 'landcover[mlflow]'``). A resumed run folder continues its MLflow run
            (its id is kept in ``mlflow.json``).
    """

    out: str = "runs/default"
    workers: int = Field(1, ge=1)
    engine: str = DEFAULT_ENGINE
    device: Literal["auto", "cpu", "cuda"] = "auto"
    backend: Literal["auto", "gloo", "nccl"] = "auto"
    bf16: bool = True
    channels_last: bool = True
    threads_per_worker: int | None = Field(None, ge=1)
    seed: int = 0
    val_every: int = Field(1, ge=1)
    val_overlap: int | None = Field(None, ge=0)
    keep_last: int = Field(3, ge=0)
    log_every_s: float = Field(10.0, gt=0.0)
    timeout_s: float = Field(300.0, gt=0.0)
    max_restarts: int = Field(0, ge=0)
    nnodes: int = Field(1, ge=1)
    workers_per_node: int | None = Field(None, ge=1)
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_timeout_s: float = Field(600.0, gt=0.0)
    node_rank: int | None = Field(None, ge=0)
    local_addr: str | None = None
    grad_compression: Literal["none", "fp16", "powersgd"] = "none"
    powersgd_rank: int = Field(1, ge=1)
    powersgd_warmup_steps: int = Field(10, ge=0)
    local_sgd_period: int = Field(0, ge=0)
    compile: bool = False
    mlflow: bool = False

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return check_engine_name(value)

    @field_validator("out")
    @classmethod
    def _no_credentials(cls, value: str) -> str:
        return _no_credentials_in_url(value)  # type: ignore[return-value]

    @model_validator(mode="after")
    def _nodes_consistent(self) -> RunConfig:
        if self.local_sgd_period and self.grad_compression != "none":
            raise ValueError(
                "run.local_sgd_period sends no gradients, so it cannot be combined with "
                "run.grad_compression"
            )
        if self.nnodes == 1:
            return self
        if self.rdzv_endpoint is None:
            raise ValueError(
                "run.rdzv_endpoint (--rdzv-endpoint HOST:PORT) is needed with nnodes > 1"
            )
        if self.workers_per_node is None and self.workers % self.nnodes:
            raise ValueError(
                f"{self.workers} workers do not split evenly over {self.nnodes} nodes; "
                "set --workers-per-node"
            )
        return self

    @property
    def nproc_per_node(self) -> int:
        """Workers this node's agent starts."""
        return self.workers_per_node or self.workers // self.nnodes


class Config(_Section):
    """The whole configuration of a run.

    Not changed once loaded. A training run's *effective* configuration, with its ``auto``
    values resolved to numbers and ``run.workers`` as launched, is a new object made from it
    (see ``landcover.training.resolved``); that is the one saved as ``config.yaml`` and in
    every checkpoint.
    """

    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    run: RunConfig = Field(default_factory=RunConfig)

    @model_validator(mode="after")
    def _patch_fits_overlap(self) -> Config:
        if self.run.val_overlap is None:
            # a copy: the run section given may be another config's; set as a frozen
            # dataclass's __post_init__ would (the one change made while a config is built)
            run = self.run.model_copy(update={"val_overlap": self.data.patch_size // 4})
            object.__setattr__(self, "run", run)
        if self.run.val_overlap * 2 >= self.data.patch_size:
            raise ValueError(
                f"run.val_overlap {self.run.val_overlap} must be under half the patch size "
                f"{self.data.patch_size}"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        """Returns the configuration as plain JSON/YAML-safe data."""
        return self.model_dump(mode="json")


def _format_validation_error(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{source}: {where + ': ' if where else ''}{message}{more}"


def _set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = tree
    for key in keys[:-1]:
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {dotted}: {key} is not a section")
    node[keys[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """Parses a ``section.key=value`` override; the value is read as YAML.

    Args:
        text: The override, e.g. ``optim.lr=0.01`` or ``model.decoder_channels=[64,32,16]``.

    Returns:
        The dotted key and the parsed value.

    Raises:
        ConfigError: If the text has no ``=``.
    """
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected section.key=value")
    key, raw = text.split("=", 1)
    return key.strip(), yaml.safe_load(raw)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Merges two config trees: sections merge key by key, any other value of ``over`` wins.

    Args:
        base: The lower layer.
        over: The upper layer (its keys win; lists replace lists whole).

    Returns:
        A new merged tree (the inputs are not changed).
    """
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path, what: str) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found") from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not a readable YAML file ({exc.__class__.__name__})") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config file must be a YAML mapping")
    return loaded or {}


@dataclass
class ConfigTree:
    """A config file read with its includes merged, before validation.

    Attributes:
        tree: The merged keys (``include`` removed).
        includes: Every file included, directly or by an included file.
    """

    tree: dict[str, Any]
    includes: list[Path] = field(default_factory=list)


def read_config_tree(path: str | Path) -> ConfigTree:
    """Reads a config file with its ``include:`` files merged under its own keys.

    ``include`` is a path or a list of paths, relative to the including file's folder; they
    are merged in order (a later one wins over an earlier one), then the file's own keys win
    over all of them. Included files may include others; a cycle is an error.

    Args:
        path: The config file.

    Returns:
        The merged tree and the files it included.

    Raises:
        ConfigError: If a file is missing or unreadable, or an include is malformed or circular.
    """
    includes: list[Path] = []
    tree = _merge_includes(Path(path), (), "config file", includes)
    return ConfigTree(tree, includes)


def _merge_includes(path: Path, chain: tuple[Path, ...], what: str, seen: list[Path]) -> dict:
    resolved = path.resolve()
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError(f"{path}: include cycle ({cycle})")
    tree = _read_yaml(path, what)
    includes = tree.pop("include", None)
    if includes is None:
        return tree
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise ConfigError(f"{path}: include must be a file path or a list of file paths")
    base: dict[str, Any] = {}
    for name in includes:
        included = path.parent / Path(name).expanduser()
        seen.append(included)
        layer = _merge_includes(included, (*chain, resolved), f"file included by {path}", seen)
        base = deep_merge(base, layer)
    return deep_merge(base, tree)


def run_settings(source: str = "options", **values: Any) -> RunConfig:
    """A validated ``run`` section from command-line values (for commands other than train).

    Args:
        source: Named in error messages (the command).
        **values: ``run`` keys; ``None`` values keep their defaults.

    Returns:
        The settings (workers, nodes, rendezvous, device).

    Raises:
        ConfigError: If they are inconsistent (say, several nodes and no rendezvous endpoint).
    """
    try:
        return RunConfig.model_validate({k: v for k, v in values.items() if v is not None})
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def flag_name(key: str) -> str:
    """The command-line flag that sets a dotted key unless told otherwise.

    Args:
        key: A dotted config key, e.g. ``optim.batch_size``.

    Returns:
        The flag as typer spells it, e.g. ``--batch-size``.
    """
    return "--" + key.rsplit(".", 1)[-1].replace("_", "-")


@dataclass(frozen=True)
class _Override:
    """One value set on the command line: its dotted key, value and how the user wrote it."""

    key: str
    value: Any
    origin: str

    def sets(self, loc: list[str]) -> bool:
        """Whether this override decides the value at ``loc`` (its key is ``loc`` or above)."""
        return self.key.split(".") == loc[: self.key.count(".") + 1]

    def within(self, loc: list[str]) -> bool:
        """Whether this override sets a value inside the section at ``loc``."""
        return self.key.split(".")[: len(loc)] == loc


def _problems(tree: dict[str, Any]) -> set[tuple[tuple[str, ...], str]]:
    """The (location, message) of each validation problem of a tree (empty when valid)."""
    try:
        Config.model_validate(tree)
    except ValidationError as err:
        return {(tuple(str(p) for p in e["loc"]), e["msg"]) for e in err.errors()}
    return set()


def _blame(
    err: ValidationError,
    source: str,
    layers: list[_Override],
    build: Callable[[set[int]], dict[str, Any]],
) -> str:
    """Names where the first problem of ``err`` came from: a flag, a ``--set`` or the file.

    A problem at or under a key set on the command line is that flag's (the last one to set
    it). A problem of a whole section (``decoder_channels needs 5 values``) is blamed on the
    command-line values in it without which it goes away, else on ``source``.
    """
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    problem = (tuple(loc), first["msg"])
    for layer in reversed(layers):
        if layer.sets(loc):
            return layer.origin
    inside = [i for i, layer in enumerate(layers) if layer.within(loc)]
    culprits = [i for i in inside if problem not in _problems(build({i}))]
    if not culprits and inside and problem not in _problems(build(set(inside))):
        culprits = inside
    if culprits:
        return ", ".join(layers[i].origin for i in culprits)
    return source


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    sets: list[str] | None = None,
    flags: dict[str, str] | None = None,
) -> Config:
    """Loads and validates a configuration.

    A config file may say ``include: FILE`` (or a list of files), relative to its own folder:
    the included files are merged under the file's own keys (see :func:`read_config_tree`), so a
    statistics file written by ``landcover data stats`` can supply ``data.mean`` and the
    like. Command-line overrides win over both.

    An invalid value is blamed on where it came from: a flag (``--epochs -3: optim.epochs:
    ...``), a ``--set`` (``--set optim.lr=0: optim.lr: ...``) or the config file
    (``configs/cpu.yaml: optim.epochs: ...``).

    Args:
        path: A YAML config file, or ``None`` for the built-in defaults.
        overrides: Dotted keys to values (from CLI flags); ``None`` values are skipped.
        sets: ``section.key=value`` strings (from ``--set``), applied last.
        flags: The flag that sets a key of ``overrides``, where it is not the one
            :func:`flag_name` derives (e.g. ``{"data.root": "--data"}``).

    Returns:
        The validated configuration.

    Raises:
        ConfigError: If a file is missing or unreadable, an include is malformed or circular,
            or the result is invalid (named as the flag, ``--set`` or file it came from).
    """
    base: dict[str, Any] = {}
    source = "config"
    if path is not None:
        source = str(path)
        base = read_config_tree(path).tree
    layers: list[_Override] = []
    for key, value in (overrides or {}).items():
        if value is not None:
            flag = (flags or {}).get(key) or flag_name(key)
            shown = str(value).lower() if isinstance(value, bool) else value
            layers.append(_Override(key, value, f"{flag} {shown}"))
    for text in sets or []:
        key, value = parse_override(text)
        layers.append(_Override(key, value, f"--set {text}"))

    def build(skip: set[int]) -> dict[str, Any]:
        tree = copy.deepcopy(base)
        for i, layer in enumerate(layers):
            if i not in skip:
                _set_dotted(tree, layer.key, layer.value)
        return tree

    try:
        return Config.model_validate(build(set()))
    except ValidationError as err:
        raise ConfigError(
            _format_validation_error(err, _blame(err, source, layers, build))
        ) from None


def config_from_dict(tree: dict[str, Any], source: str = "checkpoint") -> Config:
    """Validates a configuration stored as plain data (in a checkpoint or run folder).

    Args:
        tree: The configuration as produced by :meth:`Config.to_dict`.
        source: Where it came from, for the error message.

    Returns:
        The validated configuration.

    Raises:
        ConfigError: If the data is not a valid configuration.
    """
    try:
        return Config.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def save_config(config: Config, path: Path) -> None:
    """Writes the resolved configuration as YAML (atomically).

    Args:
        config: The configuration.
        path: Destination file.
    """
    from landcover.fileio import atomic_write_text
    from landcover.redaction import redact_tree

    text = yaml.safe_dump(redact_tree(config.to_dict()), sort_keys=False)
    atomic_write_text(path, text)
