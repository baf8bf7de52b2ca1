"""Library models by name (`timm:`, `torchvision:`, `hf:`): built through the registry, sized from
`--size`, trained one step with the library's loss, validated, and their FLOPs counted."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from trainspeed.bench.flops import check_flops
from trainspeed.data import write_dataset
from trainspeed.data.base import LoaderConfig
from trainspeed.errors import UsageError
from trainspeed.workloads import get_workload, resolve_size
from trainspeed.workloads.flops import FlopCountError, count_flops_per_sample
from trainspeed.workloads.identity import definition_sha256
from trainspeed.workloads.meta import HOST_MAX_PARAMETERS, CheckLimits, check_limits, device_of, run_without_memory

UNHURRIED = CheckLimits(time_s=600.0)
"""For what must run to its end on a machine however loaded: the time limit is a backstop."""
TINY_MODELS = {
    "timm:resnet18": "tiny,res=32",
    "torchvision:resnet18": "tiny,res=32",
    "torchvision:regnet_x_400mf": "tiny,res=32",  # its builder reads the widths it computes with torch ops
    "timm:vit_tiny_patch16_224": "tiny,res=32",
    "hf:gpt2": "tiny,n_layer=1,seq=16",
    "hf:llama": "tiny,num_hidden_layers=1,seq=16",
    "hf:bert": "tiny,num_hidden_layers=1,seq=16",
}


def _one_step_and_validation(name: str, size: str) -> tuple[float, dict[str, float]]:
    workload = get_workload(name)
    trainable = workload.build(resolve_size(workload, size), seed=0)
    trainable.setup_optimizers()
    batch = workload.synthetic_batch(resolve_size(workload, size), 4, torch.Generator().manual_seed(0))
    loss = float(trainable.train_step(batch))
    for network in trainable.networks.values():
        network.eval()
    return loss, trainable.summarize_eval(trainable.eval_metrics(batch))


@pytest.mark.parametrize("name", TINY_MODELS)
def test_a_named_model_trains_a_step_with_its_library_loss_and_validates(name: str) -> None:
    loss, metrics = _one_step_and_validation(name, TINY_MODELS[name])
    workload = get_workload(name)
    assert workload.name == name
    if name.startswith("hf:"):
        # a random model over 1,024 tokens starts near the uniform guess, ln 1024 = 6.93 nats
        assert 5.5 < loss < 8.5
        assert set(metrics) == {"loss", "bits_per_token"}
        assert metrics["bits_per_token"] == pytest.approx(metrics["loss"] / np.log(2))
    else:
        assert 0.5 < loss < 6.0  # ln 10 = 2.3 for an untrained 10-way classifier, give or take its init
        assert set(metrics) == {"loss", "accuracy"} and 0.0 <= metrics["accuracy"] <= 1.0


@pytest.mark.parametrize("name", ["timm:resnet18", "hf:gpt2"])
def test_flops_per_sample_is_torchs_count_of_a_training_step_and_rows_say_so(name: str) -> None:
    workload = get_workload(name)
    size = resolve_size(workload, TINY_MODELS[name])
    check = check_flops(workload, size)
    assert check.counted == pytest.approx(workload.flops_per_sample(size)) and check.counted > 1e6
    assert check.warning() is None
    assert check.row_fields()["mfu_flops_source"] == "counted"
    # a wider model counts more: the number follows the size, it is not a constant
    wider = resolve_size(workload, "tiny,res=64" if name.startswith("timm:") else "tiny,n_layer=2,seq=16")
    assert workload.flops_per_sample(wider) > 1.5 * workload.flops_per_sample(size)


def test_a_vision_batch_is_uint8_pixels_and_labels_within_the_classes() -> None:
    workload = get_workload("timm:resnet18")
    batch = workload.synthetic_batch(resolve_size(workload, "tiny,res=32,classes=7"), 64, torch.Generator().manual_seed(1))
    assert batch["images"].dtype == torch.uint8 and batch["images"].shape == (64, 3, 32, 32)
    assert int(batch["images"].max()) > 200 and int(batch["labels"].max()) == 6


def test_sizes_have_one_canonical_form_in_every_spelling() -> None:
    vision, gpt2 = get_workload("timm:resnet18"), get_workload("hf:gpt2")
    assert resolve_size(vision, None) == "tiny"
    assert resolve_size(vision, "res=96") == resolve_size(vision, "tiny,res=96") == "tiny,res=96"
    assert resolve_size(vision, "tiny,classes=5,res=48") == resolve_size(vision, "tiny,res=48,classes=5")
    # the standard name and GPT-2's own name of an attribute are one size
    assert resolve_size(gpt2, "tiny,num_hidden_layers=3") == resolve_size(gpt2, "tiny,n_layer=3") == "tiny,n_layer=3"
    assert resolve_size(gpt2, "base,seq=64") == "base,seq=64"


@pytest.mark.parametrize(("name", "size", "message"), [
    ("hf:gpt2", "tiny,n_lyer=3", "'n_lyer' is neither an attribute of GPT2Config nor one of seq, objective; closest: n_layer"),
    ("hf:gpt2", "base,seq=4096", "seq=4096 is longer than the model's 1024 positions; set n_positions=4096"),
    ("hf:gpt2", "tiny,n_layer=2,num_hidden_layers=3", "given twice"),
    ("hf:llama", "tiny,objective=masked", "objective must be one of causal"),
    ("timm:resnet18", "huge", "'huge' is not a preset of timm:resnet18: choose one of tiny, base"),
    ("timm:resnet18", "tiny,rez=64", "'rez' is not a size key of timm:resnet18 (keys: res, classes, opt); closest: res"),
    ("timm:resnet18", "tiny,res=-3", "res must be an integer of at least 8"),
    ("timm:resnet18", "tiny,,res=3", "an empty part between commas"),
    ("torchvision:resnet18", "tiny,opt=adam", "opt must be one of sgd, adamw"),
    # the size as the user wrote it, not its canonical form
    ("hf:gpt2", "tiny,num_hidden_layers=1,objective=masked", "--size 'tiny,num_hidden_layers=1,objective=masked': "),
    # what failed: the builder, not a forward pass at some resolution
    ("hf:gpt2", "tiny,n_embd=7", "hf:gpt2 cannot be built at it (ValueError: `embed_dim` must be divisible by num_heads"),
    # an embedding of 0 rows runs on meta (no values are looked up) and fails at the first step everywhere else
    ("hf:bert", "tiny,num_hidden_layers=1,type_vocab_size=0",
     "hf:bert cannot run at it (IndexOutOfRange: embedding looks up a table of 0 rows)"),
    ("hf:gpt2", "tiny,dtype=bfloat16", "dtype is not a size key: the target's precision decides the dtype (for "
                                       "bfloat16, use a :bf16 target"),
    ("hf:gpt2", "tiny,torch_dtype=bfloat16", "torch_dtype is not a size key"),
    ("hf:gpt2", "tiny,n_layer=100000", "n_layer=100000 is more layers than a size may have (at most 256"),
    ("hf:llama", "tiny,num_hidden_layers=257", "num_hidden_layers=257 is more layers than a size may have"),
])
def test_a_bad_size_is_one_line_naming_what_is_wrong(name: str, size: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        resolve_size(get_workload(name), size)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_an_echo_of_the_users_text_is_cut_to_a_bounded_length() -> None:
    key = "k" * 10_000
    for name in ("timm:resnet18", "hf:gpt2"):
        with pytest.raises(UsageError) as raised:
            resolve_size(get_workload(name), f"tiny,{key}=1")
        assert len(str(raised.value)) < 400 and "(10,000 characters)" in str(raised.value)
    with pytest.raises(UsageError) as raised:
        get_workload(f"timm:{key}")
    assert len(str(raised.value)) < 400


def test_a_check_past_its_time_limit_or_for_nobody_stops_and_asks_for_a_smaller_size() -> None:
    gpt2 = get_workload("hf:gpt2")
    with check_limits(CheckLimits(time_s=0.0)), pytest.raises(UsageError) as raised:
        resolve_size(gpt2, "tiny,n_layer=1")
    assert "stopped: it ran past its limit of 0 s of CPU time; choose a smaller size" in str(raised.value)
    with check_limits(CheckLimits(cancelled=lambda: True)), pytest.raises(UsageError, match="nobody waits for it any more"):
        resolve_size(gpt2, "tiny,n_layer=2")
    assert resolve_size(gpt2, "tiny,n_layer=1") == "tiny,n_layer=1"  # the limits were this thread's, for those checks


def test_a_mixture_of_experts_runs_on_meta_and_a_large_one_is_counted_there_never_built_on_the_host() -> None:
    mixtral = get_workload("hf:mixtral")
    # meta's grouped matmul refuses float32 (a CUDA restriction the host kernel lacks)
    with check_limits(UNHURRIED):  # were meta to fail, the host would count it: the time limit must not decide
        assert count_flops_per_sample(mixtral, resolve_size(mixtral, "tiny,num_hidden_layers=1,seq=16"))[1] == "meta"
    wide = resolve_size(mixtral, "tiny,num_hidden_layers=1,hidden_size=2048,intermediate_size=7168,vocab_size=32000,seq=16")
    ran = run_without_memory(lambda: mixtral.build(wide), lambda trainable: None)
    assert ran.parameters > HOST_MAX_PARAMETERS and ran.device == "meta"
    assert count_flops_per_sample(mixtral, wide)[1] == "meta"


def test_what_meta_cannot_run_runs_on_the_host_only_when_small_and_within_its_bytes() -> None:
    bart = get_workload("hf:bart")  # reads a value (.item()) in its forward pass: meta cannot run it

    def forward(size: str):
        language_model_size = bart.language_model_size(size)

        def call(model: torch.nn.Module) -> None:
            tokens = torch.zeros(2, language_model_size.sequence, dtype=torch.long, device=device_of(model))
            model(input_ids=tokens, labels=tokens)

        return lambda: bart._create_model(language_model_size), call

    with check_limits(UNHURRIED):
        ran = run_without_memory(*forward("tiny,num_hidden_layers=1,seq=16"))
        assert ran.device == "cpu" and "cannot be called on meta tensors" in str(ran.meta_error)
        # attention over 100,000 positions: sized on meta before the host allocates or computes it, and not run
        ran = run_without_memory(*forward("tiny,num_hidden_layers=1,seq=100000"))
        assert ran.device is None and "one of its ops would compute 5.1e+12 FLOPs on the host" in ran.host_skipped
    with check_limits(dataclasses.replace(UNHURRIED, host_max_bytes=8 << 20)):  # less than its 25 MB embedding
        ran = run_without_memory(*forward("tiny,num_hidden_layers=1,seq=16"))
    assert ran.device is None and ran.host_skipped == "it would hold more than 8 MiB on the host"
    with check_limits(dataclasses.replace(UNHURRIED, host_max_bytes=0)):
        assert run_without_memory(*forward("tiny,num_hidden_layers=1,seq=16")).device is None
    with pytest.raises(FlopCountError, match=r"meta cannot run the steps \(RuntimeError: Tensor.item\(\) cannot be called "
                                             r"on meta tensors\) and the host did not run them: at 406M parameters it is "
                                             r"larger than the 100M a run on the host builds"):
        count_flops_per_sample(bart, resolve_size(bart, "base"))


def test_a_size_too_deep_to_check_is_one_line_before_anything_runs(tmp_path: Path, cli_error) -> None:
    line = cli_error("bench", "--workload", "hf:gpt2", "--size", "tiny,n_layer=100000", "--targets", "cpu:eager:fp32",
                     "--out", str(tmp_path / "rows.jsonl"), "--no-plot")
    assert "n_layer=100000 is more layers than a size may have" in line
    assert not (tmp_path / "rows.jsonl").exists()


@pytest.mark.parametrize(("name", "message"), [
    ("timm:resnet5", "--workload timm:resnet5: timm has no model 'resnet5'"),
    ("torchvision:resnet19", "--workload torchvision:resnet19: torchvision has no classification model 'resnet19'"),
    ("hf:gpt3", "--workload hf:gpt3: transformers"),
    ("timm:resnet18.a1_in1x", "--workload timm:resnet18.a1_in1x: timm's 'resnet18' has no tag 'a1_in1x': write "
                              "timm:resnet18 for its default configuration or timm:resnet18.TAG with a TAG of a1_in1k"),
])
def test_a_name_the_library_does_not_know_is_one_line_with_the_closest_names(name: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        get_workload(name)
    assert message in str(raised.value) and "; closest: " in str(raised.value)


@pytest.mark.parametrize(("name", "message"), [
    ("timm:resnet18.", "timm's 'resnet18' has an empty tag: write timm:resnet18 for its default configuration"),
    ("timm:resnet18.nosuchtag", "timm's 'resnet18' has no tag 'nosuchtag'"),
    ("hf:gemma4_assistant", "cannot make a gemma4_assistant config from its defaults"),
])
def test_a_name_the_library_refuses_is_one_line(name: str, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        get_workload(name)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_timm_name_with_a_tag_builds_that_configuration() -> None:
    workload = get_workload("timm:resnet18.a1_in1k")
    assert resolve_size(workload, "tiny,res=32") == "tiny,res=32"


def test_a_missing_library_is_one_line_naming_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "timm", None)  # what `import timm` meets where it is not installed
    with pytest.raises(UsageError, match=r"--workload timm:resnet18: timm is not installed .*pip install 'trainspeed\[timm\]'"):
        get_workload("timm:resnet18")


def test_the_identity_covers_the_library_version() -> None:
    first, second = get_workload("timm:resnet18"), get_workload("timm:resnet18")
    assert definition_sha256(first) == definition_sha256(second)
    second.library_version = "timm 0.0.1"
    assert definition_sha256(first) != definition_sha256(second)


def test_a_language_model_reads_token_windows_of_its_sequence_length(tmp_path: Path) -> None:
    windows = np.random.default_rng(0).integers(0, 1000, (64, 16), dtype=np.int16)
    write_dataset({"tokens": windows}, tmp_path / "tokens", val_fraction=0.25)
    workload = get_workload("hf:gpt2")
    config = LoaderConfig(batch_size=8, split="train", num_workers=0, drop_last=True, shuffle=False)
    batch = next(iter(workload.open_dataset(tmp_path / "tokens", resolve_size(workload, "tiny,seq=16"), config)))
    assert batch["tokens"].shape == (8, 16) and batch["tokens"].dtype == torch.int32
    with pytest.raises(UsageError, match=r"tokens are int16 \(16,\); hf:gpt2 at size 'tiny,seq=32' trains on windows of 32 ids"):
        workload.open_dataset(tmp_path / "tokens", resolve_size(workload, "tiny,seq=32"), config)


def test_training_refuses_token_ids_past_the_vocabulary_in_one_line_before_any_step(tmp_path: Path, cli_error) -> None:
    windows = np.random.default_rng(0).integers(0, 1000, (64, 16), dtype=np.int16)
    windows[40, 3] = 5000  # past the tiny vocabulary of 1,024 ids: an IndexError in the embedding once trained on
    write_dataset({"tokens": windows}, tmp_path / "tokens", val_fraction=0.25)
    line = cli_error("train", "--workload", "hf:gpt2", "--size", TINY_MODELS["hf:gpt2"], "--data", str(tmp_path / "tokens"),
                     "--steps", "2", "--batch-size-per-device", "4", "--out", str(tmp_path / "run"))
    assert line == (f"trainspeed: error: --data {tmp_path / 'tokens'} holds token ids up to 5000; hf:gpt2 at size "
                    "'tiny,n_layer=1,seq=16' has a vocabulary of 1024: set vocab_size=5001 in --size, or write the data "
                    "with ids below 1024")
    assert not (tmp_path / "run").exists()


def _set_without_a_recorded_range(folder: Path, tokens: np.ndarray) -> Path:
    """A token set as one written before its ids were checked and their range recorded (the column
    renamed in the index, so the shards' checksums still hold)."""
    write_dataset({"ids": tokens}, folder, val_fraction=0.25)
    index = json.loads((folder / "index.json").read_text())
    index["columns"] = {"tokens": index["columns"].pop("ids")}
    index.pop("ranges", None)
    (folder / "index.json").write_text(json.dumps(index))
    return folder


@pytest.mark.parametrize("value", [5000, 2**62, -1], ids=["past the vocabulary", "wraps in int32", "negative"])
def test_every_batch_of_token_ids_is_checked_so_a_bad_id_later_in_the_data_is_one_line(tmp_path: Path, value: int) -> None:
    windows = np.random.default_rng(0).integers(0, 1000, (64, 16), dtype=np.int64)
    windows[48:, 5] = value  # in the last quarter (read unshuffled), so the first batch passes
    folder = _set_without_a_recorded_range(tmp_path / "tokens", windows)
    workload = get_workload("hf:gpt2")
    config = LoaderConfig(batch_size=8, split="train", num_workers=0, drop_last=False, shuffle=False)
    batches = iter(workload.open_dataset(folder, resolve_size(workload, TINY_MODELS["hf:gpt2"]), config))
    assert next(batches)["tokens"].dtype == torch.int32
    with pytest.raises(UsageError) as refused:
        list(batches)
    assert str(refused.value) == (f"--data {folder}: a batch holds token id {value}, outside hf:gpt2's vocabulary "
                                  f"0..1023; `trainspeed data verify {folder} --vocab 1024` names each such id")


def test_a_classifier_reads_labelled_uint8_images_and_refuses_labels_past_its_classes(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 3, 16, 16), dtype=np.uint8)
    write_dataset({"images": images, "labels": rng.integers(0, 5, 40).astype(np.uint8)}, tmp_path / "images",
                  val_fraction=0.25)
    workload = get_workload("torchvision:resnet18")
    config = LoaderConfig(batch_size=10, split="train", num_workers=0, drop_last=True, shuffle=False)
    batch = next(iter(workload.open_dataset(tmp_path / "images", resolve_size(workload, "tiny,res=16,classes=5"), config)))
    assert batch["images"].dtype == torch.uint8 and batch["labels"].dtype == torch.int64
    with pytest.raises(UsageError, match=r"a label is outside 0..2; set classes= to the data's"):
        list(workload.open_dataset(tmp_path / "images", resolve_size(workload, "tiny,res=16,classes=3"), config))
    with pytest.raises(UsageError, match=r"images are uint8 \(3, 16, 16\); torchvision:resnet18 at size 'tiny' trains on uint8 \(3, 64, 64\)"):
        workload.open_dataset(tmp_path / "images", resolve_size(workload, "tiny"), config)
