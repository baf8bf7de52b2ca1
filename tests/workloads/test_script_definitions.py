"""Pieces defined in a script are rebuilt by another process from the script's definitions alone:
its imports, defs, classes and names set to values that call nothing. Nothing the script does at
its top level runs there, and a piece that needs what only running it sets is named in one line."""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import trainspeed
from trainspeed.workloads import get_workload
from trainspeed.workloads.pieces import LOADED_MAIN
from trainspeed.workloads.script_definitions import script_definitions

SCRIPT = '''
"""A user's training script: pieces at the top, then what it does, unguarded and guarded."""
from __future__ import annotations

import functools
import os
import shutil
import sys
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from collections.abc import Mapping
try:
    import no_such_optional_package as optional
except ImportError:
    optional = None

OUT = {out!r}
HIDDEN = 8
SIZES = (4, HIDDEN, 3)
if os.path.exists(OUT):
    shutil.rmtree(OUT)
with open({marker!r}, "a") as marker:
    marker.write("the top level ran\\n")
for size in SIZES:
    print("sizing", size)
features = torch.randn(16, 4)  # computed, and no piece reads it


@functools.cache
def activation() -> nn.Module:
    return nn.ReLU()


class Net(nn.Module):
    def __init__(self, hidden: int = HIDDEN) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(SIZES[0], hidden), activation(), nn.Linear(hidden, SIZES[-1]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def loss(outputs: torch.Tensor, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    assert optional is None
    return nn.functional.cross_entropy(outputs, batch["y"])


if __name__ == "__main__":
    sys.exit("the guarded block ran")
'''


@pytest.fixture
def fresh_script_module():
    """Each test loads its own script: none is left loaded for the next."""
    sys.modules.pop(LOADED_MAIN, None)
    yield
    sys.modules.pop(LOADED_MAIN, None)


def reference_of_script(script: Path, **pieces: str) -> str:
    """The reference `workload_from` writes for pieces of `script` run as `__main__`."""
    example = trainspeed.workload_from(model=torch.nn.Identity, loss=torch.nn.functional.mse_loss,
                                       optimizer=torch.optim.SGD, batch={"x": torch.randn(8, 4),
                                                                          "y": torch.randint(0, 3, (8,))})
    description = json.loads(example.reference.removeprefix("python:"))
    description.update({piece: f"__main__:{name}" for piece, name in pieces.items()}, main={"file": str(script)})
    description["modules"] = ["__main__"]
    return "python:" + json.dumps(description)


def test_another_process_runs_a_script_s_definitions_and_nothing_it_does(tmp_path, fresh_script_module):
    out, marker = tmp_path / "run", tmp_path / "marker.txt"
    out.mkdir()
    (out / "train_config.json").write_text("{}")
    script = tmp_path / "my_training.py"
    script.write_text(SCRIPT.format(out=str(out), marker=str(marker)))
    workload = get_workload(reference_of_script(script, model="Net", loss="loss"))
    trainable = workload.build("default", seed=0)
    trainable.setup_optimizers()
    batch = workload.synthetic_batch("default", 4, torch.Generator().manual_seed(0))
    assert math.isfinite(float(trainable.train_step(batch)))
    assert (out / "train_config.json").read_text() == "{}" and not marker.exists()  # nothing it does ran
    assert workload.pieces.model.__module__ == LOADED_MAIN


def test_what_a_piece_needs_from_the_script_is_there_where_it_is_defined(tmp_path):
    script = tmp_path / "my_training.py"
    script.write_text(SCRIPT.format(out=str(tmp_path / "run"), marker=str(tmp_path / "marker.txt")))
    definitions = script_definitions(script)
    assert {name: definitions.why_unavailable(name) for name in ("Net", "loss", "activation", "HIDDEN")} == {
        "Net": None, "loss": None, "activation": None, "HIDDEN": None}


LEFT_OUT = ("a statement other processes do not run (they run only a script's imports, defs, classes and names set "
            "to values that call nothing)")


@pytest.mark.parametrize("source, name, said", [
    ("import torch\nWEIGHTS = torch.ones(3)\ndef loss(outputs):\n    return outputs * WEIGHTS\n", "loss",
     f"needs WEIGHTS, set by line 2 of script.py (`WEIGHTS = torch.ones(3)`), {LEFT_OUT}: set it inside the "
     "function that uses it, or import the pieces from a module"),
    ("import os\nSCALE = float(os.environ['SCALE'])\ndef scaled(x):\n    return x * SCALE\n"
     "def loss(outputs):\n    return scaled(outputs)\n", "loss",
     f"needs SCALE (through scaled), set by line 2 of script.py (`SCALE = float(os.environ['SCALE'])`), {LEFT_OUT}"),
    ("HIDDEN = 8\nimport os\nHIDDEN = int(os.environ.get('HIDDEN', 8))\ndef width():\n    return HIDDEN\n", "width",
     "needs HIDDEN, set by line 3 of script.py (`HIDDEN = int(os.environ.get('HIDDEN', 8))`)"),
    ("if __name__ == '__main__':\n    def model():\n        return None\n", "model",
     f"is set by line 1 of script.py (`if __name__ == '__main__':`), {LEFT_OUT}: define it at the top level, or "
     "import it from a module"),
    ("for width in (8, 16):\n    pass\ndef model():\n    return width\n", "model",
     "needs width, set by line 1 of script.py (`for width in (8, 16):`)"),
    ("class Config:\n    pass\nConfig.width = 8\nmodel = Config\n", "model",
     "needs Config, set by line 3 of script.py (`Config.width = 8`)"),
    ("import torch\ntorch.backends.cudnn.benchmark = True\ndef model():\n    return torch.nn.Linear(2, 2)\n", "model",
     None),
    ("def model():\n    return None\n", "loss", "is not defined at the top level of script.py"),
], ids=["computed-value", "through-a-helper", "rebound-by-a-call", "under-the-main-guard", "loop-variable",
        "attribute-of-its-own-class", "attribute-of-a-module", "not-there"])
def test_what_only_running_the_script_sets_is_said_in_one_line(tmp_path, source, name, said):
    script = tmp_path / "script.py"
    script.write_text(source)
    why = script_definitions(script).why_unavailable(name)
    assert (why is None) if said is None else (said in why and "\n" not in why), why


def test_annotations_left_unevaluated_need_nothing(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent('''
        from __future__ import annotations
        import torch
        Batch = dict[str, torch.Tensor] if torch.cuda.is_available() else dict
        def loss(outputs: torch.Tensor, batch: Batch) -> torch.Tensor:
            return outputs.sum()
    '''))
    assert script_definitions(script).why_unavailable("loss") is None
