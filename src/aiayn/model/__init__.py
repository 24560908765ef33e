"""The Transformer of section 3 in plain PyTorch: its config (no torch), attention, layers, embeddings, masks, cache."""
