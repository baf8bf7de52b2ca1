"""Arrays as an npz file can hold them: bfloat16 as its 16 bits.

numpy has no bfloat16 of its own (JAX's is ml_dtypes'), and an npz stores one as raw two-byte
records that read back as `|V2`, a type no program takes. So a bfloat16 array (a `bf16-state`
parameter, its optimizer's moments) is written as the uint16 of its bits, and read back as
bfloat16 where the manifest says the leaf is one. No torch: the exported path runs where only JAX
and numpy are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

BFLOAT16 = "bfloat16"


def leaf_key(index: int) -> str:
    """The name of state leaf number `index` in state.npz and in a checkpoint."""
    return f"leaf{index:05d}"


def storable(array: Any) -> np.ndarray:
    """`array` as npz stores it: a bfloat16 one as uint16 bits, any other as it is."""
    array = np.asarray(array)
    return array.view(np.uint16) if array.dtype.name == BFLOAT16 else array


def restored(array: np.ndarray, dtype: str) -> np.ndarray:
    """A stored array as the leaf of type `dtype` it was: uint16 bits viewed as bfloat16 where the
    leaf is one; anything else as it was read (the caller checks its type against the manifest)."""
    if dtype == BFLOAT16 and array.dtype == np.uint16:
        import ml_dtypes

        return array.view(ml_dtypes.bfloat16)
    return array


def stored_dtype(dtype: str) -> np.dtype:
    """The dtype an npz holds a leaf or column of type `dtype` as (bfloat16: its uint16 bits)."""
    return np.dtype(np.uint16) if dtype == BFLOAT16 else np.dtype(dtype)
