"""Parallel text in, batches out: sources (synthetic, local, Multi30k, WMT14), cleaning, BPE, encoding, batching."""
