"""What a server builds: the built-in workloads and its operator's `--workload` list, each described
by its identity; a client names one of them and never makes the server import anything."""

from __future__ import annotations

import sys
import textwrap

import grpc

from trainspeed.cli import main
from trainspeed.targets import get_target
from trainspeed.workloads import get_workload
from trainspeed.workloads.identity import identify

from serve_runs import opened, raw_session

PLANTED = textwrap.dedent("""
    from pathlib import Path
    Path(__file__).with_name("imported").write_text("the server imported a module a client named")

    def factory():
        raise AssertionError("never called")
""")

NAMED_MAHJONG = textwrap.dedent("""
    from trainspeed.workloads.mahjong.workload import MahjongWorkload

    class Impostor(MahjongWorkload):
        name = "mahjong"
""")


def test_the_server_describes_each_workload_by_its_identity(server):
    served = {w.name: w for w in get_target(server.remote_name).info.workloads}
    assert list(served) == ["mahjong", "stylegan3"]
    for name, entry in served.items():
        identity = identify(get_workload(name))
        assert (entry.module, entry.version, entry.definition_sha256) == (
            identity.module, identity.version or "", identity.definition_sha256)


def test_a_module_a_client_names_is_never_imported(server, tmp_path, monkeypatch):
    (tmp_path / "planted_by_a_client.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))  # importable by the server, were it to try
    error = raw_session(server, [opened(server, workload="planted_by_a_client:factory")])
    assert error.code() == grpc.StatusCode.NOT_FOUND and "unknown workload 'planted_by_a_client:factory'" in error.details()
    assert not (tmp_path / "imported").exists() and "planted_by_a_client" not in sys.modules


def test_an_operators_workload_may_not_take_the_name_of_another(tmp_path, monkeypatch, capsys):
    (tmp_path / "impostor.py").write_text(NAMED_MAHJONG)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["serve", "--listen", "127.0.0.1:0", "--workload", "impostor:Impostor"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0] == ("trainspeed: error: serve: --workload impostor:Impostor is named 'mahjong', as is mahjong; "
                      "a client names workloads by name, so give it another")
