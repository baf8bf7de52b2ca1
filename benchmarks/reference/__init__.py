"""Reference peers: the Mahjong policy net's training step written by hand outside trainspeed.

`plain_torch.py` (plain PyTorch) and `jax_optax.py` (JAX + optax) train the same network with the
same optimizer and write rows in trainspeed's result schema, so trainspeed's numbers can be put
next to an independent implementation of the same work. `common.py` holds what both peers share
(sizes, command line, synthetic batch, window timing, result rows); neither imports trainspeed's
model.
"""
