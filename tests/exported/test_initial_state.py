"""`trainspeed export --initial-state drawn`: the large parameters do not travel. The manifest says
how each state leaf is made where the step runs: a floating parameter of 4,096 elements or more is
drawn there with its recorded mean and standard deviation ("normal"), or filled with its one value
("constant"); an optimizer's fresh moments and step counts are "zeros"; the rest (biases, norms'
scales, the dropout key, integer tensors) is read from state.npz ("file"), which holds nothing
else. `ExportedSteps.initial_state()` makes leaves of the manifest's shapes and dtypes, the drawn
ones with about the recorded mean and std, and the exported step trains from them.

The folder is exported once for the module (Mahjong tiny, for the CPU, one batch size); a second,
smaller export covers what Mahjong's tiny network lacks: a large constant parameter, a large
integer buffer.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.cli import main
from trainspeed.exported.stored_arrays import restored
from trainspeed.targets.jaxjit import JaxTarget

pytestmark = [
    pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason())),
    # JAX without x64 holds Mahjong's int64 index tensors as int32 (their values fit), and says so.
    pytest.mark.filterwarnings("ignore:Explicitly requested dtype int64"),
]

DRAWN_FROM = 4096
"""`trainspeed.exported.write.DRAWN_FROM_ELEMENTS`, as the command's help states it."""
BATCH = 8
EXPORT = ["export", "--target", "jax:jit:fp32", "--platform", "cpu", "--batch-sizes", str(BATCH)]
MAHJONG = ["--workload", "mahjong", "--size", "tiny"]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("drawn") / "mahjong-tiny"
    assert main([*EXPORT, *MAHJONG, "--initial-state", "drawn", "--out", str(folder)]) == 0
    return folder


def manifest_of(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def expected_source(leaf: dict) -> set[str]:
    """Where a leaf of a drawn export may come from, by its name, size and dtype alone."""
    if leaf["name"].startswith("optim/"):
        return {"zeros"}
    import jax.numpy as jnp

    if math.prod(leaf["shape"]) >= DRAWN_FROM and jnp.issubdtype(jnp.dtype(leaf["dtype"]), jnp.floating):
        return {"normal", "constant"}
    return {"file"}


def stored(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "state.npz", allow_pickle=False) as arrays:
        return {key: arrays[key] for key in arrays.files}


def check_leaf_sources(folder: Path) -> dict:
    """The manifest's sources follow the rule, with mean/std where they make the leaf, and
    state.npz holds exactly the "file" leaves, of the manifest's shapes and dtypes."""
    manifest = manifest_of(folder)
    assert manifest["initial_state"] == "drawn"
    for leaf in manifest["state"]:
        assert leaf["source"] in expected_source(leaf), leaf
        if leaf["source"] == "normal":
            assert leaf["mean"] is not None and leaf["std"] is not None and leaf["std"] > 0, leaf
        elif leaf["source"] == "constant":
            assert leaf["mean"] is not None and leaf["std"] is None, leaf
        else:
            assert leaf["mean"] is None and leaf["std"] is None, leaf
    arrays = stored(folder)
    from_file = {f"leaf{index:05d}": leaf for index, leaf in enumerate(manifest["state"]) if leaf["source"] == "file"}
    assert set(arrays) == set(from_file)
    for key, leaf in from_file.items():
        array = restored(arrays[key], leaf["dtype"])
        assert (list(array.shape), str(array.dtype)) == (leaf["shape"], leaf["dtype"]), leaf
    return manifest


def check_made_leaves(folder: Path, workload: str) -> list:
    """`initial_state()` makes every leaf as the manifest says; returns the leaves."""
    from trainspeed.exported.load import ExportedSteps

    manifest = manifest_of(folder)
    arrays = stored(folder)
    leaves = ExportedSteps.open(folder, workload).initial_state()
    assert len(leaves) == len(manifest["state"])
    for index, (leaf, made) in enumerate(zip(manifest["state"], leaves)):
        value = np.asarray(made)
        assert (list(value.shape), str(value.dtype)) == (leaf["shape"], leaf["dtype"]), leaf["name"]
        if leaf["source"] == "file":
            np.testing.assert_array_equal(value, restored(arrays[f"leaf{index:05d}"], leaf["dtype"]), err_msg=leaf["name"])
        elif leaf["source"] == "zeros":
            assert not value.any(), leaf["name"]
        elif leaf["source"] == "constant":
            assert (value == np.float32(leaf["mean"])).all(), leaf["name"]
        else:
            # A draw of N >= 4,096 values: its mean is within std/64 of the recorded mean (one
            # standard error), its std within ~1.1%; the bounds are 6 and 9 standard errors, and
            # the draw is seeded (the manifest's seed), so the check is the same on every run.
            drawn = value.astype(np.float64)  # bfloat16's own mean and std would sum in bfloat16
            assert abs(float(drawn.mean()) - leaf["mean"]) < 0.1 * leaf["std"], (leaf, float(drawn.mean()))
            assert float(drawn.std()) == pytest.approx(leaf["std"], rel=0.1), (leaf, float(drawn.std()))
    return leaves


def test_large_parameters_are_drawn_moments_are_zeros_and_the_rest_travels_in_the_file(drawn: Path) -> None:
    manifest = check_leaf_sources(drawn)
    sources = [leaf["source"] for leaf in manifest["state"]]
    # Mahjong tiny: its weight matrices of 64 x 64 and more are drawn; biases, norms and the
    # position table (34 x 64) stay in the file; AdamW's moments and steps are zeros
    assert sources.count("normal") >= 8 and sources.count("file") >= 8 and sources.count("zeros") >= 8, sources
    names = {leaf["name"]: leaf for leaf in manifest["state"]}
    assert names["param/policy/embed.weight"]["source"] == "normal"
    assert names["param/policy/embed.bias"]["source"] == "file"
    assert names["rng"]["source"] == "file"
    assert {leaf["source"] for name, leaf in names.items() if name.startswith("optim/")} == {"zeros"}


def test_the_loader_makes_leaves_of_the_manifests_shapes_with_the_recorded_statistics(drawn: Path) -> None:
    from trainspeed.exported.load import ExportedSteps
    from trainspeed.workloads import get_workload

    leaves = check_made_leaves(drawn, "mahjong")
    manifest = manifest_of(drawn)
    # drawn, not the built weights: the network as built (seed 0) has other values
    built = get_workload("mahjong").build("tiny", seed=0).networks["policy"].state_dict()
    index = [leaf["name"] for leaf in manifest["state"]].index("param/policy/embed.weight")
    assert not np.allclose(np.asarray(leaves[index]), built["embed.weight"].numpy())
    # seeded by the manifest: the same leaves on every call
    again = ExportedSteps.open(drawn, "mahjong").initial_state()
    for leaf, first, second in zip(manifest["state"], leaves, again):
        np.testing.assert_array_equal(np.asarray(first), np.asarray(second), err_msg=leaf["name"])


def test_the_exported_step_trains_from_a_drawn_state(drawn: Path) -> None:
    from trainspeed.exported.load import ExportedSteps

    steps = ExportedSteps.open(drawn, "mahjong")
    program, state = steps.train_program(BATCH), steps.initial_state()
    batch, rates = steps.host_batch(BATCH), steps.learning_rates()
    losses = []
    for _ in range(4):
        state, loss = program(state, batch, rates)
        losses.append(float(loss))
    assert all(math.isfinite(loss) for loss in losses), losses
    assert losses[-1] < losses[0], losses


CONSTANT_WORKLOAD = '''
import torch
from torch import nn
from torch.nn import functional

from trainspeed.workloads.base import Trainable

WIDE, CLASSES = 64, 4


class Mixer(nn.Module):
    """A 64 x 64 layer (drawn), a 64 x 64 mixing matrix that starts constant (one value), an
    integer table of 4,096 entries (large, but not floating: it travels in the file)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(WIDE, WIDE)
        self.mix = nn.Parameter(torch.full((WIDE, WIDE), 1.0 / WIDE))
        self.head = nn.Linear(WIDE, CLASSES)
        self.register_buffer("table", torch.arange(WIDE * WIDE, dtype=torch.int32))

    def forward(self, inputs):
        return self.head(torch.tanh(self.layer(inputs) + inputs @ self.mix))


class MixerTrainable(Trainable):
    def __init__(self, seed: int) -> None:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            network = Mixer()
        super().__init__({"net": network})

    def setup_optimizers(self, fused: bool = False) -> None:
        self.optimizers = {"net": torch.optim.AdamW(self.networks["net"].parameters(), lr=1e-3)}

    def train_step(self, batch):
        loss = functional.cross_entropy(self.wrapped["net"](batch["x"]), batch["y"])
        loss.backward()
        self.optimizers["net"].step()
        self.optimizers["net"].zero_grad()
        return loss.detach()


class MixerWorkload:
    name = "mixer"
    sizes = ("tiny",)

    def build(self, size, seed=0):
        return MixerTrainable(seed)

    def synthetic_batch(self, size, batch_size, generator):
        inputs = torch.randn(batch_size, WIDE, generator=generator)
        return {"x": inputs, "y": inputs[:, :CLASSES].argmax(dim=1)}

    def flops_per_sample(self, size):
        return 6.0 * (2 * WIDE * WIDE + WIDE * CLASSES)
'''


def test_a_large_constant_parameter_is_filled_and_a_large_integer_tensor_travels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "drawn_mixer_workload.py").write_text(textwrap.dedent(CONSTANT_WORKLOAD))
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = tmp_path / "mixer"
    workload = "drawn_mixer_workload:MixerWorkload"
    assert main([*EXPORT, "--workload", workload, "--initial-state", "drawn", "--out", str(folder)]) == 0

    manifest = check_leaf_sources(folder)
    names = {leaf["name"]: leaf for leaf in manifest["state"]}
    assert names["param/net/layer.weight"]["source"] == "normal"
    assert (names["param/net/mix"]["source"], names["param/net/mix"]["mean"]) == ("constant", 1.0 / 64)
    assert names["buffer/net/table"]["source"] == "file"
    assert names["param/net/head.weight"]["source"] == "file"  # 4 x 64: under 4,096 elements
    check_made_leaves(folder, "mixer")


def test_an_unknown_initial_state_is_refused_by_the_command_line(tmp_path: Path, cli_error) -> None:
    out = tmp_path / "new"
    line = cli_error(*EXPORT, *MAHJONG, "--initial-state", "bogus", "--out", str(out))
    assert "argument --initial-state: invalid choice: 'bogus' (choose from 'file', 'drawn')" in line, line
    assert not out.exists()


def test_bf16_parameters_are_drawn_too(tmp_path) -> None:
    """`bf16-state` keeps parameters in bfloat16, which numpy does not call floating: they are drawn
    as float32 ones are (a 1B-parameter model's 2 GB would not travel)."""
    folder = tmp_path / "bf16-state"
    assert main(["export", "--target", "jax:jit:bf16:bf16-state", "--platform", "cpu", "--batch-sizes", str(BATCH),
                 *MAHJONG, "--initial-state", "drawn", "--out", str(folder)]) == 0
    manifest = check_leaf_sources(folder)
    drawn_bf16 = [leaf for leaf in manifest["state"] if leaf["dtype"] == "bfloat16" and leaf["source"] == "normal"]
    assert drawn_bf16, [leaf for leaf in manifest["state"] if leaf["dtype"] == "bfloat16"][:3]
    check_made_leaves(folder, "mahjong")


def test_bf16_leaves_travel_in_the_file_as_bf16(tmp_path) -> None:
    """A bfloat16 leaf of the file (every one, with `--initial-state file`) reads back as bfloat16,
    its bits unchanged: npz has no bfloat16 and would give it back as raw records."""
    folder = tmp_path / "bf16-file"
    assert main(["export", "--target", "jax:jit:bf16:bf16-state", "--platform", "cpu", "--batch-sizes", str(BATCH),
                 *MAHJONG, "--out", str(folder)]) == 0
    check_made_leaves(folder, "mahjong")
    assert any(leaf["dtype"] == "bfloat16" for leaf in manifest_of(folder)["state"])


def test_a_drawn_export_is_for_benches_and_train_refuses_it_in_one_line(drawn: Path, tmp_path: Path,
                                                                        cli_error) -> None:
    """Its large parameters are not the workload's own initialisation, so a run of it would not
    be the run it is compared with (docs/targets.md: "for benches ..., never for training")."""
    out = tmp_path / "run"
    error = cli_error("train", "--exported", str(drawn), "--data", str(tmp_path), "--batch-size-per-device", str(BATCH),
                      "--steps", "2", "--no-progress", "--out", str(out))
    assert "was exported with --initial-state drawn" in error and "--initial-state file to train it" in error
    assert not out.exists()
