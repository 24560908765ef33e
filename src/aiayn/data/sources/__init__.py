"""Corpus sources for the fetch stage: a local folder of parallel files, Multi30k, and WMT 2014 EN-DE / EN-FR."""

from aiayn.data.sources.local import prepare_local
from aiayn.data.sources.multi30k import prepare_multi30k
from aiayn.data.sources.wmt14 import prepare_wmt14

__all__ = ["prepare_local", "prepare_multi30k", "prepare_wmt14"]
