"""The typed config: schemas, Hydra composition, rows applied at a scale, params.yaml, the stage entry point."""
