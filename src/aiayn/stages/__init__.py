"""The pipeline's stages, a module and a function each, which pipeline/<stage>.py calls (fetch to attention_figures)."""
