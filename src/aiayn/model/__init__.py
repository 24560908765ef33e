"""The Transformer of Vaswani et al. 2017 in plain PyTorch: config (no torch), attention, layers, embeddings, masks,
cache, transformer. Import from the modules themselves: the config layer imports `aiayn.model.config` without
importing torch."""
