"""The config layer: the schemas (schema.py), Hydra composition and a run's variant (composition.py), a row applied
at a scale and every value checked (resolve.py), row files (rowfile.py), params.yaml (params.py) and the pipeline
scripts' entry point (cli.py). The model's own config is aiayn.model.config's."""
