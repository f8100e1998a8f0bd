"""Compiled models: ``torch.compile`` (TorchInductor) applied to a model in place.

``nn.Module.compile`` compiles the module's forward where it stands: the module keeps its
type, parameters and state-dict keys, so DDP wraps it, checkpoints save it and the weights'
moving average copies it exactly as an eager model. Compilation is lazy: the first forward
(and, in training, the first backward) of each input shape pays the compile time, and a
change of shape (the last, smaller batch of a tile) compiles once more.
"""

from __future__ import annotations

import logging

from torch import nn

log = logging.getLogger("landcover")


def compile_model(model: nn.Module, what: str) -> nn.Module:
    """Compiles a model's forward in place with ``torch.compile`` (default mode, inductor).

    Args:
        model: The bare model (not a DDP wrapper), already on its device.
        what: Says what runs compiled, for the log line (``training``, ``predict``).

    Returns:
        The same module, its calls now compiled.
    """
    if getattr(model, "_compiled_call_impl", None) is None:
        model.compile()
        log.info("%s: the model is compiled (torch.compile) at its first forward pass", what)
    return model
