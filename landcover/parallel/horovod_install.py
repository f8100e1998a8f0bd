"""Importing Horovod, with one line on how to install it when it is missing."""

from __future__ import annotations

from types import ModuleType

from landcover.errors import ConfigError, first_line

INSTALL_HINT = (
    "install it with: bash scripts/install-horovod.sh (builds Horovod 0.28.1 against the "
    "installed torch once, a few minutes, then reuses the cached wheel)"
)


def import_horovod() -> ModuleType:
    """Imports ``horovod.torch``.

    Returns:
        The ``horovod.torch`` module.

    Raises:
        ConfigError: If Horovod is not installed (or was built without torch support).
    """
    try:
        import horovod.torch as hvd
    except ImportError as exc:
        reason = first_line(exc)
        raise ConfigError(
            f"--engine horovod needs Horovod with PyTorch support, which this environment "
            f"lacks ({reason}); {INSTALL_HINT}"
        ) from None
    return hvd
