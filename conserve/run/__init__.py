"""The run: simulate and what it is made of (time grid, chunk runner, adaptive control,
ensembles, the pure step, checkpoints, failures, progress, posing)."""
