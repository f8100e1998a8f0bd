"""Segmentation models."""

from landcover.models.factory import build_model, load_initial_weights

__all__ = ["build_model", "load_initial_weights"]
