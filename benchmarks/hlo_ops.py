"""A compiled XLA program's optimized HLO text, read for what each op is: its kind (a matmul
fusion, a reduction, a copy), the buffers it reads and writes with their tiled sizes and memory
space, the matmul FLOPs it runs, and the PyTorch op it came from. `benchmarks/tpu_profile.py`
joins these to a trace's op times. Plain text parsing: no JAX needed."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

DTYPE_BYTES = {
    "pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
}
SHAPE = re.compile(r"\b(" + "|".join(DTYPE_BYTES) + r")\[([0-9,]*)\](?:\{([^}]*)\})?")
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+) = (.*)$")
COMPUTATION = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
MOVES = {"parameter", "copy", "transpose", "bitcast", "reshape", "tuple", "get-tuple-element", "slice",
         "concatenate", "pad", "dynamic-slice", "dynamic-update-slice", "broadcast", "constant", "iota",
         "bitcast-convert", "copy-start", "copy-done", "convert"}
"""Ops that move or re-lay data (a `convert` alone is a cast on the way)."""
CATEGORIES = ("matmul/conv", "reduction", "copy/transpose/layout", "elementwise", "async start/done", "other")


@dataclass
class Buffer:
    dtype: str
    dims: list[int]
    layout: str

    @property
    def logical_bytes(self) -> int:
        count = 1
        for dim in self.dims:
            count *= dim
        return count * DTYPE_BYTES[self.dtype]

    @property
    def on_chip(self) -> bool:
        """`S(1)`: memory space assignment placed it in on-chip memory (VMEM), not HBM."""
        return "S(1)" in self.layout

    @property
    def tiled_bytes(self) -> int:
        """The bytes its tiled layout takes: the two most minor dimensions rounded up to the tile
        (`T(8,128)`; a packed second tile such as `(2,1)` multiplies the rows), which is where a
        dimension of 34 along the 128 lanes costs 128."""
        match = re.match(r"([0-9,]*)", self.layout)
        order = [int(x) for x in match.group(1).split(",") if x] if match else []
        tiles = re.findall(r"\(([0-9,]+)\)", self.layout.split(":", 1)[1]) if ":" in self.layout else []
        if not order or not tiles or not self.dims:
            return self.logical_bytes
        dims = list(self.dims)
        first = [int(x) for x in tiles[0].split(",")]
        packing = [int(x) for x in tiles[1].split(",")] if len(tiles) > 1 else [1]
        rows, lanes = (first + [1])[:2] if len(first) == 2 else (1, first[0])
        rows *= packing[0] if len(packing) == 2 else 1
        dims[order[0]] = -(-dims[order[0]] // lanes) * lanes
        if len(order) > 1:
            dims[order[1]] = -(-dims[order[1]] // rows) * rows
        count = 1
        for dim in dims:
            count *= dim
        return count * DTYPE_BYTES[self.dtype]


def _buffers(text: str) -> list[Buffer]:
    return [Buffer(dtype, [int(x) for x in dims.split(",") if x], layout or "") for dtype, dims, layout in SHAPE.findall(text)]


def _closing(text: str, start: int) -> int:
    """The index just past the parenthesis that closes the one at `start`."""
    depth = 0
    for index in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return index + 1
    return len(text)


@dataclass
class Instruction:
    name: str
    opcode: str
    result: list[Buffer]
    operands: list[Buffer]
    kind: str = ""
    calls: str = ""
    op_name: str = ""
    operand_names: list[str] = field(default_factory=list)
    attributes: str = ""


def parse_instruction(line: str) -> Instruction | None:
    match = INSTRUCTION.match(line)
    if not match:
        return None
    name, rest = match.groups()
    end = _closing(rest, 0) if rest.startswith("(") else rest.find(" ")
    if end <= 0:
        return None
    result_text, rest = rest[:end], rest[end:].lstrip()
    paren = rest.find("(")
    if paren <= 0:
        return None
    opcode = rest[:paren]
    close = _closing(rest, paren)
    operands_text, attributes = rest[paren:close], rest[close:]
    kind = re.search(r"kind=(k\w+)", attributes)
    calls = re.search(r"calls=%?([\w.\-]+)", attributes)
    op_name = re.search(r'op_name="([^"]*)"', attributes)
    return Instruction(name, opcode, _buffers(result_text), _buffers(operands_text), kind.group(1) if kind else "",
                       calls.group(1) if calls else "", op_name.group(1) if op_name else "",
                       re.findall(r"%([\w.\-]+)", operands_text), attributes)


@dataclass
class Program:
    """The optimized HLO of one compiled step: every instruction by name, and each computation's opcodes."""

    instructions: dict[str, Instruction] = field(default_factory=dict)
    opcodes: dict[str, Counter] = field(default_factory=dict)
    calls: dict[str, list[str]] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    entry: str = ""

    def buffers(self, instruction: Instruction) -> list[Buffer]:
        """What an op writes and reads: its result and its operands, whose shapes are printed
        beside them in some HLO texts and found by the operand's name in others."""
        operands = instruction.operands
        if not operands:
            operands = [buffer for name in instruction.operand_names if name in self.instructions
                        for buffer in self.instructions[name].result]
        return instruction.result + operands

    def called_opcodes(self, computation: str, seen: set[str] | None = None) -> Counter:
        """The opcodes of a computation and of those it calls (a fusion inside a fusion)."""
        seen = seen if seen is not None else set()
        if computation in seen:
            return Counter()
        seen.add(computation)
        total = Counter(self.opcodes.get(computation, {}))
        for callee in self.calls.get(computation, []):
            total.update(self.called_opcodes(callee, seen))
        return total

    def called_instructions(self, computation: str, seen: set[str] | None = None) -> list[Instruction]:
        seen = seen if seen is not None else set()
        if computation in seen:
            return []
        seen.add(computation)
        found = [self.instructions[name] for name in self.members.get(computation, []) if name in self.instructions]
        for callee in self.calls.get(computation, []):
            found += self.called_instructions(callee, seen)
        return found

    def matmul_flops(self, instruction: Instruction) -> float:
        """The multiply-adds (x2) of the matmuls an op runs, itself or inside its fusion."""
        inner = self.called_instructions(instruction.calls) if instruction.calls else [instruction]
        return sum(self._one_matmul_flops(op) for op in inner if op.opcode in ("convolution", "dot"))

    def _one_matmul_flops(self, op: Instruction) -> float:
        """2 x result elements x the multiply-adds behind each. A TPU writes matmuls as
        convolutions: each output sums the kernel's input features times the window taps that
        meet the (padded) input, min(output, input) x window / output per spatial dimension (a
        window as long as the tokens is a weight gradient's sum over them; one padded on both
        sides around an input of 1 meets it once); a window over a dilated batch (`lhs_dilate`)
        is a batched matmul, one tap."""
        if not op.result or len(op.operand_names) < 2:
            return 0.0
        result = 1
        for dim in op.result[0].dims:
            result *= dim
        operands = [self.instructions.get(name) for name in op.operand_names[:2]]
        if any(operand is None or not operand.result for operand in operands):
            return 0.0
        lhs, rhs = operands[0].result[0].dims, operands[1].result[0].dims
        if op.opcode == "dot":
            contracting = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", op.attributes)
            size = 1
            for index in (int(x) for x in contracting.group(1).split(",") if x) if contracting else ():
                size *= lhs[index]
            return 2.0 * result * size
        labels = re.search(r"dim_labels=(\w+)_(\w+)->(\w+)", op.attributes)
        if not labels or len(labels.group(1)) != len(lhs) or len(labels.group(2)) != len(rhs) or "i" not in labels.group(2):
            return 0.0
        lhs_labels, rhs_labels, out_labels = labels.groups()
        taps = float(rhs[rhs_labels.index("i")])
        window = re.search(r"window=\{([^}]*)\}", op.attributes)
        sizes = re.search(r"size=([0-9x]+)", window.group(1)) if window else None
        if sizes and "lhs_dilate" not in window.group(1):
            for digit, length in enumerate(int(x) for x in sizes.group(1).split("x")):
                label = str(digit)
                if label in lhs_labels and label in out_labels:
                    inputs, outputs = lhs[lhs_labels.index(label)], op.result[0].dims[out_labels.index(label)]
                    taps *= length * min(inputs, outputs) / max(1, outputs)
        return 2.0 * result * taps


def parse_program(text: str) -> Program:
    program = Program()
    current = ""
    for line in text.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{"):
            match = COMPUTATION.match(line)
            if match:
                current = match.group(2)
                if match.group(1):
                    program.entry = current
                program.opcodes.setdefault(current, Counter())
                program.calls.setdefault(current, [])
                program.members.setdefault(current, [])
            continue
        instruction = parse_instruction(line)
        if instruction is None or not current:
            continue
        program.instructions.setdefault(instruction.name, instruction)
        program.opcodes[current][instruction.opcode] += 1
        program.members[current].append(instruction.name)
        for callee in re.findall(r"(?:calls|to_apply|body|condition|branch_computations)=\{?%?([\w.\-]+)", line):
            program.calls[current].append(callee)
    return program


def category(program: Program, instruction: Instruction) -> str:
    """What one op of the step is, read from its fused computation's opcodes."""
    if is_async(instruction):
        return "async start/done"
    ops = Counter({instruction.opcode: 1})
    if instruction.opcode == "fusion" and instruction.calls:
        ops = program.called_opcodes(instruction.calls)
    if ops["convolution"] or ops["dot"]:
        return "matmul/conv"
    if ops["reduce"] or ops["reduce-window"] or ops["select-and-scatter"]:
        return "reduction"
    if set(ops) <= MOVES:
        return "copy/transpose/layout"
    if instruction.opcode == "fusion" or instruction.opcode in ("add", "multiply", "subtract", "divide", "select",
                                                                "maximum", "exponential", "tanh", "rsqrt"):
        return "elementwise"
    return "other"


def source(op_name: str) -> str:
    """Which PyTorch op of the step an HLO op came from, and in which pass, from the op_name JAX
    records: `transpose(jvp(linear))/.../dot_general` is "backward linear: dot_general"."""
    path = op_name.split("jit(train)/", 1)[-1].split(";", 1)[0]
    if not path:
        return "(no source: the optimizer's update and copies)"
    first, _, rest = path.partition("/")
    last = (rest or first).rsplit("/", 1)[-1]
    direction = "backward" if first.startswith("transpose(") else "forward" if "jvp(" in first else "update"
    inner = re.sub(r"\[.*?\]", "", re.sub(r"^(?:transpose\(|jvp\()+", "", first).rstrip(")"))
    return f"{direction} {inner}: {last}"


def is_async(instruction: Instruction) -> bool:
    """The issue or the wait of a copy that runs beside the other ops (between HBM and on-chip
    memory): its bytes move while others run, so they are not counted against its own time."""
    return instruction.opcode.endswith(("-start", "-done"))


def shape_text(buffer: Buffer) -> str:
    tiling = re.search(r"T\([0-9,]+\)(?:\([0-9,]+\))?", buffer.layout)
    return (f"{buffer.dtype}[{','.join(map(str, buffer.dims))}]" + (f"{{{tiling.group(0)}}}" if tiling else "")
            + ("S1" if buffer.on_chip else ""))
