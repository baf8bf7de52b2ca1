"""A workload's identity: two definitions under one name stay apart, one definition hashes alike."""

import sys
import textwrap

from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import definition_files, identify

WORKLOAD_SOURCE = textwrap.dedent('''
    class CharLM:
        name = "charlm"
        sizes = ("tiny",)
        {extra}
        def build(self, size, seed=0): ...
        def synthetic_batch(self, size, batch_size, generator): ...
        def flops_per_sample(self, size): return {flops}
''')


def _module(tmp_path, monkeypatch, module_name: str, flops: float, extra: str = ""):
    folder = tmp_path / module_name
    folder.mkdir()
    (folder / f"{module_name}.py").write_text(WORKLOAD_SOURCE.format(flops=flops, extra=extra))
    monkeypatch.syspath_prepend(str(folder))
    return get_workload(f"{module_name}:CharLM")


def test_two_definitions_under_one_name_have_different_identities(tmp_path, monkeypatch):
    first = identify(_module(tmp_path, monkeypatch, "charlm_a", flops=1.0))
    second = identify(_module(tmp_path, monkeypatch, "charlm_b", flops=2.0))
    assert first.name == second.name == "charlm"
    assert first.definition_sha256 != second.definition_sha256
    assert first.label != second.label
    assert first.row_fields()["workload_module"] == "charlm_a"


def test_the_hash_follows_the_definition_file(tmp_path, monkeypatch):
    workload = _module(tmp_path, monkeypatch, "charlm_c", flops=1.0)
    before = identify(workload)
    assert identify(sys.modules["charlm_c"].CharLM()) == before
    source = tmp_path / "charlm_c" / "charlm_c.py"
    source.write_text(source.read_text().replace("return 1.0", "return 3.0"))
    assert identify(workload).definition_sha256 != before.definition_sha256


def test_a_declared_version_is_recorded_beside_the_hash(tmp_path, monkeypatch):
    identity = identify(_module(tmp_path, monkeypatch, "charlm_e", flops=1.0, extra='version = "2"'))
    assert identity.version == "2" and len(identity.definition_sha256) == 64


def test_a_builtin_workload_is_identified_by_its_whole_package():
    root, files = definition_files(get_workload("mahjong"))
    assert root.name == "mahjong"
    assert {"model.py", "workload.py", "encoding.py"} <= {f.name for f in files}
    assert any(f.parent.name == "data" for f in files)
    assert identify(get_workload("mahjong")) != identify(get_workload("stylegan3"))
