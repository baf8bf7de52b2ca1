"""Recurrent layers on the jax family, as one scan over time: PyTorch's outputs, final states
and gradients for LSTM, GRU and RNN in their modes (layers, directions, batch-first, projections,
no bias, unbatched input).

The layers are PyTorch's own classes from `torch.nn.modules.rnn`: importing torch_xla (which the
suite's conftest does) replaces `nn.GRU` with torch_xla's scan GRU, which runs on XLA tensors only."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import rnn
from torch_and_jax import environment, jax_run, torch_run

from trainspeed.targets.jaxjit import JaxTarget

pytestmark = pytest.mark.skipif(JaxTarget.unavailable_reason() is not None, reason=str(JaxTarget.unavailable_reason()))


def layer_function(module: nn.Module, output: int):
    """The module as a function of its input and its weights, returning output `output`
    (0: the sequence; 1: the last hidden state, or (h, c)'s h)."""
    names = [name for name, _ in module.named_parameters()]

    def run(x: torch.Tensor, *weights: torch.Tensor):
        result = torch.func.functional_call(module, dict(zip(names, weights)), (x,))
        return result[0] if output == 0 else (result[1][0] if isinstance(result[1], tuple) else result[1])

    return run, [parameter.detach() for parameter in module.parameters()]


def assert_same_layer(module: nn.Module, x: torch.Tensor) -> None:
    torch.manual_seed(0)
    for output in (0, 1):
        function, weights = layer_function(module, output)
        expected, expected_grads = torch_run(function, x, *weights)
        traced, traced_grads = jax_run(function, x, *weights)
        np.testing.assert_allclose(traced, expected, rtol=2e-5, atol=2e-5)
        for got, want in zip(traced_grads, expected_grads):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def sequence(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3))


@pytest.mark.parametrize("module", [
    rnn.LSTM(5, 7, num_layers=2, batch_first=True),
    rnn.LSTM(5, 7, bidirectional=True),
    rnn.LSTM(5, 7, proj_size=3, batch_first=True),
    rnn.LSTM(5, 7, bias=False, batch_first=True),
    rnn.GRU(5, 7, num_layers=2, batch_first=True, bidirectional=True),
    rnn.GRU(5, 7),
    rnn.RNN(5, 7, nonlinearity="tanh", num_layers=2, batch_first=True),
    rnn.RNN(5, 7, nonlinearity="relu", batch_first=True, bias=False),
], ids=lambda module: repr(module).replace(" ", ""))
def test_a_recurrent_layer_matches_pytorch(module: nn.Module) -> None:
    batch_first = module.batch_first
    assert_same_layer(module, sequence(3, 6, 5) if batch_first else sequence(6, 3, 5))


def test_an_unbatched_sequence_matches_pytorch() -> None:
    assert_same_layer(rnn.GRU(5, 7, num_layers=2), sequence(6, 5))


def test_dropout_between_layers_draws_masks_in_training() -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor

    env = environment()
    module = rnn.LSTM(5, 7, num_layers=2, dropout=0.5, batch_first=True)
    x = sequence(3, 6, 5)
    with env:
        module.to("jax")
        trained = module(Tensor(jnp.asarray(x.numpy()), env))[0]
        module.eval()
        evaluated = module(Tensor(jnp.asarray(x.numpy()), env))[0]
    assert np.isfinite(np.asarray(trained._elem)).all()
    assert not np.allclose(np.asarray(trained._elem), np.asarray(evaluated._elem))


def test_a_packed_sequence_is_refused_naming_the_op_that_packs_it() -> None:
    import jax.numpy as jnp
    from torchax.tensor import Tensor
    from torchax.tensor import OperatorNotFound

    env = environment()
    with env, pytest.raises(OperatorNotFound, match="pack_padded_sequence"):
        nn.utils.rnn.pack_padded_sequence(Tensor(jnp.asarray(sequence(2, 4, 5).numpy()), env), torch.tensor([4, 2]),
                                          batch_first=True)
