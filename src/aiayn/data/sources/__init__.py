"""Corpus sources for the fetch stage: a local folder of parallel files (`local`), Multi30k (`multi30k`), and WMT
2014 EN-DE / EN-FR (`wmt14`)."""
