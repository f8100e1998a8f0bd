"""The whole configuration of a run: its four sections."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from landcover.config.base import Section
from landcover.config.data import DataConfig
from landcover.config.model import ModelConfig
from landcover.config.optim import OptimConfig
from landcover.config.run import RunConfig


class Config(Section):
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
