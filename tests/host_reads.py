"""Counting the operations that make the host wait for the device, on CPU, where nothing waits.

On a GPU, `torch.cuda.set_sync_debug_mode` reports them (gpu/gpu_check.py does); here a TorchFunctionMode sees
every torch call and counts the ones whose result the host must read: a tensor turned into a Python value, a
nonzero, or indexing by a boolean mask (its result's size depends on the data); and, as uploads, tensors made
from host data (`torch.tensor`), which on a GPU is a copy that waits for the device before it starts.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

UPLOADS = {"tensor", "as_tensor"}
READS = {
    "item",
    "tolist",
    "__bool__",
    "__int__",
    "__float__",
    "__index__",
    "nonzero",
    "numpy",
    "masked_select",
    "unique",
    "unique_consecutive",
    "argwhere",
}


def _has_bool_tensor(value) -> bool:
    if isinstance(value, Tensor):
        return value.dtype == torch.bool
    if isinstance(value, (tuple, list)):
        return any(_has_bool_tensor(v) for v in value)
    return False


class HostReads(TorchFunctionMode):
    """`with HostReads() as reads:` ... `reads.count`, `reads.names` (each read's or upload's function name, in
    order)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    @property
    def count(self) -> int:
        return len(self.names)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        index_by_mask = (
            name in ("__getitem__", "__setitem__", "index_put_", "index_put")
            and len(args) > 1
            and _has_bool_tensor(args[1])
        )
        if name in READS or name in UPLOADS or index_by_mask:
            self.names.append(name)
        return func(*args, **(kwargs or {}))
