"""Run infrastructure: where a run's files live, its learning curve, its float path, its wandb run, kept seeds, a
fresh checkout."""
