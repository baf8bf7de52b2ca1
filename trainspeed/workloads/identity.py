"""What a workload is, beyond its short name: where it is defined and a hash of that definition.

Two workloads may share a `name` (two users' `charlm`), and one name may change meaning when its
code changes. Rows, tables and figures therefore keep workloads apart by their identity, and a
remote server compares the client's identity with the workloads it was told to build.

The hash covers the source files that define the workload: every `.py` file of the package that
holds the workload's class (for a built-in: its whole folder, model and data code included), or the
single module file where the class lives outside a package. A workload may also declare a
`version` string of its own; it is recorded beside the hash, which is what identity compares. A
workload built from a library (`timm:resnet50`) is defined by that library as much as by its
source: it declares `library_version` ("timm 1.0.31"), which the hash covers too. A workload whose
class is trainspeed's own and whose definition is someone else's (`trainspeed.workload_from`'s
pieces) says where it is defined (`definition_module`) and hashes that itself (`definition_sha256()`).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

from trainspeed.machine import Machine
from trainspeed.rows import SHORT_HASH, Provenance


@dataclass(frozen=True)
class WorkloadIdentity:
    name: str
    module: str
    """The class's module, dotted (`trainspeed.workloads.mahjong.workload`, `charlm`)."""
    version: str | None
    definition_sha256: str

    @property
    def label(self) -> str:
        """`name@hash12`: short enough for a legend, distinct for distinct definitions."""
        return f"{self.name}@{self.definition_sha256[:SHORT_HASH]}"

    def row_fields(self) -> dict[str, str | None]:
        """The fields result rows carry, so readers can keep workloads apart."""
        return {"workload_module": self.module, "workload_version": self.version,
                "workload_sha256": self.definition_sha256}

    def provenance(self, command: str | None = None, machine: Machine | None = None) -> Provenance:
        """The provenance of a row of this workload, written by `command` on `machine`."""
        return Provenance(command=command, machine=machine, **self.row_fields())


def _defining_file(workload: object) -> tuple[Path, str]:
    module = sys.modules[type(workload).__module__]
    source = inspect.getsourcefile(module)
    if source is None:
        raise ValueError(f"workload module {module.__name__!r} has no source file to identify it by")
    return Path(source).resolve(), module.__package__ or ""


def definition_files(workload: object) -> tuple[Path, list[Path]]:
    """The folder the definition is read relative to, and its source files, sorted."""
    return _files_of(*_defining_file(workload))


def _files_of(path: Path, package: str) -> tuple[Path, list[Path]]:
    in_package = bool(package) and (path.name == "__init__.py" or path.parent.name == package.rsplit(".", 1)[-1])
    if not in_package:
        return path.parent, [path]
    return path.parent, sorted(p for p in path.parent.rglob("*.py") if "__pycache__" not in p.parts)


def definition_sha256(workload: object) -> str:
    """sha256 over each definition file's relative path and bytes, each length-prefixed (and the
    workload's `library_version`, where it has one); the workload's own, where it hashes itself."""
    own = getattr(workload, "definition_sha256", None)
    if callable(own):
        return str(own())
    return _files_sha256(*definition_files(workload), getattr(workload, "library_version", None))


def module_definition_sha256(module_name: str) -> str:
    """`definition_sha256` of a workload defined in `module_name` (with no library version), found
    without importing the module: a process without torch (the JAX peer on a TPU host) names a
    torch workload's rows by it. Only the module's parent packages are imported."""
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ValueError(f"cannot find the module {module_name!r}")
    package = module_name if spec.submodule_search_locations else module_name.rpartition(".")[0]
    return _files_sha256(*_files_of(Path(spec.origin).resolve(), package), None)


def _files_sha256(root: Path, files: list[Path], library_version: object) -> str:
    digest = hashlib.sha256()
    if library_version is not None:
        text = str(library_version).encode()
        digest.update(b"library" + len(text).to_bytes(8, "little") + text)
    for path in files:
        relative = path.relative_to(root).as_posix().encode()
        content = path.read_bytes()
        digest.update(len(relative).to_bytes(8, "little") + relative)
        digest.update(len(content).to_bytes(8, "little") + content)
    return digest.hexdigest()


def identify(workload: object) -> WorkloadIdentity:
    version = getattr(workload, "version", None)
    return WorkloadIdentity(
        name=str(getattr(workload, "name")),
        module=str(getattr(workload, "definition_module", type(workload).__module__)),
        version=None if version is None else str(version),
        definition_sha256=definition_sha256(workload),
    )
