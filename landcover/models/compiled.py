"""Compiled models: ``torch.compile`` (TorchInductor) around a model's calls.

The compiled module is a wrapper (``torch.compile``'s ``OptimizedModule``) around the same
parameters: checkpoints save the bare model, so they hold the usual state-dict keys, and what
is not wrapped (validation, the weights' moving average) runs eagerly. Compilation is lazy:
the first call of each input shape pays the compile time (:func:`compile_check` pays it up
front and turns a failure into one line).
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from landcover.errors import ConfigError, first_line

log = logging.getLogger("landcover")


def compile_model(module: nn.Module, what: str, mode: str = "default") -> nn.Module:
    """Wraps a module in ``torch.compile`` (TorchInductor).

    Args:
        module: The module to call compiled: the DDP wrapper in training (so DDP's
            optimizer splits the graph at its gradient buckets), the bare model in predict.
        what: Says what runs compiled, for the log line (``training``, ``predict``).
        mode: ``torch.compile``'s mode (``run.compile_mode``): ``default``,
            ``reduce-overhead`` (CUDA graphs), ``max-autotune`` or
            ``max-autotune-no-cudagraphs``.

    Returns:
        The compiled wrapper; it shares ``module``'s parameters.
    """
    shown = "" if mode == "default" else f", mode {mode}"
    log.info("%s: the model is compiled (torch.compile%s) at its first call", what, shown)
    return torch.compile(module, mode=mode)


def compile_check(model: nn.Module, example: torch.Tensor, what: str) -> None:
    """Runs a compiled model once (no gradients), so a compile failure is one clear error.

    Args:
        model: The compiled model.
        example: An input of the shape it will mostly see.
        what: The option that asked for compilation, for the message.

    Raises:
        ConfigError: If compilation fails (on the CPU, TorchInductor needs a C++ compiler).
    """
    try:
        with torch.no_grad():
            model(example)
    except Exception as exc:  # torch's compile errors have no common base class
        raise ConfigError(
            f"{what}: torch.compile failed ({first_line(exc)[:200]}); leave it off, or on the "
            "CPU install a C++ compiler"
        ) from None
