"""Run infrastructure: a run's files, its learning curve, float path and wandb run, kept seeds, a fresh checkout."""
