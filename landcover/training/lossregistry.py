"""The loss terms by name: one class per term, registered once, built from ``optim.loss``.

As segmentation-models-pytorch keeps its architectures behind ``smp.create_model``, the loss
terms live behind this registry: ``optim.loss.terms`` maps registered names to weights, and
:class:`~landcover.training.losses.SegmentationLoss` builds each term with :func:`create_term`
and sums them. A new term is one class and a decorator::

    @register_loss("smooth_ce", "cross-entropy with label smoothing")
    class SmoothCrossEntropy(nn.Module):
        def __init__(self, config: LossConfig, num_classes: int, class_weights) -> None: ...
        def forward(self, logits, target) -> torch.Tensor: ...

after which ``--set optim.loss.terms.smooth_ce=1`` trains with it. A term maps
``(logits (B, K, H, W), target (B, H, W) int64)`` to a scalar and must skip
:data:`~landcover.classes.IGNORE_INDEX` pixels (no loss, no gradient). The built-in terms
(:mod:`~landcover.training.lossterms`) register themselves when that module is imported, which
:mod:`landcover.training.losses` does: import the registry's functions from there, one import
for the terms and the loss, as ``segmentation_models_pytorch.losses``.

A set of terms may also have a fused form, one module computing their weighted sum faster
(:func:`register_fused`): cross-entropy and Dice register
:class:`~landcover.training.fusedloss.CeDiceLoss`, which the loss takes whenever its active
terms are among a fused form's.

The configuration does not import this registry: a checkpoint trained with a term registered by
a plugin still loads where that plugin is absent (prediction needs no loss). The names are
checked when training starts (:func:`check_terms`, in the launcher and where a term is built),
with one line that lists the registered names.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from landcover.errors import ConfigError


@dataclass(frozen=True)
class LossSpec:
    """One registered loss term.

    Attributes:
        name: Its key in ``optim.loss.terms``.
        cls: The term's class, called as ``cls(config, num_classes, class_weights)`` with the
            ``optim.loss`` section, the class count and the per-class weights (``None`` when
            there are none or the term does not take them) and returning an ``nn.Module``.
        summary: One line for the docs and messages.
        class_weights: Whether the term takes ``optim.loss.class_weights``.
    """

    name: str
    cls: Callable[..., Any]
    summary: str
    class_weights: bool = False


@dataclass(frozen=True)
class FusedForm:
    """One module that computes a weighted sum of some terms in one pass.

    Attributes:
        names: The terms it covers; it is used when every active term is one of them, each
            still registered as the class it was fused from.
        build: Called as ``build(weights, num_classes, class_weights)`` with the active
            terms' weights by name; returns a module equal to their weighted sum.
        classes: The class each covered term was registered as when the form was: a term
            registered again (a plugin's own ``ce``) is computed by its own class.
    """

    names: frozenset[str]
    build: Callable[..., Any]
    classes: Mapping[str, type]


_LOSSES: dict[str, LossSpec] = {}
_FUSED: list[FusedForm] = []


def register_loss(
    name: str, summary: str, *, class_weights: bool = False
) -> Callable[[type], type]:
    """A class decorator that registers a loss term under ``name``.

    Args:
        name: Its key in ``optim.loss.terms`` (registering a name again replaces it).
        summary: One line for the docs and messages.
        class_weights: Whether the term takes ``optim.loss.class_weights``.

    Returns:
        The decorator; it returns the class unchanged.

    Raises:
        ValueError: If the name is not a plain key (lower-case letters, digits and ``_``,
            as ``--set optim.loss.terms.NAME=1`` takes it).
    """
    if not name or not all(c.isascii() and (c.islower() or c.isdigit() or c == "_") for c in name):
        raise ValueError(f"loss name {name!r}: use lower-case letters, digits and _")

    def register(cls: type) -> type:
        _LOSSES[name] = LossSpec(name, cls, summary, class_weights)
        return cls

    return register


def register_fused(names: Collection[str], build: Callable[..., Any]) -> None:
    """Registers a fused form of a set of terms (see :class:`FusedForm`).

    Args:
        names: The terms it covers (registered already: their classes are recorded).
        build: ``build(weights, num_classes, class_weights)`` returning the module.

    Raises:
        ConfigError: If a covered term is not registered.
    """
    classes = {name: loss_spec(name).cls for name in names}
    _FUSED.append(FusedForm(frozenset(names), build, classes))


def unregister_loss(name: str) -> None:
    """Removes a registered term (for tests that register a toy one)."""
    _LOSSES.pop(name, None)


def loss_names() -> list[str]:
    """The registered terms' names, in registration order (built-ins first)."""
    return list(_LOSSES)


def loss_specs() -> list[LossSpec]:
    """The registered terms, in registration order."""
    return list(_LOSSES.values())


def loss_spec(name: str) -> LossSpec:
    """The registered term ``name``.

    Raises:
        ConfigError: If no term of that name is registered (one line listing those that are).
    """
    spec = _LOSSES.get(name)
    if spec is None:
        raise ConfigError(
            f"optim.loss.terms: unknown loss {name!r}; registered: {', '.join(_LOSSES)}"
        )
    return spec


def check_terms(terms: Mapping[str, float]) -> None:
    """Checks that every term of ``optim.loss.terms`` with a positive weight is registered.

    Raises:
        ConfigError: On the first unknown name.
    """
    for name, weight in terms.items():
        if weight > 0:
            loss_spec(name)


def create_term(name: str, config: Any, num_classes: int, class_weights: Any = None) -> Any:
    """Builds one registered term.

    Args:
        name: Its registered name.
        config: The ``optim.loss`` section (the term reads its parameters from it).
        num_classes: Number of classes.
        class_weights: Per-class weights, passed only to terms that take them.

    Returns:
        The term's module.

    Raises:
        ConfigError: If ``name`` is not registered, or its class cannot be made so.
    """
    spec = loss_spec(name)
    try:
        return spec.cls(config, num_classes, class_weights if spec.class_weights else None)
    except TypeError as exc:  # a plugin's __init__ of another signature
        raise ConfigError(
            f"optim.loss.terms.{name}: {spec.cls.__qualname__} cannot be made ({exc}); a term "
            "is made as cls(loss_config, num_classes, class_weights)"
        ) from None


def fused_form(names: Collection[str]) -> FusedForm | None:
    """The first fused form that covers every one of ``names`` as registered now, or ``None``."""
    active = frozenset(names)
    return next(
        (
            form
            for form in _FUSED
            if active
            and active <= form.names
            and all(_LOSSES[name].cls is form.classes[name] for name in active)
        ),
        None,
    )
