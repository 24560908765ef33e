"""The config layer: the schemas (schema.py), Hydra composition (composition.py), a row applied at a scale and every
value checked (resolve.py), row files (rowfile.py), params.yaml (params.py), a run's variant (variant.py) and the
pipeline scripts' entry point (cli.py). The model's own config is aiayn.model.config's."""
