"""``optim``: optimizer, schedule, batch, epochs and the loss (``optim.loss``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from landcover.config.base import Section, numbers_or_auto

LrScaling = Literal["linear", "sqrt", "none"]
"""How the peak learning rate follows the global batch (``optim.lr_scaling``)."""


DEFAULT_TERMS = {"ce": 1.0}
"""The terms ``optim.loss.terms`` merges its keys over: cross-entropy alone."""

TERM_KEY_SUFFIX = "_weight"
"""``optim.loss.<name>_weight`` (the keys before ``terms``) sets ``terms.<name>``."""


ClassWeightScheme = Literal["median_frequency", "inverse_sqrt"]
"""How ``optim.loss.class_weights: auto`` turns class frequencies into weights."""


class LossConfig(Section):
    """The training loss: a weighted sum of terms that all ignore no-data pixels.

    The terms are classes registered by name (:mod:`landcover.training.lossregistry`): built
    in, ``ce`` (cross-entropy) and, from ``segmentation_models_pytorch.losses``, ``dice``,
    ``focal``, ``lovasz`` (Lovasz-softmax) and ``tversky``; a weight of 0 leaves a term out.
    The names are checked against the registry when training starts, not here: a checkpoint
    trained with a term a plugin registered still loads for prediction without the plugin.

    Attributes:
        terms: Weight of each loss term by registered name, e.g. ``{ce: 1, dice: 1}``;
            merged over ``{ce: 1}`` (set ``ce: 0`` to leave cross-entropy out). ``focal`` is
            smp's multi-class focal loss (one-vs-rest, averaged over the classes),
            ``lovasz`` a surrogate of the IoU of the classes present in the batch. The keys
            of older configs, ``ce_weight``, ``dice_weight``, ``focal_weight``,
            ``lovasz_weight``, ``tversky_weight`` (any ``<name>_weight``), still set a term
            and win over ``terms``.
        focal_gamma: Focusing exponent of the focal term (0 gives one-vs-rest BCE).
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

    terms: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_TERMS))
    focal_gamma: float = Field(2.0, ge=0.0)
    tversky_alpha: float = Field(0.3, ge=0.0)
    tversky_beta: float = Field(0.7, ge=0.0)
    class_weights: list[float] | Literal["auto"] | None = None
    class_weight_scheme: ClassWeightScheme = "median_frequency"
    class_weight_cap: float = Field(10.0, ge=1.0)

    @model_validator(mode="before")
    @classmethod
    def _gather_terms(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        terms = data.get("terms", {})
        if not isinstance(terms, dict):
            raise ValueError(f"terms must map loss names to weights, not {terms!r}")
        terms = {**DEFAULT_TERMS, **terms}
        for key in [k for k in data if isinstance(k, str) and k.endswith(TERM_KEY_SUFFIX)]:
            terms[key.removesuffix(TERM_KEY_SUFFIX)] = data.pop(key)
        data["terms"] = terms
        return data

    @field_validator("terms")
    @classmethod
    def _weights(cls, terms: dict[str, float]) -> dict[str, float]:
        for name, weight in terms.items():
            if not name.isidentifier():
                raise ValueError(f"{name!r} is not a loss name")
            if weight < 0:
                raise ValueError(f"the weight of {name!r} must be at least 0, not {weight}")
        return terms

    @field_validator("class_weights", mode="before")
    @classmethod
    def _class_values(cls, value: Any) -> Any:
        return numbers_or_auto(value, "one per class")

    @model_validator(mode="after")
    def _some_term(self) -> LossConfig:
        if not any(weight > 0 for weight in self.terms.values()):
            raise ValueError("at least one of terms must have a positive weight")
        if self.tversky_alpha + self.tversky_beta <= 0:
            raise ValueError("tversky_alpha + tversky_beta must be positive")
        return self


class OptimConfig(Section):
    """Optimisation and epoch settings.

    Attributes:
        optimizer: ``adamw``, ``adam`` or ``sgd``.
        lr: Learning rate at a global batch of ``ref_batch`` samples (above 0, at most 100).
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
    lr: float = Field(1e-3, gt=0.0, le=100.0)
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
