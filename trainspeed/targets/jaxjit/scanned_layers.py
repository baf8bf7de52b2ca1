"""A network's repeated layers traced once, as one `lax.scan` over their stacked weights (the jax
family's `scan-layers` option), and recomputed in the backward pass except for their matmuls'
outputs (`remat`) or whole from each layer's input (`remat-full`).

XLA compiles an unrolled stack of N identical blocks N times over: hf:gpt2's step took 79 s to
compile on a TPU v5e. A scan compiles the block once, as torchprime's and MaxText's scanned models
do, and a recompute policy inside the scanned body is what the compiled program keeps (XLA merged
StyleGAN3's `jax.checkpoint` regions back into one program where they were not under a scan).

Where the layers are: a run of two or more consecutive children of an `nn.ModuleList` or
`nn.Sequential` that compute the same function of their own weights: each layer's forward is
traced once with the arguments of the call and the traced programs are compared, so an attribute
that changes what a layer computes (a layer index it scales by, a sliding window on every other
layer) keeps that run apart. No attribute is trusted; the programs are.

How the model's own loop meets the scan:

- `nn.Sequential`: its forward runs the run as one scan;
- `nn.ModuleList`: the model iterates it in its own Python loop (HF's `for layer in self.layers:
  hidden = layer(hidden, mask=...)`), so iterating yields stand-ins of the layers. The first one
  called runs the scan over the whole run and returns its layer's output; each later one returns
  its layer's output from the scan, after checking that it was handed exactly the previous
  stand-in's output and the same other arguments. A loop that changes the hidden state between
  layers, or passes each layer other arguments, is refused in one line (`ScanRefused`).

The hidden state is the call's first positional argument and the output's tensor of its shape and
dtype; every other output (attention weights, a layer's own buffers such as BatchNorm's statistics)
is stacked over the run. The random key of dropout is carried through the scan.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch
from torch import nn
from torch.utils import _pytree

from trainspeed.errors import UsageError

MIN_RUN = 2


class ScanRefused(UsageError):
    """The model's loop over its layers cannot be traced as one scan (the module docstring's rules)."""


REMAT_POLICIES = {"remat": "dots_with_no_batch_dims_saveable", "remat-full": "nothing_saveable"}
"""Option -> the `jax.checkpoint_policies` policy each scanned layer is recomputed under: `remat`
keeps the outputs of the matmuls with weights (recomputing normalizations, activations and
attention's products); `remat-full` keeps only each layer's input."""


@dataclass
class Scanner:
    """What a trace needs to scan a run: torchax's environment, the recompute policy (None: keep
    what XLA keeps), and the count of runs scanned so far (rows and tests read it)."""

    env: Any
    remat: str | None = None
    runs_scanned: int = 0
    layers_scanned: int = 0


ACTIVE: contextvars.ContextVar[Scanner | None] = contextvars.ContextVar("scanner", default=None)


@contextlib.contextmanager
def scanning(scanner: Scanner) -> Iterator[Scanner]:
    """Layer stacks scan while a step is traced inside this context."""
    token = ACTIVE.set(scanner)
    try:
        yield scanner
    finally:
        ACTIVE.reset(token)


# --- the containers ---------------------------------------------------------------------------
class ScannedList(nn.ModuleList):
    """An `nn.ModuleList` whose iteration, while a step is traced, yields stand-ins that scan its
    runs of identical layers; everywhere else it is the same list."""

    def __iter__(self) -> Iterator[Any]:
        layers = list(self._modules.values())
        scanner = ACTIVE.get()
        if scanner is None:
            return iter(layers)
        return iter(_stand_ins(layers, scanner))


class ScannedSequential(nn.Sequential):
    """An `nn.Sequential` whose forward, while a step is traced, scans its runs of identical layers."""

    def forward(self, input: Any) -> Any:  # noqa: A002 - nn.Sequential's own name
        scanner = ACTIVE.get()
        if scanner is None:
            return super().forward(input)
        for layer in _stand_ins(list(self._modules.values()), scanner):
            input = layer(input)
        return input


def install(networks: dict[str, nn.Module]) -> int:
    """Make every ModuleList and Sequential of two or more children in `networks` scan while a
    step is traced (their class changes; their children, names and state_dict do not). Returns
    how many containers were changed."""
    changed = 0
    for network in networks.values():
        for module in [network, *network.modules()]:
            if type(module) is nn.ModuleList and len(module) >= MIN_RUN:
                module.__class__ = ScannedList
                changed += 1
            elif type(module) is nn.Sequential and len(module) >= MIN_RUN:
                module.__class__ = ScannedSequential
                changed += 1
    return changed


# --- the stand-ins ----------------------------------------------------------------------------
@dataclass
class _RunCall:
    """The scan of one run, made by its first stand-in's call, which the later stand-ins read."""

    arguments: tuple[Any, ...]
    keywords: dict[str, Any]
    outputs: list[Any] = field(default_factory=list)
    """Each layer's output, as the layer returns it (tensors sliced from the scan)."""


class _StandIn:
    """Layer `index` of a run as the model's loop sees it: its attributes are the layer's, and a
    call returns the layer's output from the run's scan."""

    def __init__(self, layers: list[nn.Module], index: int, scanner: Scanner, shared: dict[str, _RunCall]) -> None:
        self._layers, self._index, self._scanner, self._shared = layers, index, scanner, shared

    def __getattr__(self, name: str) -> Any:
        return getattr(self._layers[self._index], name)

    def __call__(self, *arguments: Any, **keywords: Any) -> Any:
        if self._index == 0:
            call = _RunCall(arguments, keywords)
            call.outputs = scan_run(self._layers, arguments, keywords, self._scanner)
            self._shared["call"] = call
            return call.outputs[0]
        call = self._shared.get("call")
        if call is None:
            raise ScanRefused("scan-layers: the model called a layer of a repeated run before the run's first layer; "
                              "train without the scan-layers option")
        _check_same_call(call, self._index, arguments, keywords)
        return call.outputs[self._index]


def _stand_ins(layers: list[nn.Module], scanner: Scanner) -> list[Any]:
    """The layers, with each run of identical consecutive ones replaced by its stand-ins."""
    result: list[Any] = []
    for run in _runs(layers):
        if len(run) < MIN_RUN:
            result.extend(run)
            continue
        shared: dict[str, _RunCall] = {}
        result.extend(_StandIn(run, index, scanner, shared) for index in range(len(run)))
    return result


def _runs(layers: list[nn.Module]) -> list[list[nn.Module]]:
    """Maximal runs of consecutive layers of one class with the same parameter and buffer shapes
    (a cheap first cut; the traced programs decide, in `scan_run`)."""
    runs: list[list[nn.Module]] = []
    for layer in layers:
        if runs and _shapes(runs[-1][0]) == _shapes(layer):
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return runs


def _shapes(layer: nn.Module) -> tuple:
    tensors = [*layer.named_parameters(), *layer.named_buffers()]
    return (type(layer), tuple((name, tuple(value.shape), value.dtype) for name, value in tensors))


def _check_same_call(call: _RunCall, index: int, arguments: tuple[Any, ...], keywords: dict[str, Any]) -> None:
    """Layer `index` must get the previous layer's hidden output and the run's other arguments."""
    previous_hidden = _hidden_of(call.outputs[index - 1], call.arguments[0])
    if not arguments or arguments[0] is not previous_hidden:
        raise ScanRefused("scan-layers: the model changes the hidden state between two layers of a repeated run (or "
                          "passes it by keyword), so the run cannot be one scan; train without the scan-layers option")
    same = len(arguments) == len(call.arguments) and keywords.keys() == call.keywords.keys() and all(
        _same_value(a, b) for a, b in zip(arguments[1:], call.arguments[1:])) and all(
        _same_value(keywords[key], call.keywords[key]) for key in keywords)
    if not same:
        raise ScanRefused("scan-layers: the model passes each layer of a repeated run other arguments, so the run cannot "
                          "be one scan; train without the scan-layers option")


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared are not the same
        return a is b


# --- the scan -----------------------------------------------------------------------------------
def _hidden_of(output: Any, like: Any) -> Any:
    """The output's tensor that continues the hidden state: the first of `like`'s shape and dtype."""
    for leaf in _pytree.tree_leaves(output):
        if isinstance(leaf, torch.Tensor) and tuple(leaf.shape) == tuple(like.shape) and leaf.dtype == like.dtype:
            return leaf
    return None


@contextlib.contextmanager
def _bound(layer: nn.Module, values: dict[str, Any]) -> Iterator[None]:
    """The layer's parameters and buffers hold `values` (arrays) while tracing; theirs after."""
    tensors = dict([*layer.named_parameters(), *layer.named_buffers()])
    saved = {name: tensors[name]._elem for name in values}
    for name, value in values.items():
        tensors[name]._elem = value
    try:
        yield
    finally:
        for name, value in saved.items():
            tensors[name]._elem = value


def _leaves_of(layer: nn.Module) -> dict[str, Any]:
    return {name: tensor._elem for name, tensor in [*layer.named_parameters(), *layer.named_buffers()]}


def _buffer_names(layer: nn.Module) -> list[str]:
    return [name for name, _ in layer.named_buffers()]


def _program_text(layer: nn.Module, arguments: tuple[Any, ...], keywords: dict[str, Any], scanner: Scanner) -> str:
    """The program of one layer's call, as a function of its own weights: two layers compute the
    same function exactly when these texts are equal."""
    import jax

    env = scanner.env
    key = env.param.prng
    buffers = {name: tensor._elem for name, tensor in layer.named_buffers()}

    def call(weights: dict[str, Any]) -> Any:
        with _bound(layer, weights):
            output = layer(*arguments, **keywords)
        return [leaf._elem for leaf in _pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor)]

    try:
        return str(jax.make_jaxpr(call)(_leaves_of(layer)))
    finally:
        env.param.prng = key
        for name, tensor in layer.named_buffers():
            tensor._elem = buffers[name]


def scan_run(layers: list[nn.Module], arguments: tuple[Any, ...], keywords: dict[str, Any], scanner: Scanner
             ) -> list[Any]:
    """Run `layers` one after another on `arguments` as one scan: each layer's output, as it
    returns it. Layers whose programs differ are run one by one instead."""
    import jax
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    if not arguments or not isinstance(arguments[0], torch.Tensor):
        raise ScanRefused("scan-layers: a layer of a repeated run gets no tensor as its first argument (the hidden "
                          "state); train without the scan-layers option")
    texts = [_program_text(layer, arguments, keywords, scanner) for layer in layers]
    if len(set(texts)) > 1:
        return _unscanned(layers, arguments, keywords)
    env, template = scanner.env, layers[0]
    hidden = arguments[0]
    names = list(_leaves_of(template))
    stacked = {name: jnp.stack([_leaves_of(layer)[name] for layer in layers]) for name in names}
    buffer_names = _buffer_names(template)
    structure: dict[str, Any] = {}

    def body(carry: tuple[Any, Any], weights: dict[str, Any]) -> tuple[tuple[Any, Any], Any]:
        state, key = carry
        env.param.prng = key
        with _bound(template, weights):
            output = template(Tensor(state, env), *arguments[1:], **keywords)
            buffers = {name: tensor._elem for name, tensor in template.named_buffers()}
        next_hidden = _hidden_of(output, hidden)
        if next_hidden is None:
            raise ScanRefused("scan-layers: a layer of a repeated run returns no tensor of its input's shape and dtype; "
                              "train without the scan-layers option")
        leaves, spec = _pytree.tree_flatten(output)
        structure["spec"] = spec
        structure["hidden_at"] = next(i for i, leaf in enumerate(leaves) if leaf is next_hidden)
        stacked_outputs = [leaf._elem if isinstance(leaf, torch.Tensor) else None for leaf in leaves]
        structure["constants"] = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
        return (next_hidden._elem, env.param.prng), (stacked_outputs, buffers)

    if scanner.remat:
        body = jax.checkpoint(body, prevent_cse=False, policy=getattr(jax.checkpoint_policies,
                                                                      REMAT_POLICIES[scanner.remat]))
    outer_key = env.param.prng
    (last, key), (per_layer, buffers) = jax.lax.scan(body, (hidden._elem, outer_key), stacked)
    env.param.prng = key
    for index, layer in enumerate(layers):
        for name, tensor in layer.named_buffers():
            if name in buffer_names:
                tensor._elem = buffers[name][index]
    scanner.runs_scanned += 1
    scanner.layers_scanned += len(layers)
    return [_output_of(structure, per_layer, index, last if index == len(layers) - 1 else None, env)
            for index in range(len(layers))]


def _output_of(structure: dict[str, Any], per_layer: list[Any], index: int, last: Any, env: Any) -> Any:
    """Layer `index`'s output, rebuilt from the scan's stacked outputs (the last layer's hidden
    state from the scan's carry, so a model that reads only that keeps no stack of them)."""
    from torchax.tensor import Tensor

    leaves = []
    for position, (stack, constant) in enumerate(zip(per_layer, structure["constants"])):
        if stack is None:
            leaves.append(constant)
        elif position == structure["hidden_at"] and last is not None:
            leaves.append(Tensor(last, env))
        else:
            leaves.append(Tensor(stack[index], env))
    return _pytree.tree_unflatten(leaves, structure["spec"])


def _unscanned(layers: list[nn.Module], arguments: tuple[Any, ...], keywords: dict[str, Any]) -> list[Any]:
    """The layers run one by one, each on the previous one's hidden output (a run whose programs
    differ). Later stand-ins then check their calls as for a scan."""
    outputs = []
    hidden = arguments[0]
    for layer in layers:
        output = layer(hidden, *arguments[1:], **keywords)
        outputs.append(output)
        hidden = _hidden_of(output, arguments[0])
        if hidden is None:
            raise ScanRefused("scan-layers: a layer of a repeated run returns no tensor of its input's shape and dtype; "
                              "train without the scan-layers option")
    return outputs
