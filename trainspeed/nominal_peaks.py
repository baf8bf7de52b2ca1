"""Chips' nominal dense peak TFLOP/s, as their vendors publish them: the denominator of MFU as the
field counts it (the PaLM paper, MaxText's tables), beside the peak the bench measures itself.

A matmul chain measured on a TPU v5e reaches about 171 TFLOP/s in bf16, where Google publishes 197:
an MFU against the measured chain reads higher than one against the chip's nominal peak, and
compares with no published MFU. So a row's MFU divides by the figure here where its device has
one, and by the measured chain where it has none (every CPU, a device this table does not name).

Every figure is dense (NVIDIA's datasheets print the bf16, fp16 and tf32 Tensor Core figures
with 2:4 sparsity; half of that is the dense figure). Each names the vendor's document it comes
from. Devices are matched by the names the rows record: JAX's `device_kind` ("TPU v5 lite") and
`torch.cuda.get_device_name` ("NVIDIA H100 80GB HBM3"), exactly: a variant this table does not name
(an H100 NVL, an H200 NVL, with other clocks) has no nominal peak rather than a neighbour's.

No torch and no JAX: the bench of exported steps reads it where only JAX and numpy are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
"""The precisions a target name may carry (`cuda:eager:tf32`); fp16 has no target today."""

TPU_FP32_NOTE = (
    "TPUs publish no fp32 matmul peak: JAX's default precision runs a float32 matmul as bf16 passes "
    "on the MXU, so an fp32 row is taken against the bf16 figure")


@dataclass(frozen=True)
class PeakFigure:
    """One published figure: dense TFLOP/s of one chip in one precision, and where it is printed."""

    tflops: float
    source: str
    """The vendor's document, named with its URL, and what it calls the figure."""
    note: str | None = None
    """How the figure was read from the document, or why it stands for another precision."""


@dataclass(frozen=True)
class Chip:
    """A chip's entry: its product name, the device names rows record for it, its figures."""

    name: str
    device_names: tuple[str, ...]
    bf16: PeakFigure
    fp32: PeakFigure
    tf32: PeakFigure | None = None
    """NVIDIA's TF32 Tensor Core figure (`cuda:*:tf32`); None on a TPU, which has no TF32 mode."""
    is_gpu: bool = False

    def figure(self, precision: str) -> PeakFigure | None:
        """The figure a row of `precision` divides by: fp16 as bf16 on a GPU (the same Tensor Core
        rate); None for a precision the chip has no figure of."""
        if precision == "bf16":
            return self.bf16
        if precision == "fp32":
            return self.fp32
        if precision == "tf32":
            return self.tf32
        if precision == "fp16" and self.is_gpu:
            return self.bf16
        return None


@dataclass(frozen=True)
class NominalPeak:
    """The figure a row's MFU divides by, with the chip and precision it was looked up for."""

    chip: str
    precision: str
    figure: PeakFigure

    @property
    def tflops(self) -> float:
        return self.figure.tflops

    @property
    def entry(self) -> str:
        """The chip and precision, as a row names the entry (`TPU v5e bf16`)."""
        return f"{self.chip} {self.precision}"

    @property
    def source(self) -> str:
        """The document, and the note where the figure stands for another precision or was halved."""
        return self.figure.source + (f"; {self.figure.note}" if self.figure.note else "")


def _tpu(name: str, device_names: tuple[str, ...], bf16_tflops: float, url: str) -> Chip:
    """A TPU's entry: Google's page of the chip prints its bf16 peak per chip; fp32 takes that figure."""
    source = f"Google Cloud, Cloud TPU {name.removeprefix('TPU ')} documentation ({url}): peak compute per chip (bf16)"
    return Chip(name, device_names, bf16=PeakFigure(bf16_tflops, source),
                fp32=PeakFigure(bf16_tflops, source, TPU_FP32_NOTE))


def _sparse_halved(figure: str) -> str:
    return f"the datasheet's {figure} TFLOPS is with sparsity; dense is half"


A100_SOURCE = ("NVIDIA A100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/a100/), the same "
               "figures for SXM and PCIe")
H100_SOURCE = "NVIDIA H100 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h100/)"
H200_SOURCE = "NVIDIA H200 Tensor Core GPU datasheet (https://www.nvidia.com/en-us/data-center/h200/)"

CHIPS: tuple[Chip, ...] = (
    _tpu("TPU v4", ("TPU v4",), 275.0, "https://cloud.google.com/tpu/docs/v4"),
    _tpu("TPU v5e", ("TPU v5 lite", "TPU v5e"), 197.0, "https://cloud.google.com/tpu/docs/v5e"),
    _tpu("TPU v5p", ("TPU v5", "TPU v5p"), 459.0, "https://cloud.google.com/tpu/docs/v5p"),
    _tpu("TPU v6e", ("TPU v6 lite", "TPU v6e"), 918.0, "https://cloud.google.com/tpu/docs/v6e"),
    Chip("NVIDIA A100", ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB",
                         "NVIDIA A100 80GB PCIe"),
         bf16=PeakFigure(312.0, f"{A100_SOURCE}: BFLOAT16 Tensor Core"),
         fp32=PeakFigure(19.5, f"{A100_SOURCE}: FP32"),
         tf32=PeakFigure(156.0, f"{A100_SOURCE}: Tensor Float 32 (TF32)"), is_gpu=True),
    Chip("NVIDIA H100 SXM", ("NVIDIA H100 80GB HBM3",),
         bf16=PeakFigure(989.5, f"{H100_SOURCE}, H100 SXM: BFLOAT16 Tensor Core", _sparse_halved("1,979")),
         fp32=PeakFigure(67.0, f"{H100_SOURCE}, H100 SXM: FP32"),
         tf32=PeakFigure(494.5, f"{H100_SOURCE}, H100 SXM: TF32 Tensor Core", _sparse_halved("989")), is_gpu=True),
    Chip("NVIDIA H100 PCIe", ("NVIDIA H100 PCIe",),
         bf16=PeakFigure(756.5, f"{H100_SOURCE}, H100 PCIe: BFLOAT16 Tensor Core", _sparse_halved("1,513")),
         fp32=PeakFigure(51.0, f"{H100_SOURCE}, H100 PCIe: FP32"),
         tf32=PeakFigure(378.0, f"{H100_SOURCE}, H100 PCIe: TF32 Tensor Core", _sparse_halved("756")), is_gpu=True),
    Chip("NVIDIA H200", ("NVIDIA H200",),
         bf16=PeakFigure(989.5, f"{H200_SOURCE}, H200 SXM: BFLOAT16 Tensor Core", _sparse_halved("1,979")),
         fp32=PeakFigure(67.0, f"{H200_SOURCE}, H200 SXM: FP32"),
         tf32=PeakFigure(494.5, f"{H200_SOURCE}, H200 SXM: TF32 Tensor Core", _sparse_halved("989")), is_gpu=True),
)
"""The chips whose nominal peaks are known here. The H200 computes as the H100 SXM (more and faster
memory, the same Tensor Cores and clocks)."""

_BY_DEVICE_NAME = {device_name: chip for chip in CHIPS for device_name in chip.device_names}


def chip_of(device_name: str | None) -> Chip | None:
    """The entry of the device a row names; None where the table has none (any CPU, an XLA device,
    a GPU variant it does not list)."""
    return _BY_DEVICE_NAME.get(device_name or "")


def nominal_peak(device_name: str | None, precision: str) -> NominalPeak | None:
    """The nominal dense peak of `device_name` in `precision`, or None where none is known."""
    chip = chip_of(device_name)
    figure = chip.figure(precision) if chip is not None else None
    return NominalPeak(chip.name, precision, figure) if chip is not None and figure is not None else None


def jax_matmul_precision(precision: str, platform: str) -> str:
    """The precision whose figure a JAX step of `precision` runs its matmuls at: JAX's default
    precision runs a float32 matmul as TF32 on an NVIDIA GPU (and as bf16 passes on a TPU, which a
    TPU's fp32 entry already is), so a jax fp32 row on a GPU is taken against the TF32 figure."""
    return "tf32" if precision == "fp32" and platform in ("gpu", "cuda") else precision


def precision_of_target(target: str) -> str | None:
    """The precision a row's target name carries, wherever it sits: `cuda:compile:bf16:cudnn-benchmark`,
    `reference-jax:tpu:jit:bf16`, `remote:HOST:PORT/cuda:eager:tf32` -> bf16, bf16, tf32; None if none."""
    return next((part for part in re.split(r"[:/]", target) if part in PRECISIONS), None)
