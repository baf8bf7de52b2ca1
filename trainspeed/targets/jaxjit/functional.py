"""A workload's own training step as one pure JAX function, traced through torchax.

torchax runs PyTorch ops as JAX ops, but it has no autograd of its own: a `loss.backward()` on its
tensors has nothing to differentiate. So the workload's `train_step` is traced twice inside one
function, and the function is jitted as a whole (one XLA program per batch shape):

1. under `jax.value_and_grad` over the trained parameters, with `Tensor.backward` noting the loss
   it was called on (that loss is the function value) and every optimizer's `step` and
   `zero_grad` held back;
2. then the workload's own torch optimizers step on the gradients, on torchax tensors: the same
   update code and hyperparameters as on every other target.

Everything a step reads and writes is one flat state (`dict[str, jax.Array]`, named
`param/NET/NAME`, `buffer/NET/NAME`, `optim/OPT/INDEX/KEY` and `rng`), which goes in and comes out
of the function: parameters, buffers a forward pass updates (BatchNorm's statistics), optimizer
states and the random key of dropout. The learning rates are an input (one per param group), so a
schedule never recompiles the step.

A step of several updates declares its phases (`trainspeed.workloads.phases`, StyleGAN3's G, D and
R1): each phase's loss is differentiated over the parameters its optimizer steps, and that
optimizer updates them before the next phase's loss is traced, all in one program per list of
phases. A gradient penalty asks for its input gradient through
`trainspeed.workloads.differentiation`, which is `jax.grad` here, and a workload's activation
checkpoints are `jax.checkpoint`.

What cannot be traced is refused in one line naming the op and the workload's source line
(`StepNotTraceable`): an op torchax has no lowering for, a value read on the host (`.item()`, an
`if` on a tensor), a step that calls `backward()` more than once or `torch.autograd.grad`.
"""

from __future__ import annotations

import contextlib
import functools
import traceback
from typing import Any, Callable, Iterator

import torch

from trainspeed.errors import UsageError
from trainspeed.own_code import machinery
from trainspeed.targets.jaxjit import lowerings, qkv_attention, scanned_layers
from trainspeed.workloads import differentiation
from trainspeed.workloads.base import Batch, Trainable, setup_optimizers
from trainspeed.workloads.phases import PhasedTrainable, StepPhase

State = dict[str, Any]
"""Flat state of a step: name -> jax.Array."""

RNG_KEY = "rng"

FRESH_STATE_IS_ZERO = ("Adam", "AdamW", "SGD", "RAdam")
"""Optimizers whose state, created at their first step, is all zeros (moments, step counters, an
SGD momentum buffer without dampening, which equals the first gradient either way), and whose
update traces on torchax: the initial state is then written before the first step, so one
program serves every step. (RMSprop reads a value on the host in its update; Adamax calls an op
torchax lacks.)"""

TRACED_FLAGS = (("capturable", True), ("foreach", False), ("fused", None), ("differentiable", False))
"""Param-group flags set while tracing: torch's tensor-only update (no `.item()`), one tensor at a time."""


class StepNotTraceable(UsageError):
    """The workload's step does something a traced JAX function cannot."""


def _jax():
    import jax
    import torchax

    _torch_autocast_policies()
    return jax, torchax


def _torch_autocast_policies() -> None:
    """torchax's autocast made to cast as torch's does, where it does not:

    - it looks a policy up by the function it dispatches, and runs `F.linear`, `torch.einsum` and
      `F.scaled_dot_product_attention` as functions of its own, never reaching their aten ops'
      policies: an nn.Linear would stay in fp32 under bf16. They get torch's lower-precision policy;
    - it dispatches `F.conv2d` and its kin as `aten.convolution`, which its table lacks (it lists
      `conv2d`, `conv_transpose2d`, ...): every convolution, and with it a CNN's activations, would
      stay in fp32 under bf16. It gets the lower-precision policy too, as its named forms have, and
      so do the functions themselves (`lowerings.convolution`), whose arguments PyTorch checks for
      one dtype before the aten op is reached;
    - its `promote` policy (cat, stack, index_copy) reads `.dtype` of each positional argument and
      fails on cat's list of tensors; JAX's own ops promote mixed dtypes the same way, so those
      entries are dropped."""
    from torchax import amp
    from torchax.ops import ops_registry

    for function in ops_registry.all_torch_functions:
        if getattr(function, "__name__", "") in ("linear", "einsum", "scaled_dot_product_attention"):
            amp.autocast_policy.setdefault(function, amp.CastPolicy.LOWER_PRECISION_FP)
    from trainspeed.targets.jaxjit.lowerings import convolution

    for function in (torch.ops.aten.convolution.default, *convolution.FUNCTIONS):
        amp.autocast_policy.setdefault(function, amp.CastPolicy.LOWER_PRECISION_FP)
    for op, policy in list(amp.autocast_policy.items()):
        if policy is amp.CastPolicy.PROMOTE:
            del amp.autocast_policy[op]


def _foreach_in_place(env: Any) -> None:
    """The in-place `_foreach` ops an EMA update calls (`torch._foreach_lerp_` and the like), which
    torchax has no lowering for, run as the same op on each tensor in turn: in one traced program
    that is the same computation."""
    aten = torch.ops.aten

    def each(method: str) -> Callable[..., Any]:
        def run(selves: list[torch.Tensor], *args: Any, **kwargs: Any) -> None:
            lists = [arg for arg in args if isinstance(arg, (list, tuple))]
            plain = [arg for arg in args if not isinstance(arg, (list, tuple))]
            for index, tensor in enumerate(selves):
                getattr(tensor, method)(*(values[index] for values in lists), *plain, **kwargs)

        return run

    from torchax.ops import ops_registry

    missing = [(op, method) for op, method in ((aten._foreach_lerp_.Scalar, "lerp_"), (aten._foreach_mul_.Scalar, "mul_"),
                                               (aten._foreach_add_.List, "add_"), (aten._foreach_copy_.default, "copy_"))
               if op not in ops_registry.all_aten_ops]
    for op, method in missing:  # as torch-level decompositions, which the environment reads on load_ops
        ops_registry.register_torch_dispatch_op(op, each(method), is_jax_function=False, is_user_defined=True)
    if missing:
        env.load_ops()


def _dimensioned_dtype_wins(env: Any) -> None:
    """PyTorch gives `x * 2.0`, `x + 0.5`, `x / 3.0` and `x * gain` with a 0-dim fp32 `gain` the
    dtype of a bf16 x: a Python number or a 0-dim tensor does not take part in the result's dtype
    beside a tensor with dimensions of the same kind. torchax's lowerings of add, sub, mul and div
    cast a result with a Python float to the default dtype (fp32), and JAX promotes bf16 with a 0-dim
    fp32 array to fp32. Under autocast that moved what follows such an op to fp32 (StyleGAN3's
    filtered leaky ReLU, `* gain`, and every FIR filter after it ran at twice the bytes). The same
    lowerings run here, and such a result is cast to the dtype PyTorch gives it."""
    import jax.numpy as jnp
    from torchax.ops import ops_registry

    def floating(value: Any) -> bool:
        return hasattr(value, "dtype") and jnp.issubdtype(value.dtype, jnp.floating)

    def torch_dtype(x: Any, y: Any) -> Any:
        """The dimensioned floating operand's dtype where PyTorch keeps it; None where JAX's result stands."""
        for tensor, other in ((x, y), (y, x)):
            if floating(tensor) and (isinstance(other, float)
                                     or (jnp.ndim(tensor) > 0 and floating(other) and jnp.ndim(other) == 0)):
                return tensor.dtype
        return None

    def keeping_dtype(lowering: Callable[..., Any]) -> Callable[..., Any]:
        def lowered(x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
            result, dtype = lowering(x, y, *args, **kwargs), torch_dtype(x, y)
            return result if dtype is None or result.dtype == dtype else result.astype(dtype)

        lowered.keeps_dtype = True  # type: ignore[attr-defined]
        return lowered

    aten = torch.ops.aten
    overloads = (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar, aten.mul.Tensor,
                 aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
    for overload in overloads:
        original = env._get_op_or_decomp(overload)
        if not getattr(original.func, "keeps_dtype", False):  # replaced as registering does, without its warning
            ops_registry.all_aten_ops[overload] = ops_registry.Operator(
                overload, keeping_dtype(original.func), is_jax_function=True, is_user_defined=True, needs_env=False,
                is_view_op=False)
    env.load_ops()


def workload_line(frames: traceback.StackSummary) -> str | None:
    """The innermost frame of the workload's own code, as `file:line in function: code`: frames of
    torch, torchax, JAX, trainspeed's own and the standard library are passed over, trainspeed's
    built-in workloads are the workload here."""
    import jax
    import torchax

    return machinery(torch, torchax, jax).workload_line(frames)


def refusal_line(frames: traceback.StackSummary) -> str | None:
    """`workload_line` as a refusal says it: the code quoted, so its own colons read as code."""
    line = workload_line(frames)
    if line is None:
        return None
    place, _, code = line.partition(": ")
    return f"{place} (`{code}`)" if code else place


def _here() -> str:
    """` at FILE:LINE in FUNCTION (`CODE`)` of the workload's line that called the caller, or nothing."""
    line = refusal_line(traceback.extract_stack()[:-2])
    return f" at {line}" if line else ""


NO_DERIVATIVE_MARKERS = ("Linearization failed", "Differentiation rule for", "JVP not implemented", "VJP not implemented",
                         "Transpose rule", "not implemented for transpose", "Reverse-mode differentiation does not work")
"""JAX's words for an op it cannot differentiate."""


def _op_name(func: Any) -> str:
    if isinstance(func, torch._ops.OpOverload):
        return f"aten::{func.overloadpacket.__name__}" if func.namespace == "aten" else str(func)
    return getattr(func, "__name__", str(func))


def _lowering_places() -> dict[tuple[str, str], list[tuple[int, str]]]:
    """Each registered lowering's (file, function name) -> its first lines and ops' names: JAX
    rebuilds the frames of a failed derivative's stack with code objects of its own, so a frame is
    matched to a lowering by its file, name and line."""
    from torchax.ops import ops_registry

    places: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for registry in (ops_registry.all_aten_ops, ops_registry.all_torch_functions):
        for key, operator in registry.items():
            code = getattr(operator.func, "__code__", None)
            if code is not None:
                places.setdefault((code.co_filename, code.co_name), []).append((code.co_firstlineno, _op_name(key)))
    return places


def _op_of_frame(places: dict[tuple[str, str], list[tuple[int, str]]], frame_link: Any) -> str | None:
    code = frame_link.tb_frame.f_code
    candidates = [(first, name) for first, name in places.get((code.co_filename, code.co_name), [])
                  if first <= frame_link.tb_lineno]
    return max(candidates)[1] if candidates else None


def _is_dispatch(frame_link: Any) -> bool:
    code = frame_link.tb_frame.f_code
    return code.co_name == "dispatch" and "torchax" in code.co_filename


def traced_op(error: BaseException | None) -> str | None:
    """The innermost torch op torchax was running where `error` arose, through the errors it was
    raised from: the dispatch frame's `func` where the frame is live, else the lowering that frame
    called (JAX keeps only a copy of the stack of an op whose derivative failed after the trace)."""
    places: dict[tuple[str, str], list[tuple[int, str]]] | None = None
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        found = None
        frame_link = error.__traceback__
        while frame_link is not None:
            if _is_dispatch(frame_link):
                if "func" in frame_link.tb_frame.f_locals:
                    found = _op_name(frame_link.tb_frame.f_locals["func"])
                elif frame_link.tb_next is not None:
                    places = _lowering_places() if places is None else places
                    found = _op_of_frame(places, frame_link.tb_next) or found
            frame_link = frame_link.tb_next
        if found:
            return found
        error = error.__cause__ or error.__context__
    return None


def _why(error: BaseException) -> tuple[str, str]:
    """What went wrong, in the words a workload's author can act on, and what to do about it."""
    jax, _ = _jax()
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if isinstance(error, jax.errors.ConcretizationTypeError) or "Abstract tracer value" in str(error) \
            or "concrete value" in str(error):
        return ("it reads a tensor's value on the host (.item(), float(t), bool(t) or a Python if on a tensor)",
                "keep the step free of host reads")
    if "OperatorNotFound" in type(error).__name__ or "can only do math within the torchax" in str(error):
        return f"torchax has no JAX lowering for an op it calls ({text[:200]})", "the op needs a lowering of the jax family"
    if any(marker in str(error) for marker in NO_DERIVATIVE_MARKERS):
        return (f"{traced_op(error) or 'an op'} has no derivative in its JAX lowering ({text[:160]})",
                "the op needs a lowering of the jax family that has one")
    return f"{type(error).__name__}: {text[:300]}", "keep the step to ops torchax lowers"


def _frames_to_dispatch(error: BaseException) -> traceback.StackSummary:
    """The error's frames up to torchax's first dispatch: below it runs a lowering, never the
    workload's own code."""
    frames, frame_link = [], error.__traceback__
    while frame_link is not None and not _is_dispatch(frame_link):
        frames.append((frame_link.tb_frame, frame_link.tb_lineno))
        frame_link = frame_link.tb_next
    return traceback.StackSummary.extract(frames)


def _first_line_of_chain(error: BaseException | None) -> str | None:
    """The workload's line in the error's traceback, or in those of the errors it came from (JAX
    raises a failed derivative after the trace, with the op's own stack as its cause)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        line = refusal_line(_frames_to_dispatch(error))
        if line:
            return line
        error = error.__cause__ or error.__context__
    return None


def refuse_untraceable(error: BaseException, what: str) -> StepNotTraceable:
    """One line: what failed to trace, why, the workload's line that did it, and what to do."""
    line = _first_line_of_chain(error)
    where = f" at {line}" if line else ""
    why, advice = _why(error)
    return StepNotTraceable(f"{what} does not trace to one JAX program{where}: {why}; {advice} "
                            "(docs/targets.md, the jax family)")


_ABSENT = object()


def host_batch_arrays(batch: dict[str, torch.Tensor]) -> dict[str, Any]:
    """A torch batch as the arrays a JAX program takes: 64-bit integers become 32-bit, as JAX
    (without x64) would make them anyway, so the exported signature says what it runs."""
    import numpy as np

    arrays = {}
    for key, tensor in batch.items():
        array = tensor.numpy()
        if array.dtype == np.int64:
            array = array.astype(np.int32)
        elif array.dtype == np.float64:
            array = array.astype(np.float32)
        arrays[key] = array
    return arrays


class _BackwardCalls:
    """Holds the loss `Tensor.backward` was called on while the step is traced for its gradient."""

    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []

    @contextlib.contextmanager
    def intercepted(self, optimizers: dict[str, torch.optim.Optimizer]) -> Iterator[None]:
        original_backward = torch.Tensor.backward
        original_grad = torch.autograd.grad
        calls = self

        def noted_backward(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            if calls.losses:
                raise StepNotTraceable(f"the step calls backward() more than once{_here()}; the jax family traces "
                                       "a step of one backward() followed by its optimizers' steps")
            calls.losses.append(tensor)

        def refused_grad(*args: Any, **kwargs: Any) -> Any:
            raise StepNotTraceable(f"the step calls torch.autograd.grad{_here()}, which the jax family cannot "
                                   "trace (torchax has no autograd); differentiate one loss with backward()")

        # An LR scheduler wraps `optimizer.step` on the instance: what the instance held is put back.
        held = [(optimizer, {name: optimizer.__dict__.get(name, _ABSENT) for name in ("step", "zero_grad")})
                for optimizer in optimizers.values()]
        torch.Tensor.backward = noted_backward  # type: ignore[method-assign]
        torch.autograd.grad = refused_grad  # type: ignore[assignment]
        for optimizer in optimizers.values():
            optimizer.step = lambda *args, **kwargs: None  # type: ignore[method-assign]
            optimizer.zero_grad = lambda *args, **kwargs: None  # type: ignore[method-assign]
        try:
            yield
        finally:
            torch.Tensor.backward = original_backward  # type: ignore[method-assign]
            torch.autograd.grad = original_grad  # type: ignore[assignment]
            for optimizer, own in held:
                for name, value in own.items():
                    if value is _ABSENT:
                        optimizer.__dict__.pop(name, None)
                    else:
                        optimizer.__dict__[name] = value


def _accumulators(trained: State) -> State:
    """Zeros to sum the slices' gradients in: float32 at least, so bf16 parameters lose nothing there."""
    jax, _ = _jax()
    jnp = jax.numpy
    return {name: jnp.zeros(value.shape, jnp.promote_types(value.dtype, jnp.float32)) for name, value in trained.items()}


class FunctionalStep:
    """The pure functions of one trainable on torchax (module docstring). Build it from a fresh
    host trainable; it moves the networks onto torchax and creates their optimizers there."""

    def __init__(self, trainable: Trainable, precision: str, seed: int, options: tuple[str, ...] = ()) -> None:
        jax, torchax = _jax()
        self.trainable = trainable
        self.precision = precision
        self.options = options
        self.env = torchax.default_env()
        _foreach_in_place(self.env)
        _dimensioned_dtype_wins(self.env)
        qkv_attention.register(self.env)
        lowerings.register(self.env)
        # Module._apply makes a new Parameter per module when the tensor's type changes, which
        # unties shared weights (GPT-2's head and token embedding); swapping keeps one object.
        swapping = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        try:
            with self.env:
                for network in trainable.networks.values():
                    network.to("jax")
        finally:
            torch.__future__.set_swap_module_params_on_conversion(swapping)
        self.scanner = self._layer_scanner(options)
        self._state_in_bf16(options)
        self.compute_in_bf16 = self._bf16_compute(options)
        setup_optimizers(trainable, fused=False)
        self._check_optimizers()
        self.parameters = self._named("param", lambda network: network.named_parameters())
        self.buffers = self._named("buffer", lambda network: network.named_buffers())
        self._parameter_names = {id(tensor): name for name, tensor in self.parameters.items()}
        trained = set(trainable.trained_network_names())
        self.trained = [name for name, tensor in self.parameters.items()
                        if name.split("/")[1] in trained and tensor.requires_grad and tensor.dtype.is_floating_point]
        self.optimizer_slots = {
            name: [parameter for group in optimizer.param_groups for parameter in group["params"]]
            for name, optimizer in trainable.optimizers.items()
        }
        self.group_count = sum(len(optimizer.param_groups) for optimizer in trainable.optimizers.values())
        self._seed = seed
        self._optimizer_leaves: dict[str, tuple[tuple[int, ...], Any]] | None = None
        trainable.use_activation_checkpoint(self._checkpointed)

    def _layer_scanner(self, options: tuple[str, ...]) -> "scanned_layers.Scanner | None":
        """The scanner of repeated layers where the target asks for it (`scanned_layers`)."""
        policies = [option for option in options if option in scanned_layers.REMAT_POLICIES]
        if policies and "scan-layers" not in options:
            raise UsageError(f"the {policies[0]} option recomputes inside each scanned layer: give it with scan-layers "
                             f"(jax:jit:bf16:scan-layers+{policies[0]})")
        if len(policies) > 1:
            raise UsageError(f"the options {' and '.join(policies)} are two recompute policies: give one")
        if "scan-layers" not in options:
            return None
        scanned_layers.install(self.trainable.networks)
        return scanned_layers.Scanner(self.env, remat=policies[0] if policies else None)

    def _state_in_bf16(self, options: tuple[str, ...]) -> None:
        """The `bf16-state` option: floating parameters held in bfloat16, and with them the
        optimizers' states, which are made like their parameters. Half the memory of float32
        master weights (a 1B-parameter model's state with AdamW: 8 instead of 16 GB), at the cost
        every pure-bf16 recipe pays: an update smaller than a weight's bf16 spacing is lost. The
        gradient of a step in micro-batches is still summed in float32."""
        if "bf16-state" not in options:
            return
        if self.precision != "bf16":
            raise UsageError("the bf16-state option keeps parameters in bfloat16: give it with the bf16 precision "
                             "(jax:jit:bf16:bf16-state)")
        parameters = {id(tensor) for network in self.trainable.networks.values() for tensor in network.parameters()}

        def cast(tensor: torch.Tensor) -> torch.Tensor:
            is_float32_parameter = id(tensor) in parameters and tensor.dtype == torch.float32
            return tensor.to(torch.bfloat16) if is_float32_parameter else tensor

        swapping = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)  # in place: a tied weight stays one tensor
        try:
            with self.env:
                for network in self.trainable.networks.values():
                    network._apply(cast)
        finally:
            torch.__future__.set_swap_module_params_on_conversion(swapping)

    def _bf16_compute(self, options: tuple[str, ...]) -> bool:
        """The `bf16-compute` option: the forward and backward run on bfloat16 copies of the
        float32 trained parameters, made inside the program each step; the parameters, their
        gradients and the optimizers' states stay float32. As PyTorch FSDP's
        `MixedPrecision(param_dtype=torch.bfloat16)`: an embedding's output, the residual stream and
        every bias add are bfloat16 (halving what the step's elementwise ops move), where autocast
        alone keeps them float32 beside float32 weights; ops on autocast's float32 list (LayerNorm,
        softmax, the loss) still compute in float32. A gradient sums in bfloat16 inside an op (an
        embedding's rows), and only its result is float32."""
        if "bf16-compute" not in options:
            return False
        if self.precision != "bf16":
            raise UsageError("the bf16-compute option runs the step on bfloat16 copies of the parameters: give it "
                             "with the bf16 precision (jax:jit:bf16:bf16-compute)")
        if "bf16-state" in options:
            raise UsageError("bf16-state already holds the parameters in bfloat16, so bf16-compute adds nothing: "
                             "give one of the two")
        return True

    def _compute_copies(self, trained: State) -> State:
        """The trained parameters the forward computes with: bfloat16 copies of the float32 ones
        under `bf16-compute` (their gradient flows back through the cast as float32), else themselves."""
        if not self.compute_in_bf16:
            return trained
        return {name: value.astype("bfloat16") if value.dtype == "float32" else value
                for name, value in trained.items()}

    def _scanning(self) -> contextlib.AbstractContextManager:
        return scanned_layers.scanning(self.scanner) if self.scanner is not None else contextlib.nullcontext()

    @property
    def phased(self) -> bool:
        """The workload declares its step as phases (`train_phases`), not one backward()."""
        return isinstance(self.trainable, PhasedTrainable)

    # --- building the state -------------------------------------------------------------------
    def _named(self, kind: str, items: Callable[[torch.nn.Module], Iterator[tuple[str, torch.Tensor]]]
               ) -> dict[str, torch.Tensor]:
        named: dict[str, torch.Tensor] = {}
        seen: set[int] = set()
        for network_name, network in self.trainable.networks.items():
            for name, tensor in items(network):
                if id(tensor) in seen:  # tied across networks: one leaf
                    continue
                seen.add(id(tensor))
                named[f"{kind}/{network_name}/{name}"] = tensor
        return named

    def _check_optimizers(self) -> None:
        self._own_flags: list[dict[str, Any]] = []
        """Each param group's flags as the workload set them, which checkpoints keep."""
        for name, optimizer in self.trainable.optimizers.items():
            kind = type(optimizer).__name__
            if kind not in FRESH_STATE_IS_ZERO:
                raise UsageError(f"optimizer {name!r} is a {kind}; the jax family steps {', '.join(FRESH_STATE_IS_ZERO)}")
            for group in optimizer.param_groups:
                if kind == "SGD" and group.get("momentum", 0) and group.get("dampening", 0):
                    raise UsageError(f"optimizer {name!r}: SGD with momentum and dampening starts from the first "
                                     "gradient, not from zero; the jax family steps it without dampening")
                self._own_flags.append({key: group[key] for key, _ in TRACED_FLAGS if key in group})
                for key, value in TRACED_FLAGS:
                    if key in group:
                        group[key] = value

    def learning_rates(self) -> list[float]:
        """Every param group's learning rate now, in order: the step's `lrs` input."""
        return [float(group["lr"]) for optimizer in self.trainable.optimizers.values()
                for group in optimizer.param_groups]

    def initial_state(self) -> State:
        """Parameters and buffers as built, optimizer states as at their first step, the dropout key."""
        jax, _ = _jax()
        state = {name: tensor._elem for name, tensor in {**self.parameters, **self.buffers}.items()}
        for name, (shape, dtype) in self._optimizer_structure().items():
            state[name] = jax.numpy.zeros(shape, dtype)
        state[RNG_KEY] = jax.random.PRNGKey(self._seed)
        return state

    def _optimizer_structure(self) -> dict[str, tuple[tuple[int, ...], Any]]:
        """Each optimizer state leaf's shape and dtype, from tracing one update of zero gradients."""
        if self._optimizer_leaves is None:
            jax, _ = _jax()
            parameters = {name: tensor._elem for name, tensor in self.parameters.items()}
            grads = {name: jax.numpy.zeros_like(parameters[name]) for name in self.trained}
            shapes = jax.eval_shape(lambda p, g, lrs: self._update(p, g, {}, lrs)[1], parameters, grads,
                                    jax.numpy.zeros((self.group_count,), "float32"))
            self._optimizer_leaves = {name: (tuple(leaf.shape), leaf.dtype) for name, leaf in shapes.items()}
        return self._optimizer_leaves

    # --- binding state to the torch objects while tracing ---------------------------------------
    @contextlib.contextmanager
    def _bound(self, values: State) -> Iterator[None]:
        """Parameters and buffers hold `values` (tracers) while tracing; their own values after."""
        tensors = {**self.parameters, **self.buffers}
        saved = {name: tensor._elem for name, tensor in tensors.items()}
        for name, tensor in tensors.items():
            if name in values:
                tensor._elem = values[name]
        try:
            yield
        finally:
            for name, tensor in tensors.items():
                tensor._elem = saved[name]

    def _wrap(self, array: Any, requires_grad: bool = False) -> torch.Tensor:
        from torchax.tensor import Tensor

        return Tensor(array, self.env, requires_grad)

    def _autocast(self) -> contextlib.AbstractContextManager:
        """torchax's autocast casts each op's arguments; torch's own autocast state is set for the
        `jax` device too, so a workload that asks `torch.is_autocast_enabled` (to keep a stream
        in bf16, say) hears what it would on any other autocast target."""
        stack = contextlib.ExitStack()
        if self.precision == "bf16":
            stack.enter_context(self.env.override_property(autocast_dtype=torch.bfloat16))
            stack.enter_context(torch.autocast(device_type="jax", dtype=torch.bfloat16))
        return stack

    def _batch(self, batch: dict[str, Any]) -> Batch:
        return {key: self._wrap(value) for key, value in batch.items()}

    def _checkpointed(self, function: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor:
        """A workload's activation checkpoint on torchax: `jax.checkpoint`, which keeps the inputs
        and runs `function` again for the gradient."""
        jax, _ = _jax()
        from torchax.tensor import Tensor

        places = [index for index, value in enumerate(args) if isinstance(value, Tensor)]

        def on_arrays(*arrays: Any) -> Any:
            values = list(args)
            for index, array in zip(places, arrays):
                values[index] = self._wrap(array)
            return function(*values)._elem

        return self._wrap(jax.checkpoint(on_arrays)(*(args[index]._elem for index in places)))

    def _input_gradient(self, function: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        """`differentiation.input_gradient` while tracing: `jax.grad` of the function's sum, which
        the phase's own gradient then differentiates again."""
        jax, _ = _jax()

        def summed(array: Any) -> Any:
            return function(self._wrap(array))._elem.astype("float32").sum()

        return self._wrap(jax.grad(summed)(inputs._elem))

    # --- the pure functions ---------------------------------------------------------------------
    def _loss(self, trained: State, rest: State, batch: dict[str, Any]) -> tuple[Any, tuple[Any, State, Any]]:
        """The workload's step up to its backward(): (the loss it differentiates, (the loss it
        returns, the buffers after its forward, the next dropout key))."""
        calls = _BackwardCalls()
        with self._forward(trained, rest), calls.intercepted(self.trainable.optimizers):
            returned = self.trainable.train_step(self._batch(batch))
            buffers, next_key = self._left_by_forward()
        if not calls.losses:
            raise StepNotTraceable("the step never calls backward(); the jax family traces a step of one "
                                   "backward() followed by its optimizers' steps")
        loss = calls.losses[0]._elem
        returned_value = returned._elem if hasattr(returned, "_elem") else loss
        return loss.astype("float32"), (returned_value.astype("float32"), buffers, next_key)

    def _update(self, parameters: State, grads: State, optimizer_state: State, lrs: Any) -> tuple[State, State]:
        """The workload's own optimizers' steps on `grads`: (parameters after, optimizer states after)."""
        index = 0
        rates = [[group["lr"] for group in optimizer.param_groups] for optimizer in self.trainable.optimizers.values()]
        with self._bound(parameters), self.env, self._rates_kept(rates):
            for name, optimizer in self.trainable.optimizers.items():
                for group in optimizer.param_groups:
                    # a rate that "requires grad" takes torch's tensor-only update path (SGD reads a
                    # plain tensor rate as a Python number; nothing differentiates it here)
                    group["lr"] = self._wrap(lrs[index], requires_grad=True)
                    index += 1
                for slot, parameter in enumerate(self.optimizer_slots[name]):
                    key = self._key_of(parameter)
                    parameter.grad = self._wrap(grads[key]) if key in grads else None
                    prefix = f"optim/{name}/{slot}/"
                    leaves = {leaf[len(prefix):]: self._wrap(value) for leaf, value in optimizer_state.items()
                              if leaf.startswith(prefix)}
                    optimizer.state.pop(parameter, None)
                    if leaves:
                        optimizer.state[parameter] = leaves
                optimizer.step()
            updated = {name: tensor._elem for name, tensor in self.parameters.items()}
            states = {}
            for name, optimizer in self.trainable.optimizers.items():
                for slot, parameter in enumerate(self.optimizer_slots[name]):
                    for key, value in optimizer.state.get(parameter, {}).items():
                        states[f"optim/{name}/{slot}/{key}"] = value._elem if hasattr(value, "_elem") else value
                    parameter.grad = None
                optimizer.state.clear()
        return updated, states

    @contextlib.contextmanager
    def _rates_kept(self, rates: list[list[Any]]) -> Iterator[None]:
        """The param groups get their host learning rates back after a trace wrote tracers there."""
        try:
            yield
        finally:
            for optimizer, group_rates in zip(self.trainable.optimizers.values(), rates):
                for group, rate in zip(optimizer.param_groups, group_rates):
                    group["lr"] = rate

    def _key_of(self, parameter: torch.Tensor) -> str:
        name = self._parameter_names.get(id(parameter))
        if name is None:
            raise UsageError("an optimizer steps a tensor that is no parameter of the workload's networks")
        return name

    def train(self, state: State, batch: dict[str, Any], lrs: Any, *, micro_batches: int = 1) -> tuple[State, Any]:
        """One training step: (the state after it, the loss the workload's step returned); with
        `micro_batches` k > 1, its gradient accumulated over k slices of the batch (`_gradient`)."""
        trained = {name: state[name] for name in self.trained}
        rest = {name: value for name, value in state.items() if name not in trained}
        (loss, buffers, next_key), grads = self._gradient(self._loss, trained, rest, batch, micro_batches)
        return self._state_after(state, grads, lrs, buffers, next_key), loss

    def _gradient(self, loss_function: Callable[..., tuple[Any, tuple[Any, State, Any]]], trained: State, rest: State,
                  batch: dict[str, Any], micro_batches: int) -> tuple[tuple[Any, State, Any], State]:
        """`loss_function`'s gradient over `trained` at one batch: ((the loss it returns, the buffers
        after, the next dropout key), the gradient). With `micro_batches` k > 1 the batch is cut into
        k equal slices of consecutive samples, and the gradient is the mean of the slices' gradients,
        taken one after another (`lax.scan`: the program holds one slice's activations, which is
        what lets a batch larger than the device's memory train), each slice's forward after the
        buffers and dropout key the slice before left; the loss is the slices' mean. That is the
        torch targets' gradient accumulation, and StyleGAN3's own `--batch-gpu`."""
        jax, _ = _jax()
        gradient = jax.value_and_grad(loss_function, has_aux=True)
        if micro_batches == 1:
            (_, left), grads = gradient(trained, rest, batch)
            return left, grads
        jnp = jax.numpy
        slices = {key: value.reshape((micro_batches, value.shape[0] // micro_batches) + value.shape[1:])
                  for key, value in batch.items()}
        carried = [name for name in rest if name in self.buffers or name == RNG_KEY]

        def one_slice(carry: tuple[State, State], piece: dict[str, Any]) -> tuple[tuple[State, State], Any]:
            summed, left = carry
            (_, (loss, buffers, next_key)), grads = gradient(trained, {**rest, **left}, piece)
            summed = {name: summed[name] + grads[name].astype(summed[name].dtype) for name in summed}
            kept = {name: buffers[name].astype(left[name].dtype) for name in left if name in buffers}
            return (summed, {**left, **kept, RNG_KEY: next_key}), loss

        zeros = _accumulators(trained)
        (summed, left), losses = jax.lax.scan(one_slice, (zeros, {name: rest[name] for name in carried}), slices)
        buffers = {name: left[name] for name in self.buffers}
        return (losses.mean(), buffers, left[RNG_KEY]), {name: (value / micro_batches).astype(trained[name].dtype)
                                                         for name, value in summed.items()}

    def _phase_loss(self, trained: State, rest: State, batch: dict[str, Any], phase: StepPhase
                    ) -> tuple[Any, tuple[Any, State, Any]]:
        """One phase's loss at `trained` (the parameters its optimizer steps) and `rest`: (the loss,
        (the loss again, the buffers after its forward, the next dropout key)), as `_loss` returns."""
        trainable: PhasedTrainable = self.trainable  # type: ignore[assignment]
        with self._forward(trained, rest), differentiation.installed(self._input_gradient):
            loss = trainable.phase_loss(phase, trainable.prepared(self._batch(batch)))
            buffers, next_key = self._left_by_forward()
        return loss._elem.astype("float32"), (loss._elem.astype("float32"), buffers, next_key)

    @contextlib.contextmanager
    def _forward(self, trained: State, rest: State) -> Iterator[None]:
        """The networks hold `trained` and `rest` (tracers), ops run on torchax in the target's
        precision, and dropout draws from the state's key: how every forward is traced."""
        computed = self._compute_copies(trained)
        with self._bound({**rest, **computed}), self.env, self._autocast(), self.env.override_property(prng=rest[RNG_KEY]), \
                self._scanning():
            yield

    def _left_by_forward(self) -> tuple[State, Any]:
        """Inside `_forward`: the buffers the forward updated and the next dropout key."""
        return {name: tensor._elem for name, tensor in self.buffers.items()}, self.env.param.prng

    def train_phases(self, state: State, batch: dict[str, Any], lrs: Any, *, phases: tuple[StepPhase, ...],
                     micro_batches: int = 1) -> tuple[State, Any]:
        """One step of a phased workload: per phase, its loss's gradient over the parameters its
        optimizer steps (accumulated over `micro_batches` slices of the batch, `_gradient`) and that
        optimizer's update; then the work that trains nothing (an EMA, on the whole batch).
        Returns (the state after, the loss the workload's step returns)."""
        losses = {}
        for phase in phases:
            stepped = set(self._steps_of()[phase.optimizer])
            trained = {name: state[name] for name in stepped}
            rest = {name: value for name, value in state.items() if name not in stepped}
            phase_loss = functools.partial(self._phase_loss, phase=phase)
            (loss, buffers, next_key), grads = self._gradient(phase_loss, trained, rest, batch, micro_batches)
            state = self._state_after(state, grads, lrs, buffers, next_key)
            losses[phase.name] = loss
        trainable: PhasedTrainable = self.trainable  # type: ignore[assignment]
        with self._bound(state), self.env:
            trainable.after_updates(trainable.prepared(self._batch(batch)))
            state = {**state, **{name: tensor._elem for name, tensor in {**self.parameters, **self.buffers}.items()}}
            returned = trainable.returned_loss({name: self._wrap(loss) for name, loss in losses.items()})
        return state, returned._elem.astype("float32")

    def _state_after(self, state: State, grads: State, lrs: Any, buffers: State, next_key: Any) -> State:
        """The state after the optimizers step `state` on `grads`, with the buffers and dropout key
        the step's forward passes left."""
        parameters = {name: state[name] for name in self.parameters}
        optimizer_state = {name: value for name, value in state.items() if name.startswith("optim/")}
        parameters, optimizer_state = self._update(parameters, grads, optimizer_state, lrs)
        return {**parameters, **buffers, **optimizer_state, RNG_KEY: next_key}

    def train_in_slices(self, state: State, batch: dict[str, Any], lrs: Any, order: Any, *, parts: int
                        ) -> tuple[State, Any, dict[str, Any], dict[str, Any]]:
        """One optimizer step over `parts` equal slices of the batch's samples taken in `order` (a
        permutation, an input so that every order runs the same program), as the torch targets'
        gradient accumulation steps: each slice's gradient, then one update on their mean. The
        slices run one after another in the program (`lax.scan`, so it holds one slice's
        activations), each after the buffers and dropout key the slice before left. Returns (the
        state after, the mean of the slices' losses, per optimizer the mean over slices of its
        gradient's squared norm, and the squared norm of the mean gradient): the two batches'
        norms the noise-scale meter reads (`trainspeed.gradients.noise_scale`)."""
        jax, _ = _jax()
        jnp = jax.numpy
        trained = {name: state[name] for name in self.trained}
        rest = {name: value for name, value in state.items() if name not in trained}
        slices = {key: jnp.take(value, order, axis=0).reshape((parts, value.shape[0] // parts) + value.shape[1:])
                  for key, value in batch.items()}
        gradient = jax.value_and_grad(self._loss, has_aux=True)

        def one_slice(carry: tuple[State, dict[str, Any], State], piece: dict[str, Any]) -> tuple[Any, Any]:
            summed, small_sq, rest_now = carry
            (_, (loss, buffers, next_key)), grads = gradient(trained, rest_now, piece)
            summed = {name: summed[name] + grads[name].astype(summed[name].dtype) for name in summed}
            norms = self.squared_norms(grads)
            small_sq = {name: small_sq[name] + norms[name] for name in small_sq}
            return (summed, small_sq, {**rest_now, **buffers, RNG_KEY: next_key}), loss

        zeros = _accumulators(trained)
        no_norms = {name: jnp.zeros((), "float32") for name in self._steps_of()}
        (summed, small_sq, rest), losses = jax.lax.scan(one_slice, (zeros, no_norms, rest), slices)
        grads = {name: (value / parts).astype(trained[name].dtype) for name, value in summed.items()}
        after = self._state_after(state, grads, lrs, {name: rest[name] for name in self.buffers}, rest[RNG_KEY])
        return after, losses.mean(), {name: value / parts for name, value in small_sq.items()}, self.squared_norms(grads)

    def _steps_of(self) -> dict[str, list[str]]:
        """Each optimizer's trained leaves: the meter measures the gradient an optimizer steps."""
        trained = set(self.trained)
        return {name: [key for key in dict.fromkeys(self._key_of(parameter) for parameter in slots) if key in trained]
                for name, slots in self.optimizer_slots.items()}

    def squared_norms(self, grads: State) -> dict[str, Any]:
        """Per optimizer, the squared norm of the gradient of the parameters it steps, in float32."""
        jax, _ = _jax()
        jnp = jax.numpy
        return {name: sum((jnp.sum(jnp.square(grads[key].astype("float32"))) for key in keys),
                          jnp.zeros((), "float32"))
                for name, keys in self._steps_of().items()}

    def evaluate(self, state: State, batch: dict[str, Any]) -> dict[str, Any]:
        """The workload's validation sums on one batch, at `state` (through the same bfloat16
        copies of the parameters as training's forward, under `bf16-compute`)."""
        trained = self._compute_copies({name: state[name] for name in self.trained})
        with self._bound({**state, **trained}), self.env, self._autocast(), self._scanning():
            metrics = self.trainable.eval_metrics(self._batch(batch))
        return {name: value._elem for name, value in (metrics or {}).items()}

    # --- to and from torch (checkpoints) --------------------------------------------------------
    def torch_state_dict(self, state: State) -> dict:
        """The trainable's `state_dict` at `state`, as host torch tensors (what checkpoints hold)."""
        import numpy as np

        def host(value: Any) -> torch.Tensor:
            return torch.from_numpy(np.array(value))

        networks: dict[str, dict[str, torch.Tensor]] = {name: {} for name in self.trainable.networks}
        for name, places in self._places().items():
            value = host(state[name])
            for network, key in places:  # a tied weight under each of its names, one tensor (as torch's own)
                networks[network][key] = value
        optimizers: dict[str, Any] = {}
        own_flags = iter(self._own_flags)
        for name, optimizer in self.trainable.optimizers.items():
            per_slot: dict[int, dict[str, torch.Tensor]] = {}
            for leaf, value in state.items():
                if leaf.startswith(f"optim/{name}/"):
                    _, _, slot, key = leaf.split("/", 3)
                    per_slot.setdefault(int(slot), {})[key] = host(value)
            groups, start = [], 0
            for group in optimizer.param_groups:
                count = len(group["params"])
                entry = {**{key: value for key, value in group.items() if key != "params"}, **next(own_flags)}
                groups.append({**entry, "params": list(range(start, start + count))})
                start += count
            optimizers[name] = {"state": per_slot, "param_groups": groups}
        kept = {"networks": networks, "optimizers": optimizers}
        return {**kept, "step": self.trainable.step} if self.phased else kept

    def _places(self) -> dict[str, list[tuple[str, str]]]:
        """Each parameter's and buffer's leaf -> every (network, name) it has in a `state_dict`
        (a tied weight has several; the leaf is named by the first)."""
        leaf_of = {id(tensor): name for name, tensor in {**self.parameters, **self.buffers}.items()}
        places: dict[str, list[tuple[str, str]]] = {name: [] for name in leaf_of.values()}
        for network_name, network in self.trainable.networks.items():
            for items in (network.named_parameters(remove_duplicate=False), network.named_buffers(remove_duplicate=False)):
                for key, tensor in items:
                    places[leaf_of[id(tensor)]].append((network_name, key))
        return places

    def state_from_torch(self, state_dict: dict, like: State) -> State:
        """The flat state of a `state_dict` as `torch_state_dict` wrote it (a checkpoint)."""
        jax, _ = _jax()
        state = dict(like)
        for name in list(self.parameters) + list(self.buffers):
            _, network, key = name.split("/", 2)
            state[name] = jax.numpy.asarray(state_dict["networks"][network][key].numpy())
        for name, optimizer_state in state_dict["optimizers"].items():
            for slot, leaves in optimizer_state["state"].items():
                for key, value in leaves.items():
                    array = value.numpy() if isinstance(value, torch.Tensor) else value
                    state[f"optim/{name}/{int(slot)}/{key}"] = jax.numpy.asarray(array)
            groups = self.trainable.optimizers[name].param_groups
            for group, saved in zip(groups, optimizer_state["param_groups"]):
                group["lr"] = float(saved["lr"])
                if "initial_lr" in saved:
                    group["initial_lr"] = saved["initial_lr"]
        if self.phased and "step" in state_dict:
            self.trainable.step = int(state_dict["step"])  # type: ignore[attr-defined]
        return state
