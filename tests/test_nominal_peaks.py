"""The table of chips' nominal peaks: looked up by the device names rows record (JAX's device_kind,
CUDA's device name) in each precision a target name carries; a device it does not name has none."""

from __future__ import annotations

import dataclasses

import pytest

from trainspeed.nominal_peaks import CHIPS, TPU_FP32_NOTE, nominal_peak, precision_of_target


@pytest.mark.parametrize("device_name, precision, chip, tflops", [
    ("TPU v4", "bf16", "TPU v4", 275.0),
    ("TPU v5 lite", "bf16", "TPU v5e", 197.0),
    ("TPU v5 lite", "fp32", "TPU v5e", 197.0),
    ("TPU v5", "bf16", "TPU v5p", 459.0),
    ("TPU v5p", "fp32", "TPU v5p", 459.0),
    ("TPU v6 lite", "bf16", "TPU v6e", 918.0),
    ("NVIDIA A100-SXM4-80GB", "bf16", "NVIDIA A100", 312.0),
    ("NVIDIA A100-PCIE-40GB", "fp32", "NVIDIA A100", 19.5),
    ("NVIDIA A100-SXM4-40GB", "tf32", "NVIDIA A100", 156.0),
    ("NVIDIA A100 80GB PCIe", "fp16", "NVIDIA A100", 312.0),
    ("NVIDIA H100 80GB HBM3", "bf16", "NVIDIA H100 SXM", 989.5),
    ("NVIDIA H100 80GB HBM3", "fp32", "NVIDIA H100 SXM", 67.0),
    ("NVIDIA H100 80GB HBM3", "tf32", "NVIDIA H100 SXM", 494.5),
    ("NVIDIA H100 PCIe", "bf16", "NVIDIA H100 PCIe", 756.5),
    ("NVIDIA H100 PCIe", "fp32", "NVIDIA H100 PCIe", 51.0),
    ("NVIDIA H200", "bf16", "NVIDIA H200", 989.5),
    ("NVIDIA H200", "fp32", "NVIDIA H200", 67.0),
    ("NVIDIA H200", "fp16", "NVIDIA H200", 989.5),
])
def test_a_device_name_a_row_records_finds_its_chips_figure(device_name, precision, chip, tflops):
    found = nominal_peak(device_name, precision)
    assert found is not None and (found.chip, found.precision, found.tflops) == (chip, precision, tflops)
    assert found.entry == f"{chip} {precision}" and "https://" in found.source


def test_a_tpu_fp32_row_takes_the_bf16_figure_and_says_why():
    fp32, bf16 = nominal_peak("TPU v5 lite", "fp32"), nominal_peak("TPU v5 lite", "bf16")
    assert fp32.tflops == bf16.tflops == 197.0
    assert TPU_FP32_NOTE in fp32.source and TPU_FP32_NOTE not in bf16.source


@pytest.mark.parametrize("device_name, precision", [
    ("JAX CPU (cpu)", "fp32"), ("AMD EPYC 7B13", "bf16"), (None, "bf16"), ("XLA TPU (PJRT_DEVICE=TPU)", "bf16"),
    ("NVIDIA H100 NVL", "bf16"), ("NVIDIA H200 NVL", "bf16"), ("TPU v5 lite", "tf32"), ("TPU v5 lite", "fp16"),
    ("NVIDIA H200 (remote, 10.0.0.1:50051)", "bf16"),
], ids=["jax-cpu", "cpu", "no-name", "xla", "h100-nvl", "h200-nvl", "tpu-tf32", "tpu-fp16", "remote-suffix"])
def test_a_device_or_precision_the_table_does_not_name_has_no_nominal_peak(device_name, precision):
    assert nominal_peak(device_name, precision) is None


def test_every_figure_names_a_vendors_document_with_its_url():
    for chip in CHIPS:
        for figure in (chip.bf16, chip.fp32, chip.tf32):
            if figure is not None:
                assert figure.tflops > 0 and ("https://cloud.google.com/" in figure.source
                                              or "https://www.nvidia.com/" in figure.source), (chip.name, figure)
    with pytest.raises(dataclasses.FrozenInstanceError):
        CHIPS[0].bf16.tflops = 1.0  # type: ignore[misc]


def test_no_device_name_belongs_to_two_chips():
    names = [name for chip in CHIPS for name in chip.device_names]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("target, precision", [
    ("jax:jit:bf16", "bf16"), ("cpu:eager:fp32", "fp32"), ("cuda:compile:bf16:cudnn-benchmark", "bf16"),
    ("reference-jax:tpu:jit:fp32", "fp32"), ("remote:127.0.0.1:50051/cuda:eager:tf32", "tf32"),
    ("remote:[::1]:50051/cpu:eager:bf16/in-flight=2", "bf16"), ("reference-torch", None),
])
def test_the_precision_of_a_target_name(target, precision):
    assert precision_of_target(target) == precision


def test_docs_targets_md_prints_the_tables_figures_and_device_names():
    """The page's table of nominal peaks is the module's: every chip, its device names, its figures."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "targets.md").read_text()
    rows = {}
    for line in page.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1].startswith("`"):
            rows[tuple(name.strip(" `") for name in cells[1].split(","))] = cells[2:5]
    assert len(rows) == len(CHIPS)
    for chip in CHIPS:
        bf16, fp32, tf32 = rows[chip.device_names]
        assert (float(bf16), float(fp32.split()[0])) == (chip.bf16.tflops, chip.fp32.tflops), chip.name
        assert (float(tf32) if tf32 else None) == (chip.tf32.tflops if chip.tf32 else None), chip.name
