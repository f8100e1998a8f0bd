"""Segmentation models."""

from landcover.models.factory import build_model
from landcover.models.weights import LoadedWeights, load_initial_weights

__all__ = ["LoadedWeights", "build_model", "load_initial_weights"]
