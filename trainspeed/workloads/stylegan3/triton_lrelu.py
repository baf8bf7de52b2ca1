"""StyleGAN3's filtered leaky ReLU as one fused Triton kernel per direction (CUDA GPUs).

The plain ops (`ops.filtered_lrelu`) write the 2x or 4x upsampled map several times over: after
each 1-D upsampling pass, after the leaky ReLU, after the first downsampling pass, and again when
backward recomputes them. Here one program takes one tile of one (sample, channel) plane through
all of it in registers:

    x + bias --(up along x, up along y)--> u --leaky ReLU, gain, clamp--> a --(down x, down y)--> y

Each 1-D FIR pass over a tile is a product with a small banded matrix (tl.dot, on tensor cores in
bf16): the matrices depend only on the filter, the factors, the padding and the tile shape, not on
the tile, because every tile starts at the same phase of the up- and downsampling. Neighbouring
tiles overlap by the filters' support and recompute that margin.

Backward needs only where the leaky ReLU was positive, negative or clamped: forward stores that
as 2 bits per upsampled pixel (4 to a byte) instead of keeping the upsampled tensor, and the
backward kernel runs the transposed passes with that mask, tiled over the input pixels.

The fused op is a `torch.library` custom op: torch.compile keeps it as one opaque call. Its
backward is first-order only; nothing differentiates through the generator twice (R1 runs
through D, which has no filtered leaky ReLU), and differentiating it twice raises.

On a host without CUDA the kernels run under Triton's interpreter (`TRITON_INTERPRET=1` set before
triton is imported), which is how the test suite checks them against the plain ops.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # the plain ops run instead
    triton = None
    tl = None

INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
"""Triton reads this once, when it is imported: kernels then run on host tensors, slowly."""

TILE_CHOICES = (32, 64)
"""Sizes of the upsampled tile per axis; 64 x 64 fp32 values is what 4 warps hold comfortably."""
PROGRAM_OVERHEAD_MACS = 2**17
"""What one program costs besides its products (indexing, loading its matrices and its halo,
waiting on memory), in multiply-adds: a guess that makes the planner prefer fewer, larger tiles
over the fewest multiply-adds. To be tuned on a GPU (benchmarks/check_triton_lrelu.py)."""
SIGNS_PER_BYTE = 4
NUM_WARPS = 4


def unavailable_reason(device: torch.device, up_filter: torch.Tensor | None, down_filter: torch.Tensor | None) -> str | None:
    """None where the fused kernels can run for these filters on `device`, else why not."""
    if triton is None:
        return "triton is not installed"
    if device.type != "cuda" and not (INTERPRETER and device.type == "cpu"):
        return f"the Triton kernels run on CUDA devices (this is {device.type})"
    for f in (up_filter, down_filter):
        if f is not None and f.ndim != 1:
            return "the Triton kernels take separable (1-D) filters; radial filters use the plain ops"
    return None


def _pow2(value: int) -> int:
    return max(16, 1 << max(0, math.ceil(math.log2(max(value, 1)))))


@dataclass(frozen=True)
class AxisPlan:
    """How one spatial axis is tiled, forward and backward.

    Forward: tile t computes outputs [t*out_tile, (t+1)*out_tile) from the upsampled rows
    starting at t*out_tile*down, which need input rows from x_origin + t*x_step (tl.dot blocks of
    x_block, mid_block, out_block). Backward: tile t computes input gradients [t*in_tile, ...)
    from upsampled rows b_mid_origin + t*in_tile*up and output gradients from
    b_out_origin + t*in_tile*up//down.
    """

    size: int  # input length
    mid: int  # upsampled length
    out: int  # output length
    up: int
    down: int
    up_taps: int
    down_taps: int
    pad_before: int
    # forward
    out_tile: int
    x_origin: int
    x_step: int
    phase: int
    x_block: int
    mid_block: int
    out_block: int
    # backward
    in_tile: int
    b_mid_origin: int
    b_out_origin: int
    b_shift: int
    b_in_block: int
    b_mid_block: int
    b_out_block: int

    @property
    def tiles(self) -> int:
        return -(-self.out // self.out_tile)

    @property
    def b_tiles(self) -> int:
        return -(-self.size // self.in_tile)


def _forward_candidates(up: int, down: int, up_taps: int, down_taps: int, pad_before: int, pack: int):
    phase = (-pad_before) % up
    for mid_block in TILE_CHOICES:
        # the last tile must reach every upsampled row, so its block holds down - 1 rows more
        out_tile = (mid_block - down_taps - (down - 1)) // down + 1
        while out_tile > 0 and ((out_tile * down) % up or (out_tile * down) % pack):
            out_tile -= 1
        if out_tile <= 0:
            continue
        x_block = _pow2((mid_block - 1 + up_taps - 1 + phase) // up + 1)
        yield mid_block, out_tile, x_block, _pow2(out_tile)


def _backward_candidates(up: int, down: int, up_taps: int, down_taps: int, pad_before: int):
    for mid_block in TILE_CHOICES:
        in_tile = (mid_block - up_taps) // up + 1
        while in_tile > 0 and (in_tile * up) % down:
            in_tile -= 1
        if in_tile <= 0:
            continue
        mid_origin = pad_before - up_taps + 1
        out_origin = (mid_origin - down_taps + 1) // down
        shift = mid_origin - out_origin * down
        yield mid_block, in_tile, _pow2(in_tile), _pow2((mid_block - 1 + shift) // down + 1), mid_origin, out_origin, shift


def plan_axes(
    size_y: int, size_x: int, up: int, down: int, up_taps: int, down_taps: int, padding: tuple[int, int, int, int]
) -> tuple[AxisPlan, AxisPlan]:
    """The (y, x) plans with the lowest cost per pixel: the tl.dot blocks' multiply-adds plus a fixed
    cost per program (PROGRAM_OVERHEAD_MACS)."""
    px0, px1, py0, py1 = padding
    best_forward, best_backward = None, None
    axes = ((size_y, py0, py1, 1), (size_x, px0, px1, SIGNS_PER_BYTE))  # x is packed 4 signs to a byte
    forward = [list(_forward_candidates(up, down, up_taps, down_taps, p0, pack)) for _, p0, _, pack in axes]
    backward = [list(_backward_candidates(up, down, up_taps, down_taps, p0)) for _, p0, _, _ in axes]
    if not all(forward) or not all(backward):
        raise ValueError(f"filters too long for the Triton tiles ({up_taps} and {down_taps} taps, up {up}, down {down})")
    for fy in forward[0]:
        for fx in forward[1]:
            (uy, ty, xy, oy), (ux, tx, xx, ox) = fy, fx
            macs = xy * xx * ux + uy * xy * ux + uy * ux * ox + oy * uy * ox
            cost = (macs + PROGRAM_OVERHEAD_MACS) / (ty * tx)
            if best_forward is None or cost < best_forward[0]:
                best_forward = (cost, fy, fx)
    for by in backward[0]:
        for bx in backward[1]:
            (uy, ty, iy, oy, *_), (ux, tx, ix, ox, *_) = by, bx
            macs = oy * ox * ux + uy * oy * ux + uy * ux * ix + iy * uy * ix
            cost = (macs + PROGRAM_OVERHEAD_MACS) / (ty * tx)
            if best_backward is None or cost < best_backward[0]:
                best_backward = (cost, by, bx)
    plans = []
    for axis, (size, p0, p1, _) in enumerate(axes):
        mid = size * up + p0 + p1 - up_taps + 1
        out = (mid - down_taps) // down + 1
        mid_block, out_tile, x_block, out_block = best_forward[1 + axis]
        b_mid_block, in_tile, b_in_block, b_out_block, b_mid_origin, b_out_origin, b_shift = best_backward[1 + axis]
        plans.append(
            AxisPlan(
                size=size, mid=mid, out=out, up=up, down=down, up_taps=up_taps, down_taps=down_taps, pad_before=p0,
                out_tile=out_tile, x_origin=(-p0) // up, x_step=out_tile * down // up, phase=(-p0) % up,
                x_block=x_block, mid_block=mid_block, out_block=out_block,
                in_tile=in_tile, b_mid_origin=b_mid_origin, b_out_origin=b_out_origin, b_shift=b_shift,
                b_in_block=b_in_block, b_mid_block=b_mid_block, b_out_block=b_out_block,
            )
        )  # fmt: skip
    return plans[0], plans[1]


def _band(rows: int, cols: int, taps: torch.Tensor, row_step: int, col_step: int, offset: int) -> torch.Tensor:
    """M[r, c] = taps[c * col_step + r * row_step + offset] where that index exists, else 0."""
    index = torch.arange(cols).view(1, -1) * col_step + torch.arange(rows).view(-1, 1) * row_step + offset
    valid = (index >= 0) & (index < taps.numel())
    return torch.where(valid, taps[index.clamp(0, taps.numel() - 1)], torch.zeros((), dtype=taps.dtype))


def axis_matrices(plan: AxisPlan, up_taps: tuple[float, ...], down_taps: tuple[float, ...]) -> dict[str, torch.Tensor]:
    """The banded matrices of one axis (float64, on the host), each as the kernels read it.

    up (mid_block, x_block): u = up @ x;  down (out_block, mid_block): y = down @ a;
    b_down (b_mid_block, b_out_block): grad_a = b_down @ grad_y;
    b_up (b_in_block, b_mid_block): grad_x = b_up @ grad_u.
    The filters are true convolutions (flipped), the upsampling filter carries the gain `up`.
    """
    kernel_up = torch.tensor(up_taps, dtype=torch.float64).flip(0) * plan.up
    kernel_down = torch.tensor(down_taps, dtype=torch.float64).flip(0)
    return {
        "up": _band(plan.mid_block, plan.x_block, kernel_up, -1, plan.up, -plan.phase),
        "down": _band(plan.out_block, plan.mid_block, kernel_down, -plan.down, 1, 0),
        "b_down": _band(plan.b_mid_block, plan.b_out_block, kernel_down, 1, -plan.down, plan.b_shift),
        "b_up": _band(plan.b_in_block, plan.b_mid_block, kernel_up, plan.up, -1, plan.up_taps - 1),
    }


@lru_cache(maxsize=256)
def _device_matrices(
    plans: tuple[AxisPlan, AxisPlan], up_taps: tuple[float, ...], down_taps: tuple[float, ...], dtype: torch.dtype, device: str
) -> dict[str, torch.Tensor]:
    """Per layer, once: the y matrices as they are and the x matrices transposed (x multiplies from
    the right), in the compute dtype on the device."""
    y, x = (axis_matrices(plan, up_taps, down_taps) for plan in plans)
    out = {f"y_{name}": matrix for name, matrix in y.items()}
    out.update({f"x_{name}": matrix.t() for name, matrix in x.items()})
    return {name: matrix.to(dtype).contiguous().to(device) for name, matrix in out.items()}


def _dot_precision(dtype: torch.dtype) -> str:
    """fp32 products as precise as the target asked for matmuls (TF32 only where it allows it)."""
    if dtype != torch.float32:
        return "tf32"  # ignored for 16-bit inputs
    precision = getattr(torch.backends.cuda.matmul, "fp32_precision", None)  # torch >= 2.9, no warning
    allowed = precision == "tf32" if precision is not None else torch.backends.cuda.matmul.allow_tf32
    return "tf32" if allowed else "ieee"


def _upcast(dtype: torch.dtype) -> bool:
    return INTERPRETER and dtype != torch.float32


def _output_format(x: torch.Tensor) -> torch.memory_format:
    if x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous():
        return torch.channels_last
    return torch.contiguous_format


# Sizes and tile positions vary from layer to layer: one compiled kernel serves them all (Triton
# would otherwise compile again for every size that happens to be 1 or a multiple of 16).
_SIZES = ["C", "H", "W", "MH", "MW", "OH", "OW", "PW"]
_FORWARD_TILES = ["x_origin_y", "x_step_y", "out_tile_y", "tiles_y", "x_origin_x", "x_step_x", "out_tile_x", "tiles_x"]
_BACKWARD_TILES = ["out_origin_y", "mid_origin_y", "in_tile_y", "out_origin_x", "mid_origin_x", "in_tile_x"]

if triton is not None:

    @triton.jit
    def _mm(a, b, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
        """a @ b with fp32 accumulation. UPCAST: multiply 16-bit values as fp32 (the same products
        and sums; Triton's interpreter multiplies bf16 operands wrongly)."""
        if UPCAST:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        return tl.dot(a, b, input_precision=PRECISION)

    @triton.jit(do_not_specialize=_SIZES + _FORWARD_TILES)
    def _forward_kernel(
        x_ptr, bias_ptr, y_ptr, signs_ptr, y_up_ptr, x_up_ptr, y_down_ptr, x_down_ptr,
        C, H, W, MH, MW, OH, OW, PW,
        sxn, sxc, sxh, sxw, syn, syc, syh, syw,
        x_origin_y, x_step_y, out_tile_y, tiles_y,
        x_origin_x, x_step_x, out_tile_x, tiles_x,
        down, gain, slope, clamp,
        HAS_CLAMP: tl.constexpr, WRITE_SIGNS: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
        BXY: tl.constexpr, BUY: tl.constexpr, BOY: tl.constexpr,
        BXX: tl.constexpr, BUX: tl.constexpr, BOX: tl.constexpr,
    ):  # fmt: skip
        plane = tl.program_id(0).to(tl.int64)
        tile_y = tl.program_id(1)
        tile_x = tl.program_id(2)
        n = plane // C
        c = plane % C
        dtype = x_ptr.dtype.element_ty

        rows = x_origin_y + tile_y * x_step_y + tl.arange(0, BXY)
        cols = x_origin_x + tile_x * x_step_x + tl.arange(0, BXX)
        inside = (rows[:, None] >= 0) & (rows[:, None] < H) & (cols[None, :] >= 0) & (cols[None, :] < W)
        x = tl.load(x_ptr + n * sxn + c * sxc + rows[:, None] * sxh + cols[None, :] * sxw, mask=inside, other=0.0)
        bias = tl.load(bias_ptr + c).to(tl.float32)
        x = tl.where(inside, x.to(tl.float32) + bias, 0.0).to(dtype)  # the padding stays zero

        # upsample along x, then y: u = Uy @ x @ Ux^T
        i_xx = tl.arange(0, BXX)
        i_ux = tl.arange(0, BUX)
        i_uy = tl.arange(0, BUY)
        i_xy = tl.arange(0, BXY)
        x_up = tl.load(x_up_ptr + i_xx[:, None] * BUX + i_ux[None, :])
        t = _mm(x, x_up, PRECISION, UPCAST).to(dtype)
        y_up = tl.load(y_up_ptr + i_uy[:, None] * BXY + i_xy[None, :])
        u = _mm(y_up, t, PRECISION, UPCAST)

        positive = u > 0
        a = tl.where(positive, u, u * slope) * gain
        code = tl.where(positive, 2, 1)
        if HAS_CLAMP:
            code = tl.where(tl.abs(a) < clamp, code, 0)
            a = tl.minimum(tl.maximum(a, -clamp), clamp)

        if WRITE_SIGNS:
            # each tile stores the rows and columns it owns (the last one also its margin)
            owned_y = out_tile_y * down
            owned_x = out_tile_x * down
            mid_rows = tile_y * owned_y + i_uy
            mid_cols = tile_x * owned_x + i_ux
            own_rows = ((i_uy < owned_y) | (tile_y == tiles_y - 1)) & (mid_rows < MH)
            code = tl.where(own_rows[:, None] & (mid_cols[None, :] < MW), code, 0)
            packed = tl.sum(tl.reshape(code, (BUY, BUX // 4, 4)) << (tl.arange(0, 4) * 2)[None, None, :], axis=2)
            i_b = tl.arange(0, BUX // 4)
            byte_cols = tile_x * (owned_x // 4) + i_b
            own_bytes = ((i_b * 4 < owned_x) | (tile_x == tiles_x - 1)) & (byte_cols * 4 < MW)
            tl.store(
                signs_ptr + plane * MH * PW + mid_rows[:, None] * PW + byte_cols[None, :],
                packed.to(tl.uint8),
                mask=own_rows[:, None] & own_bytes[None, :],
            )

        # downsample along x, then y: y = Dy @ a @ Dx^T
        i_ox = tl.arange(0, BOX)
        i_oy = tl.arange(0, BOY)
        x_down = tl.load(x_down_ptr + i_ux[:, None] * BOX + i_ox[None, :])
        t = _mm(a.to(dtype), x_down, PRECISION, UPCAST).to(dtype)
        y_down = tl.load(y_down_ptr + i_oy[:, None] * BUY + i_uy[None, :])
        y = _mm(y_down, t, PRECISION, UPCAST)

        out_rows = tile_y * out_tile_y + i_oy
        out_cols = tile_x * out_tile_x + i_ox
        keep = ((i_oy < out_tile_y) & (out_rows < OH))[:, None] & ((i_ox < out_tile_x) & (out_cols < OW))[None, :]
        tl.store(y_ptr + n * syn + c * syc + out_rows[:, None] * syh + out_cols[None, :] * syw, y.to(dtype), mask=keep)

    @triton.jit(do_not_specialize=_SIZES + _BACKWARD_TILES)
    def _backward_kernel(
        gy_ptr, signs_ptr, gx_ptr, y_down_ptr, x_down_ptr, y_up_ptr, x_up_ptr,
        C, H, W, MH, MW, OH, OW, PW,
        sgn, sgc, sgh, sgw, sxn, sxc, sxh, sxw,
        out_origin_y, mid_origin_y, in_tile_y,
        out_origin_x, mid_origin_x, in_tile_x,
        up, down, gain, slope,
        PRECISION: tl.constexpr, UPCAST: tl.constexpr,
        BXY: tl.constexpr, BUY: tl.constexpr, BOY: tl.constexpr,
        BXX: tl.constexpr, BUX: tl.constexpr, BOX: tl.constexpr,
    ):  # fmt: skip
        plane = tl.program_id(0).to(tl.int64)
        tile_y = tl.program_id(1)
        tile_x = tl.program_id(2)
        n = plane // C
        c = plane % C
        dtype = gy_ptr.dtype.element_ty
        i_oy = tl.arange(0, BOY)
        i_ox = tl.arange(0, BOX)
        i_uy = tl.arange(0, BUY)
        i_ux = tl.arange(0, BUX)
        i_xy = tl.arange(0, BXY)
        i_xx = tl.arange(0, BXX)

        out_rows = out_origin_y + tile_y * (in_tile_y * up // down) + i_oy
        out_cols = out_origin_x + tile_x * (in_tile_x * up // down) + i_ox
        inside = (out_rows[:, None] >= 0) & (out_rows[:, None] < OH) & (out_cols[None, :] >= 0) & (out_cols[None, :] < OW)
        g = tl.load(gy_ptr + n * sgn + c * sgc + out_rows[:, None] * sgh + out_cols[None, :] * sgw, mask=inside, other=0.0)

        # grad_a = Dy^T @ grad_y @ Dx
        x_down = tl.load(x_down_ptr + i_ox[:, None] * BUX + i_ux[None, :])
        t = _mm(g.to(dtype), x_down, PRECISION, UPCAST).to(dtype)
        y_down = tl.load(y_down_ptr + i_uy[:, None] * BOY + i_oy[None, :])
        grad_a = _mm(y_down, t, PRECISION, UPCAST)

        mid_rows = mid_origin_y + tile_y * in_tile_y * up + i_uy
        mid_cols = mid_origin_x + tile_x * in_tile_x * up + i_ux
        inside = (mid_rows[:, None] >= 0) & (mid_rows[:, None] < MH) & (mid_cols[None, :] >= 0) & (mid_cols[None, :] < MW)
        byte = tl.load(signs_ptr + plane * MH * PW + mid_rows[:, None] * PW + (mid_cols[None, :] >> 2), mask=inside, other=0)
        code = (byte.to(tl.int32) >> ((mid_cols[None, :] & 3) * 2)) & 3
        factor = tl.where(code == 2, gain, tl.where(code == 1, gain * slope, 0.0))
        grad_u = (grad_a * factor).to(dtype)

        # grad_x = Uy^T @ grad_u @ Ux
        x_up = tl.load(x_up_ptr + i_ux[:, None] * BXX + i_xx[None, :])
        t = _mm(grad_u, x_up, PRECISION, UPCAST).to(dtype)
        y_up = tl.load(y_up_ptr + i_xy[:, None] * BUY + i_uy[None, :])
        grad_x = _mm(y_up, t, PRECISION, UPCAST)

        in_rows = tile_y * in_tile_y + i_xy
        in_cols = tile_x * in_tile_x + i_xx
        keep = ((i_xy < in_tile_y) & (in_rows < H))[:, None] & ((i_xx < in_tile_x) & (in_cols < W))[None, :]
        tl.store(gx_ptr + n * sxn + c * sxc + in_rows[:, None] * sxh + in_cols[None, :] * sxw, grad_x.to(dtype), mask=keep)


def _plans(shape, up, down, up_taps, down_taps, padding) -> tuple[AxisPlan, AxisPlan]:
    return _cached_plans(int(shape[2]), int(shape[3]), up, down, len(up_taps), len(down_taps), tuple(padding))


@lru_cache(maxsize=256)
def _cached_plans(size_y, size_x, up, down, up_taps, down_taps, padding) -> tuple[AxisPlan, AxisPlan]:
    return plan_axes(size_y, size_x, up, down, up_taps, down_taps, padding)


def _signs_shape(batch: int, channels: int, plan_y: AxisPlan, plan_x: AxisPlan) -> tuple[int, int, int]:
    return (batch * channels, plan_y.mid, -(-plan_x.mid // SIGNS_PER_BYTE))


@torch.library.custom_op("trainspeed::filtered_lrelu", mutates_args=())
def _fused_forward(
    x: torch.Tensor,
    bias: torch.Tensor,
    up_taps: list[float],
    down_taps: list[float],
    up: int,
    down: int,
    padding: list[int],
    gain: float,
    slope: float,
    clamp: float | None,
    keep_signs: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    batch, channels = x.shape[:2]
    plan_y, plan_x = _plans(x.shape, up, down, up_taps, down_taps, padding)
    y = torch.empty((batch, channels, plan_y.out, plan_x.out), dtype=x.dtype, device=x.device,
                    memory_format=_output_format(x))  # fmt: skip
    signs_shape = _signs_shape(batch, channels, plan_y, plan_x) if keep_signs else (0,)
    signs = torch.empty(signs_shape, dtype=torch.uint8, device=x.device)
    matrices = _device_matrices((plan_y, plan_x), tuple(up_taps), tuple(down_taps), x.dtype, str(x.device))
    grid = (batch * channels, plan_y.tiles, plan_x.tiles)
    _forward_kernel[grid](
        x, bias.to(x.dtype), y, signs,
        matrices["y_up"], matrices["x_up"], matrices["y_down"], matrices["x_down"],
        channels, x.shape[2], x.shape[3], plan_y.mid, plan_x.mid, plan_y.out, plan_x.out,
        -(-plan_x.mid // SIGNS_PER_BYTE),
        *x.stride(), *y.stride(),
        plan_y.x_origin, plan_y.x_step, plan_y.out_tile, plan_y.tiles,
        plan_x.x_origin, plan_x.x_step, plan_x.out_tile, plan_x.tiles,
        down, gain, slope, 0.0 if clamp is None else clamp,
        HAS_CLAMP=clamp is not None, WRITE_SIGNS=keep_signs, PRECISION=_dot_precision(x.dtype),
        UPCAST=_upcast(x.dtype),
        BXY=plan_y.x_block, BUY=plan_y.mid_block, BOY=plan_y.out_block,
        BXX=plan_x.x_block, BUX=plan_x.mid_block, BOX=plan_x.out_block,
        num_warps=NUM_WARPS,
    )  # fmt: skip
    return y, signs


@_fused_forward.register_fake
def _(x, bias, up_taps, down_taps, up, down, padding, gain, slope, clamp, keep_signs):
    batch, channels = x.shape[:2]
    plan_y, plan_x = _plans(x.shape, up, down, up_taps, down_taps, padding)
    y = torch.empty((batch, channels, plan_y.out, plan_x.out), dtype=x.dtype, device=x.device,
                    memory_format=_output_format(x))  # fmt: skip
    signs_shape = _signs_shape(batch, channels, plan_y, plan_x) if keep_signs else (0,)
    return y, x.new_empty(signs_shape, dtype=torch.uint8)


@torch.library.custom_op("trainspeed::filtered_lrelu_backward", mutates_args=())
def _fused_backward(
    grad_y: torch.Tensor,
    signs: torch.Tensor,
    x_shape: list[int],
    x_strides: list[int],
    up_taps: list[float],
    down_taps: list[float],
    up: int,
    down: int,
    padding: list[int],
    gain: float,
    slope: float,
) -> torch.Tensor:
    batch, channels = x_shape[:2]
    plan_y, plan_x = _plans(x_shape, up, down, up_taps, down_taps, padding)
    grad_x = torch.empty_strided(x_shape, x_strides, dtype=grad_y.dtype, device=grad_y.device)
    matrices = _device_matrices((plan_y, plan_x), tuple(up_taps), tuple(down_taps), grad_y.dtype, str(grad_y.device))
    grid = (batch * channels, plan_y.b_tiles, plan_x.b_tiles)
    _backward_kernel[grid](
        grad_y, signs, grad_x,
        matrices["y_b_down"], matrices["x_b_down"], matrices["y_b_up"], matrices["x_b_up"],
        channels, x_shape[2], x_shape[3], plan_y.mid, plan_x.mid, plan_y.out, plan_x.out,
        -(-plan_x.mid // SIGNS_PER_BYTE),
        *grad_y.stride(), *grad_x.stride(),
        plan_y.b_out_origin, plan_y.b_mid_origin, plan_y.in_tile,
        plan_x.b_out_origin, plan_x.b_mid_origin, plan_x.in_tile,
        up, down, gain, slope,
        PRECISION=_dot_precision(grad_y.dtype), UPCAST=_upcast(grad_y.dtype),
        BXY=plan_y.b_in_block, BUY=plan_y.b_mid_block, BOY=plan_y.b_out_block,
        BXX=plan_x.b_in_block, BUX=plan_x.b_mid_block, BOX=plan_x.b_out_block,
        num_warps=NUM_WARPS,
    )  # fmt: skip
    return grad_x


@_fused_backward.register_fake
def _(grad_y, signs, x_shape, x_strides, up_taps, down_taps, up, down, padding, gain, slope):
    return torch.empty_strided(x_shape, x_strides, dtype=grad_y.dtype, device=grad_y.device)


def _setup_context(ctx, inputs, output) -> None:
    x, bias, up_taps, down_taps, up, down, padding, gain, slope, _clamp, _keep_signs = inputs
    ctx.save_for_backward(output[1])
    ctx.arguments = (list(x.shape), list(x.stride()), up_taps, down_taps, up, down, padding, gain, slope)
    ctx.dtypes = (x.dtype, bias.dtype)


def _backward(ctx, grad_y, _grad_signs):
    (signs,) = ctx.saved_tensors
    if signs.numel() == 0:
        raise RuntimeError("the fused filtered leaky ReLU ran without keeping its sign mask (no gradient was needed then)")
    x_dtype, bias_dtype = ctx.dtypes
    grad_x = _fused_backward(grad_y.to(x_dtype), signs, *ctx.arguments)
    grad_bias = grad_x.sum(dim=[0, 2, 3], dtype=torch.float32).to(bias_dtype)
    return grad_x, grad_bias, None, None, None, None, None, None, None, None, None


_fused_forward.register_autograd(_backward, setup_context=_setup_context)


def filtered_lrelu(
    x: torch.Tensor,
    bias: torch.Tensor,
    up_taps: tuple[float, ...],
    down_taps: tuple[float, ...],
    up: int,
    down: int,
    padding: tuple[int, int, int, int],
    gain: float,
    slope: float,
    clamp: float | None,
) -> torch.Tensor:
    """`ops.filtered_lrelu` for 1-D filters given as taps ((1.0,) for none), fused.

    The sign mask is kept only where a gradient will be asked for."""
    keep_signs = torch.is_grad_enabled() and (x.requires_grad or bias.requires_grad)
    y, _ = _fused_forward(
        x, bias, list(up_taps), list(down_taps), int(up), int(down), list(padding), float(gain), float(slope),
        None if clamp is None else float(clamp), keep_signs,
    )  # fmt: skip
    return y
