"""Segmentation models."""

from landcover.models.compiled import compile_check, compile_model
from landcover.models.factory import build_model, final_stage_warning
from landcover.models.weights import LoadedWeights, load_initial_weights

__all__ = [
    "LoadedWeights",
    "build_model",
    "compile_check",
    "compile_model",
    "final_stage_warning",
    "load_initial_weights",
]
