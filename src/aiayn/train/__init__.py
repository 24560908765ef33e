"""Training: the Lightning module, label smoothing, the schedule, callbacks, checkpoint writing, a run's fingerprint."""
