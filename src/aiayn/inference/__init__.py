"""Using a trained run: load it, translate with it, draw what it attends to (exporting it: aiayn.export)."""

from aiayn.inference.translator import Candidate, Translator, load

__all__ = ["Candidate", "Translator", "load"]
