"""The aggregate stage's outputs: Tables 2 and 3, the sweep table, plots, headline metrics, read from evals/."""
