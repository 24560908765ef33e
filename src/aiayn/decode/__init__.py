"""Greedy and beam search over the model's `encode`/`decode`, and text-to-text translation (section 6.1).

Import the modules themselves (aiayn.decode.beam, ...): importing the package loads none of them.
"""
