"""Run configuration: pydantic models, YAML loading and command-line overrides.

A configuration has four sections: ``data``, ``model``, ``optim`` and ``run``. YAML files in
``configs/`` set any subset of it (a file may ``include:`` others, merged under its own keys);
command-line flags and ``--set section.key=value`` override them; ``auto`` values are measured
when training starts; the resolved configuration is saved as ``config.yaml`` in the run folder
and inside every checkpoint.

The models live in one module per section (:mod:`.data`, :mod:`.model`, :mod:`.optim`,
:mod:`.run`, the whole in :mod:`.root`, their base in :mod:`.base`); loading, overrides and
saving in :mod:`.loading`. This package's names are the ones the rest of landcover imports.
"""

from landcover.config.base import AUTO
from landcover.config.data import DataConfig
from landcover.config.loading import (
    config_from_dict,
    deep_merge,
    flag_name,
    load_config,
    parse_override,
    read_config_tree,
    run_settings,
    save_config,
)
from landcover.config.model import ARCHITECTURES, LIST_DECODER_ARCHITECTURES, ModelConfig
from landcover.config.optim import (
    DEFAULT_TERMS,
    ClassWeightScheme,
    LossConfig,
    LrScaling,
    OptimConfig,
    default_lr_scaling,
)
from landcover.config.root import Config
from landcover.config.run import RunConfig

__all__ = [
    "ARCHITECTURES",
    "AUTO",
    "DEFAULT_TERMS",
    "LIST_DECODER_ARCHITECTURES",
    "ClassWeightScheme",
    "Config",
    "DataConfig",
    "LossConfig",
    "LrScaling",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "config_from_dict",
    "deep_merge",
    "default_lr_scaling",
    "flag_name",
    "load_config",
    "parse_override",
    "read_config_tree",
    "run_settings",
    "save_config",
]
