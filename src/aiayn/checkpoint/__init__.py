"""Stored checkpoints read (the one module that loads them) and averaged (section 6.1); the train stage writes them."""
