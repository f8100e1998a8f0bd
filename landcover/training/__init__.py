"""Training: loop, loss, schedule, metrics, checkpoints and the run folder."""
