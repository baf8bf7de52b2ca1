"""A Python command line in which torch cannot be imported, as on a TPU host that never installed it:
the code paths that must run there (`bench --exported`, the JAX reference peer) are run this way."""

from __future__ import annotations

import sys
import textwrap

BLOCKED = ("torch", "torchax", "torch_xla", "torchvision")

_PRELUDE = textwrap.dedent(f"""
    import runpy, sys

    class NoTorch:
        '''A finder that makes torch and its kin missing.'''
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: this host has no torch)", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    try:
        import torch
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit("the block let torch in")
""")

_AFTER = textwrap.dedent(f"""
    loaded = [name for name in sys.modules if name.partition(".")[0] in {BLOCKED!r}]
    assert not loaded, f"torch modules were imported: {{loaded}}"
""")


def trainspeed_without_torch(*args: str) -> list[str]:
    """`trainspeed ARGS...` in a process that cannot import torch."""
    run = 'runpy.run_module("trainspeed", run_name="__main__", alter_sys=True)\n'
    return [sys.executable, "-c", _PRELUDE + run, *args]


def script_without_torch(script: str, *args: str) -> list[str]:
    """`python SCRIPT ARGS...` in a process that cannot import torch; it fails where the script
    imported any torch module, even one whose ImportError it caught."""
    run = textwrap.dedent("""
        script, *sys.argv[1:] = sys.argv[1:]
        sys.argv[0] = script
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
    """) + textwrap.indent(_AFTER, "    ")
    return [sys.executable, "-c", _PRELUDE + run, script, *args]
