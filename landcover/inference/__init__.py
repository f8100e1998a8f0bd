"""Inference over whole tiles."""
