"""Data: tile pairs, in-memory loading, sampling, augmentation and synthetic data."""
