"""What a training run settles when it starts, kept apart from the configuration it loaded.

The loaded configuration is frozen. A few of its values are only known once the workers run:
``auto`` band statistics and class weights (measured on the training tiles, or taken from the
checkpoint a run resumes from: :mod:`~landcover.training.autostats`), the class frequencies
measured with them, and the worker count the job was launched with (an external launcher may
start another number than ``run.workers``). They are typed records here, and
:meth:`Resolved.apply` makes the *effective* configuration from them: a new object, which the
run folder's ``config.yaml`` and every checkpoint hold, so predict and evaluate normalise
exactly as training did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from landcover.config import Config
from landcover.errors import ConfigError


@dataclass(frozen=True)
class ResolvedStats:
    """The numbers that replace ``auto`` data settings (or repeat the configured ones).

    Attributes:
        mean: Per-band mean on the 0..1 scale (``data.mean``).
        std: Per-band standard deviation on the 0..1 scale (``data.std``).
        class_frequencies: Each class's share of the training pixels by class name
            (``data.class_frequencies``): given, measured or from the checkpoint; ``None``
            when the config gives none and nothing was measured.
        class_weights: Per-class loss weights (``optim.loss.class_weights``); ``None`` when
            the config sets none.
    """

    mean: tuple[float, ...]
    std: tuple[float, ...]
    class_frequencies: Mapping[str, float] | None
    class_weights: tuple[float, ...] | None

    def apply(self, config: Config) -> Config:
        """The configuration with these numbers in place of its ``auto`` values.

        Args:
            config: The loaded configuration (left unchanged).

        Returns:
            A new configuration.

        Raises:
            ConfigError: If a number does not fit the configuration: a zero standard deviation,
                or a run folder resumed with another class mapping or other bands than the
                numbers it recorded were measured for.
        """
        frequencies = self.class_frequencies
        try:
            data = config.data.replace(
                mean=list(self.mean),
                std=list(self.std),
                class_frequencies=None if frequencies is None else dict(frequencies),
            )
            weights = None if self.class_weights is None else list(self.class_weights)
            loss = config.optim.loss.replace(class_weights=weights)
            return config.replace(data=data, optim=config.optim.replace(loss=loss))
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise ConfigError(
                f"{config.run.out}: the statistics this run measured do not fit the "
                f"configuration ({reason}); resume with the settings it started with, or "
                "train into a new --out"
            ) from None


@dataclass(frozen=True)
class Resolved:
    """Everything a training run settles when it starts that its configuration leaves open.

    Attributes:
        workers: Workers in the job as launched (``run.workers`` of the effective config).
        stats: Band statistics, class frequencies and class weights.
    """

    workers: int
    stats: ResolvedStats

    def apply(self, config: Config) -> Config:
        """The effective configuration of the run.

        Args:
            config: The loaded configuration (left unchanged).

        Returns:
            A new configuration with the resolved values.

        Raises:
            ValidationError: If a resolved value is invalid for its key.
        """
        effective = self.stats.apply(config)
        return effective.replace(run=effective.run.replace(workers=self.workers))
