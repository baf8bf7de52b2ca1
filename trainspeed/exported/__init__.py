"""Training steps exported for a machine that has JAX only (`trainspeed export`), and the bench that
runs them there (`trainspeed bench --exported DIR`).

`write` (torch, torchax) traces a workload's step through the `jax` family and serializes one
`jax.export` artifact per batch size, the initial state as npz and a manifest. `manifest`, `load`
and `bench` import no torch: a TPU host with JAX and numpy alone reads the folder, checks it, runs
the steps and writes the same bench rows as every target.
"""
