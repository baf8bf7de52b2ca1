"""`trainspeed.workload_from`: plain PyTorch pieces make an ordinary workload, whose FLOPs are counted
as a library model's are, which another process rebuilds from its reference to the same identity,
and which says in one line what keeps another process from rebuilding it."""

from __future__ import annotations

import functools
import json
import sys
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import trainspeed
from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.workloads import get_workload, resolve_size
from trainspeed.workloads.base import Workload
from trainspeed.workloads.identity import identify
from trainspeed.workloads.pieces import IN_PROCESS

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, CLASSES))


def classification_loss(outputs, batch):
    return F.cross_entropy(outputs, batch[1])


def example_batch() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(8, FEATURES), torch.randint(0, CLASSES, (8,))


def sgd():
    return functools.partial(torch.optim.SGD, lr=0.1)


def mlp_workload(**extra) -> Workload:
    return trainspeed.workload_from(model=mlp, loss=classification_loss, batch=example_batch(), optimizer=sgd(),
                                    **extra)


def test_a_plain_model_is_a_workload_of_one_size_with_its_flops_counted():
    workload = mlp_workload()
    assert isinstance(workload, Workload) and workload.name == "mlp"
    assert get_workload(workload.reference) is workload
    size = resolve_size(workload, None)
    # forward 2 x (16x32 + 32x4) multiply-adds; backward the weights' gradients of both layers, and
    # the input gradient of the second only (the batch needs none): 1280 + 1280 + 256
    assert workload.flops_per_sample(size) == 2816 and workload.flops_counted
    batch = workload.synthetic_batch(size, 5, torch.Generator().manual_seed(0))
    assert {key: (tensor.dtype, tuple(tensor.shape)) for key, tensor in batch.items()} == {
        "0": (torch.float32, (5, FEATURES)), "1": (torch.int64, (5,))}
    labels = workload.synthetic_batch(size, 512, torch.Generator().manual_seed(1))["1"]
    assert set(labels.tolist()) <= set(range(CLASSES))  # the example's range, never a class past the head
    trainable = workload.build(size, seed=3)
    trainable.setup_optimizers()
    assert math.isfinite(float(trainable.train_step(batch)))
    same, other = (mlp_parameters(workload.build(size, seed=seed)) for seed in (3, 4))
    assert all(torch.equal(a, b) for a, b in zip(same, mlp_parameters(workload.build(size, seed=3))))
    assert not all(torch.equal(a, b) for a, b in zip(same, other))  # one seed, one model


def mlp_parameters(trainable) -> list[torch.Tensor]:
    return [parameter.detach().clone() for parameter in trainable.networks["model"].parameters()]


def accuracy(outputs, batch):
    return {"accuracy": (outputs.argmax(dim=1) == batch["label"]).float().mean()}


def dict_loss(outputs, batch):
    return F.cross_entropy(outputs, batch["label"])


def test_validation_is_the_loss_and_the_metrics_as_means_over_every_sample():
    features = torch.randn(12, FEATURES)
    workload = trainspeed.workload_from(model=mlp, loss=dict_loss, optimizer=sgd(), metrics=accuracy,
                                        batch={"x": features, "label": torch.randint(0, CLASSES, (12,))})
    trainable = workload.build("default")
    batches = [{"x": features[:9], "label": torch.arange(9) % CLASSES}, {"x": features[9:], "label": torch.zeros(3).long()}]
    sums = [trainable.eval_metrics(batch) for batch in batches]
    summary = trainable.summarize_eval({name: sums[0][name] + sums[1][name] for name in sums[0]})
    with torch.no_grad():
        outputs = trainable.networks["model"](features)
        labels = torch.cat([batch["label"] for batch in batches])
        expected = {"loss": float(F.cross_entropy(outputs, labels)),
                    "accuracy": float((outputs.argmax(dim=1) == labels).float().mean())}
    assert summary == pytest.approx(expected, rel=1e-5)


def make_tokens(batch_size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    return {"tokens": torch.randint(0, 50, (batch_size, 6), generator=generator)}


def bag_of_tokens() -> nn.Module:
    return nn.EmbeddingBag(50, 50)


def next_token_loss(outputs, batch):
    return F.cross_entropy(outputs, batch["tokens"][:, -1])


def all_but_the_last(model, batch):
    return model(batch["tokens"][:, :-1])


def test_a_batch_function_and_a_forward_of_its_own():
    workload = trainspeed.workload_from(model=bag_of_tokens, loss=next_token_loss, batch=make_tokens, optimizer=sgd(),
                                        forward=all_but_the_last)
    batch = workload.synthetic_batch("default", 4, torch.Generator().manual_seed(0))
    assert batch["tokens"].shape == (4, 6)
    trainable = workload.build("default")
    trainable.setup_optimizers()
    assert math.isfinite(float(trainable.train_step(batch)))
    assert workload.portable and '"forward":"test_workload_from:all_but_the_last"' in workload.reference


def test_another_process_rebuilds_it_from_its_reference_with_the_same_identity():
    workload = mlp_workload(name="rebuilt", reference_batch=256)
    assert workload.portable, workload.unportable
    reference = workload.reference
    del IN_PROCESS[reference]  # as a process that did not make it finds none
    rebuilt = get_workload(reference)
    assert rebuilt is not workload and rebuilt.reference == reference
    assert identify(rebuilt) == identify(workload)
    assert identify(workload).module == "test_workload_from"
    assert (rebuilt.name, rebuilt.reference_batch) == ("rebuilt", 256)
    assert rebuilt.flops_per_sample("default") == workload.flops_per_sample("default")
    assert rebuilt.pieces.optimizer.keywords == {"lr": 0.1}
    generator = torch.Generator
    assert all(torch.equal(a, b) for a, b in zip(rebuilt.synthetic_batch("default", 3, generator().manual_seed(2)).values(),
                                                 workload.synthetic_batch("default", 3, generator().manual_seed(2)).values()))


def test_another_definition_of_the_pieces_is_another_identity():
    first = identify(mlp_workload())
    wider = trainspeed.workload_from(model=functools.partial(nn.Linear, FEATURES, CLASSES), loss=classification_loss,
                                     batch=example_batch(), optimizer=sgd())
    assert identify(wider).definition_sha256 != first.definition_sha256


def test_pieces_another_process_cannot_import_keep_the_workload_in_this_process():
    def local_loss(outputs, batch):
        return F.cross_entropy(outputs, batch[1])

    workload = trainspeed.workload_from(model=lambda: mlp(), loss=local_loss, batch=example_batch(), optimizer=sgd())
    assert not workload.portable
    assert workload.unportable == ["model= is a lambda", "loss= (test_pieces_another_process_cannot_import_keep_the_"
                                   "workload_in_this_process.<locals>...) is defined inside a function"]
    assert workload.reference.startswith("python:model") and get_workload(workload.reference) is workload
    assert workload.flops_per_sample("default") == 2816
    again = trainspeed.workload_from(model=lambda: mlp(), loss=local_loss, batch=example_batch(), optimizer=sgd())
    assert again.reference != workload.reference and get_workload(workload.reference) is workload
    with pytest.raises(UsageError, match=r"^--workload python:nosuch: no workload of that name in this process; .*nproc=1"):
        get_workload("python:nosuch")


@pytest.mark.parametrize("pieces, said", [
    ({"model": nn.Linear(2, 2)}, "model= is a built Linear; give a factory"),
    ({"optimizer": torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)}, "optimizer= is a built SGD"),
    ({"loss": 3}, "loss= is a int; give a function of (outputs, batch)"),
    ({"batch": [1, 2]}, "batch= is a list; give a tensor, a tuple or list of tensors, or a dict"),
    ({"batch": (torch.zeros(4, 2), torch.zeros(3))}, "batch= example: its tensors hold different numbers of samples"),
    ({"batch": torch.tensor(1.0)}, "batch= example: 'input' is a scalar"),
    ({"batch": torch.tensor([[float("nan")]])}, "batch= example: 'input' holds nan"),
    ({"reference_batch": 0}, "reference_batch=0: give a positive whole number, or None"),
], ids=["built-model", "built-optimizer", "loss-not-callable", "batch-of-numbers", "ragged-batch", "scalar-batch",
        "nan-batch", "reference-batch"])
def test_what_is_not_a_piece_is_one_line(pieces, said):
    given = {"model": mlp, "loss": classification_loss, "batch": example_batch(), "optimizer": sgd(), **pieces}
    with pytest.raises(UsageError) as raised:
        trainspeed.workload_from(**given)
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_a_library_model_is_counted_as_its_named_workload_counts_it():
    torchvision = pytest.importorskip("torchvision")
    workload = trainspeed.workload_from(
        model=functools.partial(torchvision.models.resnet18, num_classes=10), loss=classification_loss,
        batch=(torch.randint(0, 256, (2, 3, 32, 32)).float(), torch.randint(0, 10, (2,))), optimizer=sgd())
    assert workload.portable and '"call":"torchvision.models.resnet:resnet18","kwargs":{"num_classes":10}' in \
        workload.reference
    named = get_workload("torchvision:resnet18")
    assert workload.flops_per_sample("default") == named.flops_per_sample(resolve_size(named, "tiny,res=32,classes=10"))


def reconstruct(outputs, batch):
    return F.mse_loss(outputs, batch)


def test_a_tensor_batch_is_the_models_input_and_the_losss_batch():
    workload = trainspeed.workload_from(model=functools.partial(nn.Linear, FEATURES, FEATURES), loss=reconstruct,
                                        batch=torch.randn(8, FEATURES), optimizer=sgd())
    batch = workload.synthetic_batch("default", 4, torch.Generator().manual_seed(0))
    assert list(batch) == ["input"] and batch["input"].shape == (4, FEATURES)
    trainable = workload.build("default")
    trainable.setup_optimizers()
    assert math.isfinite(float(trainable.train_step(batch)))


def test_a_bool_tensor_of_the_example_is_drawn_as_bools():
    workload = trainspeed.workload_from(model=mlp, loss=classification_loss, optimizer=sgd(),
                                        batch={"x": torch.randn(8, FEATURES), "mask": torch.rand(8, 3) > 0.5})
    mask = workload.synthetic_batch("default", 64, torch.Generator().manual_seed(0))["mask"]
    assert mask.dtype == torch.bool and mask.shape == (64, 3) and 0 < int(mask.sum()) < mask.numel()


def not_a_module():
    return "a model"


@pytest.mark.parametrize("pieces, said", [
    ({"batch": torch.zeros(4, 2, dtype=torch.complex64)}, "batch= example: 'input' is complex64; give real numbers"),
    ({"name": "two\nlines"}, "name='two\\nlines': give a short printable name for the rows"),
], ids=["complex-batch", "name-of-two-lines"])
def test_more_of_what_is_not_a_piece_is_one_line(pieces, said):
    given = {"model": mlp, "loss": classification_loss, "batch": example_batch(), "optimizer": sgd(), **pieces}
    with pytest.raises(UsageError) as raised:
        trainspeed.workload_from(**given)
    assert said in str(raised.value) and "\n" not in str(raised.value)


def test_a_model_factory_that_returns_no_module_is_one_line_when_built():
    workload = trainspeed.workload_from(model=not_a_module, loss=classification_loss, batch=example_batch(),
                                        optimizer=sgd())
    with pytest.raises(UsageError, match=r"^--workload not_a_module: model= returned a str, not an nn.Module$"):
        workload.build("default")


class Scaled:
    """A callable object: it has no importable name of its own."""

    def __call__(self, outputs, batch):
        return F.cross_entropy(outputs, batch[1])


def shadowed_loss(outputs, batch):
    return F.cross_entropy(outputs, batch[1])


def test_pieces_without_an_importable_name_say_why(monkeypatch):
    original = shadowed_loss
    monkeypatch.setattr(sys.modules[__name__], "shadowed_loss", Scaled())  # its module now holds another object
    workload = trainspeed.workload_from(model=functools.partial(lambda: mlp()), loss=original, batch=example_batch(),
                                        optimizer=functools.partial(torch.optim.SGD, lr=torch.tensor(0.1)),
                                        metrics=Scaled())
    assert workload.unportable == [
        "model= is a lambda",
        "loss= (test_workload_from.shadowed_loss) is not what its module holds under that name",
        "optimizer= is a partial whose arguments are not plain numbers, text or lists",
        "metrics= is a Scaled, which has no importable name"]


@pytest.mark.parametrize("change, said", [
    (lambda d: d.update(loss="test_workload_from:no_such_loss"), "test_workload_from defines no no_such_loss (for loss=)"),
    (lambda d: d.update(loss="no_such_module_of_losses:loss"),
     "cannot import 'no_such_module_of_losses' (ModuleNotFoundError: No module named 'no_such_module_of_losses')"),
    (lambda d: d.update(model=None), "its model= cannot be imported by another process"),
    (lambda d: d.update(model="__main__:mlp", main={"file": "/nowhere/script.py"}),
     "the script that defines its pieces (/nowhere/script.py) is not here"),
    (lambda d: d.update(model="__main__:mlp", main={"module": "no_such_script_module"}),
     "cannot find no_such_script_module, the script that defines its pieces"),
    (lambda d: d.pop("name"), "not the JSON trainspeed.workload_from writes (no name)"),
], ids=["no-such-piece", "no-such-module", "unimportable-model", "script-gone", "script-module-gone", "no-name"])
def test_a_reference_another_process_cannot_rebuild_is_one_line(change, said):
    description = json.loads(mlp_workload().reference.removeprefix("python:"))
    change(description)
    with pytest.raises(UsageError) as raised:
        get_workload("python:" + json.dumps(description))
    assert str(raised.value).startswith("--workload python:...: ") and said in str(raised.value)
    assert "\n" not in str(raised.value)
    with pytest.raises(UsageError, match=r"^--workload python:\.\.\.: not the JSON trainspeed.workload_from writes \("):
        get_workload('python:{"name": ')


def test_a_script_that_fails_while_its_pieces_load_is_one_line(tmp_path):
    script = tmp_path / "train_script.py"
    script.write_text("import torch\ndef needs_a_gpu(function):\n    raise RuntimeError('no GPU here\\nsecond line')\n"
                      "@needs_a_gpu\ndef mlp():\n    pass\n")
    description = json.loads(mlp_workload().reference.removeprefix("python:"))
    description.update(model="__main__:mlp", main={"file": str(script)})
    for _ in range(2):  # not left half-loaded: the next try loads it again
        with pytest.raises(UsageError, match=r"^--workload python:\.\.\.: loading .*train_script.py raised "
                                             r"RuntimeError: no GPU here$"):
            get_workload("python:" + json.dumps(description))


def batches_of_another_structure(path, config):
    """A loader whose batches are not of the example's structure, one kind of mistake each."""
    x, y = example_batch()
    return {"tensor": [x], "short": [(x,)], "dict": [{"x": x}]}[path]


@pytest.mark.parametrize("path, example, said", [
    ("tensor", example_batch(), "a batch is a Tensor, but the example batch was a tuple (0, 1)"),
    ("short", example_batch(), "a batch is a tuple of 1, but the example batch was a tuple (0, 1)"),
    ("dict", torch.randn(8, FEATURES), "a batch is a dict, but the example batch was a tensor (input)"),
    ("tensor", {"x": torch.randn(8, FEATURES)}, "a batch is a Tensor, but the example batch was a dict (x)"),
    ("dict", {"x": torch.randn(8, FEATURES), "y": torch.zeros(8)}, "a batch lacks y: the example batch was a dict (x, y)"),
], ids=["tensor-for-tuple", "short-tuple", "dict-for-tensor", "tensor-for-dict", "dict-lacking-a-key"])
def test_a_loader_batch_of_another_structure_than_the_example_is_one_line(path, example, said):
    workload = trainspeed.workload_from(model=mlp, loss=classification_loss, batch=example, optimizer=sgd(),
                                        data=batches_of_another_structure)
    loader = workload.open_dataset(path, "default", LoaderConfig(batch_size=8))
    with pytest.raises(UsageError) as raised:
        next(iter(loader))
    assert str(raised.value) == said
