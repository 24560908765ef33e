"""aiayn's Hydra plugins: the fork launcher (hydra/launcher=parallel)."""
