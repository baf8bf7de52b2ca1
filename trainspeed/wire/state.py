"""Nested states (a Trainable's `state_dict`, RNG states) as tensors plus a JSON skeleton.

Checkpoints of a remote run need the state of the Trainable on the server, and a resume sends it
back. Nothing is pickled: the skeleton is JSON in which every tensor is replaced by its index in a
list of tensors that cross as raw bytes (`tensors.py`). JSON has no tuples and only string keys, so
every container is tagged: a list is a JSON array, a tuple `{"tuple": [...]}`, a dict
`{"dict": [[key, value], ...]}` (keys of any allowed type: optimizer states key by int), a tensor
`{"tensor": i}`. Scalars are None, bool, int, float (NaN and infinities included) and str; any other
type is refused when encoding, and any other JSON object when decoding.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import torch

from trainspeed.user_json import JSONRefused, loads
from trainspeed.wire.tensors import WireError

SCALARS = (type(None), bool, int, float, str)
MAX_DEPTH = 64


def encode_state(value: Any) -> tuple[str, list[torch.Tensor]]:
    """The skeleton (JSON text) and the tensors it refers to, in order."""
    tensors: list[torch.Tensor] = []
    return json.dumps(_encode(value, tensors, 0)), tensors


def _encode(value: Any, tensors: list[torch.Tensor], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"a state nested deeper than {MAX_DEPTH} levels cannot cross the wire")
    if isinstance(value, torch.Tensor):
        tensors.append(value.detach().to("cpu"))
        return {"tensor": len(tensors) - 1}
    if isinstance(value, SCALARS):
        return value
    if isinstance(value, list):
        return [_encode(item, tensors, depth + 1) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(item, tensors, depth + 1) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(key, tensors, depth + 1), _encode(item, tensors, depth + 1)] for key, item in value.items()]}
    raise WireError(f"a value of type {type(value).__name__} cannot cross the wire (allowed: tensors, "
                    "None, bool, int, float, str, lists, tuples and dicts of them)")


def nested_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nested state, where it lives (nothing is copied)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from nested_tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from nested_tensors(item)


def decode_state(skeleton: str, tensors: list[torch.Tensor]) -> Any:
    """The nested state a skeleton describes, with its tensors in place; every tensor used once."""
    try:
        tree = loads(skeleton)
    except JSONRefused as refused:
        raise WireError(f"the state skeleton is not JSON this side reads ({refused})") from None
    used: set[int] = set()
    value = _decode(tree, tensors, used, 0)
    if len(used) != len(tensors):
        raise WireError(f"the state skeleton uses {len(used)} of the {len(tensors)} tensors sent")
    return value


def _decode(node: Any, tensors: list[torch.Tensor], used: set[int], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise WireError(f"the state skeleton is nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, SCALARS):
        return node
    if isinstance(node, list):
        return [_decode(item, tensors, used, depth + 1) for item in node]
    if isinstance(node, dict) and len(node) == 1:
        (tag, content), = node.items()
        if tag == "tensor" and type(content) is int:
            if not 0 <= content < len(tensors) or content in used:
                raise WireError(f"the state skeleton refers to tensor {content} (of {len(tensors)}) twice or out of range")
            used.add(content)
            return tensors[content]
        if tag == "tuple" and isinstance(content, list):
            return tuple(_decode(item, tensors, used, depth + 1) for item in content)
        if tag == "dict" and isinstance(content, list) and all(isinstance(p, list) and len(p) == 2 for p in content):
            result = {}
            for key_node, item in content:
                key = _decode(key_node, tensors, used, depth + 1)
                if not isinstance(key, (int, str, float, bool, type(None))):
                    raise WireError(f"a dict key of type {type(key).__name__} in the state skeleton")
                result[key] = _decode(item, tensors, used, depth + 1)
            return result
    raise WireError(f"unexpected node in the state skeleton: {json.dumps(node)[:80]}")
