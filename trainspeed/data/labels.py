"""Class numbers: whole numbers from 0 that index a classifier's outputs.

A label read where it lies (a WebDataset `.cls` member, a Hugging Face label column) is checked
when the data is opened, before any batch: a text that is not a whole number, a null, a negative
number or one past `CLASS_LIMIT` is refused in one line naming the file and the sample, never
carried to a traceback (a 30-digit class overflows the int64 label array; a null is no class).
"""

from __future__ import annotations

CLASS_LIMIT = 2**31
"""Class numbers lie below it: labels travel as int64, and a classifier of 2**31 classes is no model
anyone trains; the workload's own class count (its size's `classes`) is checked against the data's."""


def class_number_problem(text: bytes, max_bytes: int) -> str | None:
    """Why the text of a class file is not a class number ("0", "17\\n"), or None. Only ASCII
    digits count (Python's int() also takes "+1", "1_000" and other scripts' digits)."""
    digits = text.strip()
    if len(text) > max_bytes or not digits or not digits.isdigit():
        return "not a class number (0, 1, 2 ...)"
    if int(digits) >= CLASS_LIMIT:
        return f"a class number past {CLASS_LIMIT - 1:,}, the largest one a label holds"
    return None
