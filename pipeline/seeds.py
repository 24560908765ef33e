"""DVC stage `seeds`: seeds/{row}.yaml for every row of params.yaml, its `seeds` then its `extra_seeds`.

train@{row} and evaluate@{row} depend on their row's file and run its seeds (seeds_from=seeds/{row}.yaml), so when
`aiayn-extend` gives a row more seeds, DVC reruns that row's stages and base's, not every row's.
DVC fails on a params key that is absent (`extra_seeds.A1` before any seed is added), hence a file per row rather than a
per-row params key. No Hydra config: params.yaml is all it reads. By hand: python pipeline/seeds.py
"""

from __future__ import annotations

from aiayn.stages.seeds import seeds

PARAMS_FILE = "params.yaml"
OUT_DIR = "seeds"  # dvc.yaml's outs


def run(params_file: str = PARAMS_FILE, out_dir: str = OUT_DIR) -> dict[str, list[int]]:
    return seeds(params_file, out_dir)


if __name__ == "__main__":
    # One line for the rows that share a seed list, e.g. "seeds/{base,A1,...}.yaml: seeds 1 2 3 4" (20 rows).
    by_list: dict[tuple[int, ...], list[str]] = {}
    for row, row_seeds in run().items():
        by_list.setdefault(tuple(row_seeds), []).append(row)
    for shared, rows in by_list.items():
        names = rows[0] if len(rows) == 1 else "{" + ",".join(rows) + "}"
        print(f"{OUT_DIR}/{names}.yaml: seeds {' '.join(map(str, shared))} ({len(rows)} row{'s' * (len(rows) > 1)})")
