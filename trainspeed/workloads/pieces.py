"""A workload made of plain PyTorch pieces (`trainspeed.workload_from`): a model factory, a loss,
an optimizer factory and an example batch (or a function that makes batches), with validation
metrics and a real dataset where given.

The result is an ordinary workload: one size (`default`), a Trainable whose step is the model on
the batch's first item, the loss of (outputs, batch), backward and the optimizer's step; synthetic
batches of the example's dtypes, per-sample shapes and value ranges; FLOPs per sample counted by
torch's formulas on one training step, as for a library's model (`named/counting.py`).

Every command names a workload by text (`--workload`), and so does every process it starts. Such a
workload has two names (`PiecesWorkload.reference`):

- `python:{...}`, where every piece can be imported by another process: the JSON names each piece
  by its module and qualified name (a `functools.partial` with its plain arguments; the example
  batch as its layout and value ranges), the folders those modules were found in, and the script
  that ran as `__main__` where the pieces live there. A process that did not make it (a rank, a
  study's command, a server) rebuilds it from that text. Of such a script it runs the definitions
  alone, never what the script does (`script_definitions`): its imports, defs, classes and names
  set to values that call nothing; a piece that needs anything else keeps the workload in the
  process that made it, which says so before it starts any other.
- `python:NAME`, where a piece cannot be imported (a lambda, a function defined inside another or
  in a notebook cell): the workload exists only in the process that made it, which finds it by
  that name (`IN_PROCESS`); a command that would start other processes says so in one line.

In the process that made it, either name finds the very object the user holds.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import torch
from torch import nn

from trainspeed.data.base import Batch, LoaderConfig
from trainspeed.data.mapped import MappedLoader
from trainspeed.errors import UsageError
from trainspeed.user_json import JSONRefused, loads
from trainspeed.workloads.base import Trainable
from trainspeed.workloads.batches import LOADER_KEYS
from trainspeed.workloads.named.counting import CountedFlops
from trainspeed.workloads.script_definitions import script_definitions

PREFIX = "python:"
SIZE = "default"
MAIN_MODULE = "__main__"
LOADED_MAIN = "__trainspeed_main__"
"""The name the definitions of a script that ran as `__main__` are loaded under in another process."""
SAMPLE_BATCH = 2
"""Samples of the batch a batch function is asked for once, to learn the batch's structure."""
PIECES = ("model", "loss", "optimizer", "batch", "metrics", "data", "forward")

IN_PROCESS: dict[str, "PiecesWorkload"] = {}
"""Every workload `workload_from` made in this process, by its `reference`."""


# --- the batch -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchStructure:
    """How a user's batch is laid out: one tensor, a tuple or list of tensors, or a dict of them.
    The workload protocol's batch is a flat dict of tensors; a tuple's items are keyed "0", "1" ..."""

    kind: str
    keys: tuple[str, ...]

    @classmethod
    def of(cls, batch: Any, what: str) -> "BatchStructure":
        if isinstance(batch, torch.Tensor):
            return cls("tensor", ("input",))
        if isinstance(batch, (tuple, list)) and batch and all(isinstance(t, torch.Tensor) for t in batch):
            return cls(type(batch).__name__, tuple(str(index) for index in range(len(batch))))
        if (isinstance(batch, Mapping) and batch and all(isinstance(k, str) for k in batch)
                and all(isinstance(t, torch.Tensor) for t in batch.values())):
            return cls("dict", tuple(batch))
        raise UsageError(f"{what} is a {_described(batch)}; give a tensor, a tuple or list of tensors, or a dict of "
                         "tensors keyed by name, each with the samples along its first dimension")

    def flatten(self, batch: Any) -> Batch:
        """The protocol's flat dict of a batch of this structure (a loader's sample ids kept)."""
        expected = f"the example batch was a {self.kind} ({', '.join(self.keys)})"
        if self.kind == "tensor":
            if not isinstance(batch, torch.Tensor):
                raise UsageError(f"a batch is a {_described(batch)}, but {expected}")
            return {"input": batch}
        if self.kind in ("tuple", "list"):
            if not isinstance(batch, (tuple, list)) or len(batch) != len(self.keys):
                raise UsageError(f"a batch is a {_described(batch)}"
                                 f"{f' of {len(batch)}' if isinstance(batch, (tuple, list)) else ''}, but {expected}")
            return dict(zip(self.keys, batch))
        if not isinstance(batch, Mapping):
            raise UsageError(f"a batch is a {_described(batch)}, but {expected}")
        missing = [key for key in self.keys if key not in batch]
        if missing:
            raise UsageError(f"a batch lacks {', '.join(missing)}: {expected}")
        return {key: batch[key] for key in (*self.keys, *(k for k in LOADER_KEYS if k in batch))}

    def restore(self, batch: Batch) -> Any:
        """The user's batch again, without what the protocol or a loader added."""
        if self.kind == "tensor":
            return batch["input"]
        if self.kind in ("tuple", "list"):
            items = [batch[key] for key in self.keys]
            return tuple(items) if self.kind == "tuple" else items
        return {key: batch[key] for key in self.keys}

    def first(self, batch: Any) -> torch.Tensor:
        """The model's input by default: the tensor, the first item, the first key's value."""
        if self.kind == "tensor":
            return batch
        if self.kind in ("tuple", "list"):
            return batch[0]
        return batch[self.keys[0]]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "keys": list(self.keys)}


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of an example batch: dtype, per-sample shape and the values it holds (integers
    drawn uniformly from its range, floats from a normal of its mean and standard deviation)."""

    dtype: str
    shape: tuple[int, ...]
    low: float
    high: float
    mean: float = 0.0
    std: float = 1.0

    @classmethod
    def of(cls, tensor: torch.Tensor, key: str) -> "TensorSpec":
        dtype = str(tensor.dtype).removeprefix("torch.")
        if tensor.dim() == 0:
            raise UsageError(f"batch= example: {key!r} is a scalar; every tensor has the samples along its first dimension")
        if tensor.is_complex() or tensor.dtype in (torch.quint8, torch.qint8, torch.qint32):
            raise UsageError(f"batch= example: {key!r} is {dtype}; give real numbers, or a batch function")
        values = tensor.detach().to("cpu", torch.float64) if tensor.numel() else torch.zeros(1, dtype=torch.float64)
        low, high = float(values.min()), float(values.max())
        mean = float(values.mean())
        std = float(values.std()) if values.numel() > 1 else 0.0
        if not all(math.isfinite(v) for v in (low, high, mean, std)):
            raise UsageError(f"batch= example: {key!r} holds nan or infinite values")
        if not tensor.is_floating_point():
            return cls(dtype, tuple(tensor.shape[1:]), int(low), int(high), 0.0, 0.0)
        return cls(dtype, tuple(tensor.shape[1:]), *(float(f"{value:.6g}") for value in (low, high, mean, std)))

    def make(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        dtype = getattr(torch, self.dtype)
        shape = (batch_size, *self.shape)
        if dtype == torch.bool:
            return torch.randint(int(self.low), int(self.high) + 1, shape, generator=generator).bool()
        if not dtype.is_floating_point:
            return torch.randint(int(self.low), int(self.high) + 1, shape, generator=generator, dtype=dtype)
        return (torch.randn(shape, generator=generator) * self.std + self.mean).to(dtype)

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "low": self.low, "high": self.high,
                "mean": self.mean, "std": self.std}


@dataclass(frozen=True)
class ExampleBatch:
    """A batch given as an example: synthetic batches have its structure, dtypes, shapes and ranges."""

    structure: BatchStructure
    tensors: dict[str, TensorSpec]

    @classmethod
    def of(cls, batch: Any) -> "ExampleBatch":
        structure = BatchStructure.of(batch, "batch=")
        flat = structure.flatten(batch)
        sizes = {tensor.shape[0] if tensor.dim() else None for tensor in flat.values()}
        if len(sizes) != 1:
            raise UsageError(f"batch= example: its tensors hold different numbers of samples "
                             f"({', '.join(f'{key} {tuple(t.shape)}' for key, t in flat.items())}); the first "
                             "dimension of each is the batch")
        return cls(structure, {key: TensorSpec.of(tensor, key) for key, tensor in flat.items()})

    @classmethod
    def from_json(cls, spec: dict[str, Any]) -> "ExampleBatch":
        structure = BatchStructure(spec["structure"]["kind"], tuple(spec["structure"]["keys"]))
        tensors = {key: TensorSpec(value["dtype"], tuple(value["shape"]), value["low"], value["high"], value["mean"],
                                   value["std"]) for key, value in spec["tensors"].items()}
        return cls(structure, tensors)

    def make(self, batch_size: int, generator: torch.Generator) -> Batch:
        return {key: spec.make(batch_size, generator) for key, spec in self.tensors.items()}

    def to_json(self) -> dict[str, Any]:
        return {"structure": self.structure.to_json(),
                "tensors": {key: spec.to_json() for key, spec in self.tensors.items()}}


# --- naming a piece so that another process finds it ----------------------------------------------

@dataclass(frozen=True)
class Named:
    """A piece as another process finds it: `module:qualname`, with a partial's plain arguments."""

    text: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> Any:
        if not self.args and not self.kwargs:
            return self.text
        return {"call": self.text, "args": list(self.args), "kwargs": dict(self.kwargs)}


@dataclass
class Naming:
    """Finds the importable name of each piece, and says why one has none."""

    modules: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    in_script: list[tuple[str, str]] = field(default_factory=list)
    """(piece, qualified name) of each piece defined in the script that runs as `__main__`."""

    def name(self, piece: str, value: Any) -> Named | None:
        if isinstance(value, functools.partial):
            inner = self.name(piece, value.func)
            if inner is None:
                return None
            if not _plain(list(value.args)) or not _plain(dict(value.keywords)):
                self.problems.append(f"{piece}= is a partial whose arguments are not plain numbers, text or lists")
                return None
            return Named(inner.text, tuple(value.args), tuple(sorted(value.keywords.items())))
        module_name = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if not isinstance(module_name, str) or not isinstance(qualname, str):
            self.problems.append(f"{piece}= is a {_described(value)}, which has no importable name")
            return None
        if "<lambda>" in qualname:
            self.problems.append(f"{piece}= is a lambda")
            return None
        if "<locals>" in qualname:
            self.problems.append(f"{piece}= ({qualname.split('.<locals>')[0]}.<locals>...) is defined inside a function")
            return None
        module = sys.modules.get(module_name)
        if module is None or _attribute(module, qualname) is not value:
            self.problems.append(f"{piece}= ({module_name}.{qualname}) is not what its module holds under that name")
            return None
        if module_name == MAIN_MODULE and _main_source(module) is None:
            self.problems.append(f"{piece}= ({qualname}) is defined in a notebook cell or an interactive session")
            return None
        if module_name == MAIN_MODULE:
            self.in_script.append((piece, qualname))
        self.modules.add(module_name)
        return Named(f"{module_name}:{qualname}")


def _plain(value: Any) -> bool:
    if isinstance(value, (bool, int, str)) or value is None:
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list) or isinstance(value, tuple):
        return all(_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and _plain(item) for key, item in value.items())
    return False


def _attribute(owner: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        owner = getattr(owner, part, None)
        if owner is None:
            return None
    return owner


def _described(value: Any) -> str:
    return type(value).__name__ if not isinstance(value, type) else f"class {value.__name__}"


def _main_source(module: Any) -> dict[str, str] | None:
    """How another process loads the script that runs as `__main__`: its module name where it
    was run with `python -m`, else its file; None for a notebook or an interactive session."""
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.name and spec.name != MAIN_MODULE:
        return {"module": spec.name}
    path = getattr(module, "__file__", None)
    if isinstance(path, str) and path.endswith(".py") and Path(path).is_file():
        return {"file": str(Path(path).resolve())}
    return None


def _import_root(module_name: str) -> str | None:
    """The folder another process must have on its path to import `module_name`, where the
    module is not installed (site-packages, the standard library) and not trainspeed's own."""
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not isinstance(path, str):
        return None
    root = Path(path).resolve().parent
    depth = module_name.count(".") + (1 if Path(path).name == "__init__.py" else 0)
    for _ in range(depth):
        root = root.parent
    installed = {Path(p).resolve() for key in ("purelib", "platlib", "stdlib", "platstdlib")
                 if (p := sysconfig.get_paths().get(key))}
    if root in installed or module_name.split(".")[0] == "trainspeed":
        return None
    return str(root)


# --- the workload ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pieces:
    model: Callable[[], nn.Module]
    loss: Callable[[Any, Any], torch.Tensor]
    optimizer: Callable[[Any], torch.optim.Optimizer]
    batch: ExampleBatch | Callable[[int, torch.Generator], Any]
    structure: BatchStructure
    metrics: Callable[[Any, Any], Mapping[str, Any]] | None = None
    data: Callable[[str, LoaderConfig], Any] | None = None
    forward: Callable[[nn.Module, Any], Any] | None = None


class PiecesTrainable(Trainable):
    def __init__(self, model: nn.Module, pieces: Pieces) -> None:
        super().__init__({"model": model})
        self.pieces = pieces

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"model": self.pieces.optimizer(self.networks["model"].parameters())}

    def _outputs(self, network: nn.Module, batch: Any) -> Any:
        if self.pieces.forward is not None:
            return self.pieces.forward(network, batch)
        return network(self.pieces.structure.first(batch))

    def train_step(self, batch: Batch) -> torch.Tensor:
        user_batch = self.pieces.structure.restore(batch)
        loss = self.pieces.loss(self._outputs(self.wrapped["model"], user_batch), user_batch)
        loss.backward()
        self.optimizers["model"].step()
        self.optimizers["model"].zero_grad(set_to_none=True)
        return loss.detach()

    def eval_metrics(self, batch: Batch) -> dict[str, torch.Tensor]:
        """The loss and every metric (each a mean over the batch), weighted by the batch's samples,
        so that their sums over batches and ranks divide back into means of the whole split."""
        user_batch = self.pieces.structure.restore(batch)
        outputs = self._outputs(self.networks["model"], user_batch)
        samples = next(iter(batch.values())).shape[0]
        device = next(iter(batch.values())).device
        values = {"loss": self.pieces.loss(outputs, user_batch)}
        if self.pieces.metrics is not None:
            values.update(self.pieces.metrics(outputs, user_batch))
        sums = {name: torch.as_tensor(value, device=device).detach().float() * samples for name, value in values.items()}
        return {**sums, "samples": torch.tensor(float(samples), device=device)}

    def summarize_eval(self, totals: dict[str, torch.Tensor]) -> dict[str, float]:
        samples = float(totals["samples"])
        return {name: float(total) / samples for name, total in totals.items() if name != "samples"}


class PiecesWorkload(CountedFlops):
    """A workload of plain PyTorch pieces; see the module's docstring and `workload_from`."""

    sizes = (SIZE,)
    default_size = SIZE

    def __init__(self, pieces: Pieces, description: dict[str, Any], problems: list[str]) -> None:
        self.name: str = description["name"]
        self.pieces = pieces
        self.reference_batch: int | None = description.get("reference_batch")
        self.description = description
        """What another process rebuilds it from (`reference`), and what defines it."""
        self.unportable = problems
        """Why another process cannot rebuild it (empty: it can)."""
        self.local_name = PREFIX + self.name
        """`python:NAME`: how this process names it (`_register`)."""
        model = description.get("model")
        named = model if isinstance(model, str) else model.get("call", "") if isinstance(model, dict) else ""
        self.definition_module = named.partition(":")[0] or "python"
        """Where its model is defined, as identities record a workload's module."""
        if pieces.data is not None:
            self.open_dataset = self._open_dataset

    @property
    def main_source(self) -> dict[str, str] | None:
        """The script (`__main__`) other processes load to rebuild it, where its pieces live there."""
        return self.description.get("main")

    @property
    def portable(self) -> bool:
        return not self.unportable

    @property
    def reference(self) -> str:
        """What `--workload` names it by: `python:{...}` where another process can rebuild it,
        else `python:NAME` (this process only)."""
        if self.portable:
            return PREFIX + json.dumps(self.description, sort_keys=True, separators=(",", ":"))
        return self.local_name

    def build(self, size: str, seed: int = 0) -> PiecesTrainable:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = self.pieces.model()
        if not isinstance(model, nn.Module):
            raise UsageError(f"--workload {self.name}: model= returned a {_described(model)}, not an nn.Module")
        return PiecesTrainable(model, self.pieces)

    def synthetic_batch(self, size: str, batch_size: int, generator: torch.Generator) -> Batch:
        if isinstance(self.pieces.batch, ExampleBatch):
            return self.pieces.batch.make(batch_size, generator)
        return self.pieces.structure.flatten(self.pieces.batch(batch_size, generator))

    def _open_dataset(self, path: str | os.PathLike, size: str, config: LoaderConfig) -> MappedLoader:
        assert self.pieces.data is not None
        return MappedLoader(self.pieces.data(str(path), config), self.pieces.structure.flatten)

    def definition_sha256(self) -> str:
        """sha256 of what defines it: each piece's name (its source where it has no module file),
        the source files of the modules that hold them, the example batch and this adapter; never
        a path, so a server with the same files elsewhere holds the same definition."""
        digest = hashlib.sha256()
        described = {key: value for key, value in self.description.items() if key not in ("paths", "main")}
        for text in (json.dumps(described, sort_keys=True), Path(__file__).read_text()):
            digest.update(len(text).to_bytes(8, "little") + text.encode())
        for module_name in self.description.get("modules", []):
            content = _module_source(module_name, self.main_source)
            digest.update(len(content).to_bytes(8, "little") + content)
        for piece in self.unportable_pieces():
            text = _object_source(piece)
            digest.update(len(text).to_bytes(8, "little") + text.encode())
        return digest.hexdigest()

    def unportable_pieces(self) -> list[Any]:
        return [getattr(self.pieces, piece) for piece in PIECES
                if self.description.get(piece, "") is None and getattr(self.pieces, piece, None) is not None]


def _module_source(module_name: str, main_source: dict[str, str] | None) -> bytes:
    if module_name == MAIN_MODULE:
        module = sys.modules.get(LOADED_MAIN) or sys.modules.get(MAIN_MODULE)
        if main_source is not None and "module" in main_source:
            module = sys.modules.get(main_source["module"], module)
    else:
        module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    try:
        return Path(path).read_bytes() if isinstance(path, str) else module_name.encode()
    except OSError:
        return module_name.encode()


def _object_source(value: Any) -> str:
    """A piece's own source where it has one (a notebook cell's function), else its name."""
    target = value.func if isinstance(value, functools.partial) else value
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        return repr(code.co_code) if code is not None else repr(getattr(target, "__qualname__", type(target).__name__))


def _default_name(model: Any) -> str:
    name = getattr(model.func if isinstance(model, functools.partial) else model, "__name__", "")
    return name if name and name != "<lambda>" and name.isprintable() else "model"


def _check_callable(piece: str, value: Any, takes: str, required: bool = True) -> None:
    if value is None and not required:
        return
    if isinstance(value, nn.Module) and piece == "model":
        raise UsageError(f"model= is a built {type(value).__name__}; give a factory that builds a fresh one (each "
                         "target and rank builds its own, from the seed): the class, or a function returning it")
    if isinstance(value, torch.optim.Optimizer):
        raise UsageError(f"optimizer= is a built {type(value).__name__}; give a factory of the parameters, e.g. "
                         "functools.partial(torch.optim.SGD, lr=0.1)")
    if not callable(value):
        raise UsageError(f"{piece}= is a {_described(value)}; give a function of {takes}")


def workload_from(model: Callable[[], nn.Module], loss: Callable[[Any, Any], torch.Tensor],
                  batch: Any, optimizer: Callable[[Any], torch.optim.Optimizer], *,
                  metrics: Callable[[Any, Any], Mapping[str, Any]] | None = None,
                  data: Callable[[str, LoaderConfig], Any] | None = None,
                  forward: Callable[[nn.Module, Any], Any] | None = None,
                  name: str | None = None, reference_batch: int | None = None) -> PiecesWorkload:
    """A workload of plain PyTorch pieces, which every command takes (`workload=`).

    `model`: a factory of a fresh nn.Module (a class, `torchvision.models.resnet18`, a function);
    `loss(outputs, batch)`: the scalar loss; `optimizer(parameters)`: a torch optimizer
    (`functools.partial(torch.optim.SGD, lr=0.1)`); `batch`: an example batch (a tensor, a tuple or
    list of tensors, or a dict of them, samples first), whose dtypes, shapes and value ranges the
    synthetic batches take, or a function of (batch_size, generator) that makes one.
    `metrics(outputs, batch)`: more validation metrics, each a mean over the batch (validation
    always reports the loss); `data(path, loader_config)`: a loader of real batches for
    `train(data=PATH)` (`trainspeed.data.open_dataset` for a dataset of `trainspeed data
    from-arrays`), each batch of the example's structure; `forward(model, batch)`: the outputs,
    where they are not the model of the batch's first item (a tensor batch: the tensor; a dict: its
    first key's value). `reference_batch`: the global batch the optimizer's learning rate was
    tuned at, from which `train` scales it by `lr_scaling`; None (the default) trains with it as
    set at every batch."""
    _check_callable("model", model, "no arguments that returns an nn.Module")
    _check_callable("loss", loss, "(outputs, batch) that returns the scalar loss")
    _check_callable("optimizer", optimizer, "the parameters that returns a torch optimizer")
    _check_callable("metrics", metrics, "(outputs, batch) that returns a dict of means", required=False)
    _check_callable("data", data, "(path, loader_config) that returns a loader", required=False)
    _check_callable("forward", forward, "(model, batch) that returns the outputs", required=False)
    if reference_batch is not None and (isinstance(reference_batch, bool) or not isinstance(reference_batch, int)
                                        or reference_batch < 1):
        raise UsageError(f"reference_batch={reference_batch!r}: give a positive whole number, or None")
    if name is not None and (not isinstance(name, str) or not name.strip() or not name.isprintable()):
        raise UsageError(f"name={name!r}: give a short printable name for the rows")
    example = None if callable(batch) else ExampleBatch.of(batch)
    naming = Naming()
    description: dict[str, Any] = {"name": name or _default_name(model), "reference_batch": reference_batch}
    given = {"model": model, "loss": loss, "optimizer": optimizer, "metrics": metrics, "data": data, "forward": forward}
    for piece, value in given.items():
        if value is not None:
            named = naming.name(piece, value)
            description[piece] = None if named is None else named.to_json()
    if example is not None:
        description["batch"] = {"example": example.to_json()}
    else:
        named = naming.name("batch", batch)
        description["batch"] = None if named is None else named.to_json()
    main = sys.modules.get(MAIN_MODULE)
    main_source = _main_source(main) if MAIN_MODULE in naming.modules and main is not None else None
    roots = {root for module in naming.modules if module != MAIN_MODULE if (root := _import_root(module)) is not None}
    if main_source is not None:
        description["main"] = main_source
        naming.problems += _script_problems(getattr(main, "__file__", None), naming.in_script)
        if "file" in main_source:
            roots.add(str(Path(main_source["file"]).parent))
    description["modules"] = sorted(naming.modules)
    description["paths"] = sorted(roots)
    pieces = _pieces(model, loss, optimizer, example if example is not None else batch, metrics, data, forward)
    return _register(PiecesWorkload(pieces, description, naming.problems))


def _script_problems(script: str | None, in_script: list[tuple[str, str]]) -> list[str]:
    """Why another process would not find a piece among the script's definitions, the only part of
    the script it runs (`script_definitions`): one line per such piece."""
    if not isinstance(script, str):
        return [f"{piece}= ({qualname}) is defined in a script whose file Python does not name"
                for piece, qualname in in_script]
    try:
        definitions = script_definitions(script)
    except (OSError, SyntaxError, ValueError) as error:
        return [f"its script {script} cannot be read ({type(error).__name__}: {str(error).splitlines()[0]})"]
    problems = []
    for piece, qualname in in_script:
        why = definitions.why_unavailable(qualname.split(".")[0])
        if why is not None:
            problems.append(f"{piece}= ({qualname}) {why}")
    return problems


def _pieces(model: Any, loss: Any, optimizer: Any, batch: Any, metrics: Any, data: Any, forward: Any) -> Pieces:
    if isinstance(batch, ExampleBatch):
        structure = batch.structure
    else:  # a batch function: its structure from one small batch
        made = batch(SAMPLE_BATCH, torch.Generator().manual_seed(0))
        structure = BatchStructure.of(made, f"batch(batch_size={SAMPLE_BATCH}, generator) returned a batch that")
    return Pieces(model, loss, optimizer, batch, structure, metrics, data, forward)


def _register(workload: PiecesWorkload) -> PiecesWorkload:
    """This process finds it by `python:NAME` (numbered where a cell run again made another of the
    same name, so the old object keeps its own) and, where it is portable, by its JSON reference."""
    candidate, number = PREFIX + workload.name, 1
    while candidate in IN_PROCESS:
        number += 1
        candidate = f"{PREFIX}{workload.name}-{number}"
    workload.local_name = candidate
    IN_PROCESS[candidate] = workload
    if workload.portable:
        IN_PROCESS[workload.reference] = workload
    return workload


# --- rebuilding it in another process ---------------------------------------------------------------

def workload_of_reference(reference: str) -> PiecesWorkload:
    """The workload `reference` names: this process's own where it made it, else rebuilt from the
    importable names in the reference."""
    if reference in IN_PROCESS:
        return IN_PROCESS[reference]
    text = reference[len(PREFIX):]
    if not text.startswith("{"):
        raise UsageError(f"--workload {reference}: no workload of that name in this process; a workload made by "
                         "trainspeed.workload_from from pieces that cannot be imported (a lambda, a notebook cell) "
                         "exists only in the Python process that made it, so run the command there (nproc=1)")
    try:
        description = loads(text)
    except JSONRefused as error:
        raise UsageError(f"--workload {PREFIX}...: not the JSON trainspeed.workload_from writes ({error})") from None
    if not isinstance(description, dict) or not isinstance(description.get("name"), str):
        raise UsageError(f"--workload {PREFIX}...: not the JSON trainspeed.workload_from writes (no name)")
    for path in description.get("paths", []):  # after what is installed, so they shadow none of it
        if isinstance(path, str) and path not in sys.path:
            sys.path.append(path)
    batch_spec = description.get("batch")
    batch = (ExampleBatch.from_json(batch_spec["example"]) if isinstance(batch_spec, dict) and "example" in batch_spec
             else _resolve(description, "batch"))
    resolved = {piece: _resolve(description, piece) for piece in PIECES if piece != "batch"}
    pieces = _pieces(resolved["model"], resolved["loss"], resolved["optimizer"], batch, resolved["metrics"],
                     resolved["data"], resolved["forward"])
    workload = PiecesWorkload(pieces, description, [])
    workload.local_name = PREFIX + workload.name
    IN_PROCESS[reference] = workload
    return workload


def _resolve(description: dict[str, Any], piece: str) -> Any:
    entry = description.get(piece)
    if entry is None:
        if piece in ("model", "loss", "optimizer", "batch"):
            raise UsageError(f"--workload {PREFIX}...: its {piece}= cannot be imported by another process")
        return None
    text, args, kwargs = (entry, [], {}) if isinstance(entry, str) else (entry["call"], entry["args"], entry["kwargs"])
    module_name, _, qualname = text.partition(":")
    module = _main_module(description) if module_name == MAIN_MODULE else _import(module_name)
    value = _attribute(module, qualname)
    if value is None:
        if module_name == MAIN_MODULE:
            raise UsageError(f"--workload {PREFIX}...: the script's definitions hold no {qualname} (for {piece}=); "
                             "define it at the script's top level by a def, a class or an import")
        raise UsageError(f"--workload {PREFIX}...: {module_name} defines no {qualname} (for {piece}=)")
    return functools.partial(value, *args, **kwargs) if args or kwargs else value


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 - whatever the user's module raises is told in one line
        raise UsageError(f"--workload {PREFIX}...: cannot import {module_name!r} ({type(error).__name__}: "
                         f"{str(error).strip().splitlines()[0] if str(error).strip() else ''})") from None


def _main_module(description: dict[str, Any]) -> Any:
    """The definitions of the script that made the workload (`script_definitions`: never what the
    script does), loaded once per process under another name than `__main__`."""
    source = description.get("main") or {}
    if "module" in source:  # run as `python -m package.script`: its own name, so its relative imports work
        name = source["module"]
        spec = importlib.util.find_spec(name) if name not in sys.modules else None
        where = name
    else:
        name = LOADED_MAIN
        path = source.get("file")
        if name not in sys.modules and (not isinstance(path, str) or not Path(path).is_file()):
            raise UsageError(f"--workload {PREFIX}...: the script that defines its pieces ({path}) is not here")
        spec = importlib.util.spec_from_file_location(name, path) if name not in sys.modules else None
        where = str(path)
    if name in sys.modules:
        return sys.modules[name]
    if spec is None or not isinstance(spec.origin, str) or not spec.origin.endswith(".py"):
        raise UsageError(f"--workload {PREFIX}...: cannot find {where}, the script that defines its pieces")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import would: a dataclass of the script looks its module up there
    try:
        exec(script_definitions(spec.origin).code(), module.__dict__)
    except UsageError:
        sys.modules.pop(name, None)
        raise
    except Exception as error:  # noqa: BLE001 - whatever the script's definitions raise is told in one line
        sys.modules.pop(name, None)
        raise UsageError(f"--workload {PREFIX}...: loading {where} raised {type(error).__name__}: "
                         f"{str(error).strip().splitlines()[0] if str(error).strip() else ''}") from None
    return module
