"""A library model on a server's list (`serve --workload timm:resnet18`), benched through the
remote target: the client and the server build it by name from the same library, and a client
whose library differs is refused before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

from trainspeed.cli import main

SIZE = "tiny,res=32"


def _bench(capsys, target: str, out: Path, workload: str = "timm:resnet18") -> tuple[int, str]:
    code = main(["bench", "--workload", workload, "--size", SIZE, "--targets", target, "--batch-sizes", "4",
                 "--windows", "2", "--min-window-s", "0.01", "--warmup-steps", "1", "--feed", "host", "--threads", "1",
                 "--out", str(out), "--no-progress", "--no-plot"])
    return code, capsys.readouterr().err


def test_a_served_library_model_benches_through_the_remote_target(serve, capsys, tmp_path: Path) -> None:
    server = serve(workloads=("timm:resnet18",), threads=1)
    out = tmp_path / "rows.jsonl"
    code, err = _bench(capsys, server.remote_name, out)
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (row["workload"], row["size"], row["status"], row["transport"]) == ("timm:resnet18", SIZE, "ok", "grpc")
    assert row["mfu_flops_source"] == "counted" and row["workload_version"].startswith("timm ")

    # a library model the operator did not list is not built, whatever the client names
    code, err = _bench(capsys, server.remote_name, tmp_path / "other.jsonl", "timm:resnet34")
    assert code == 2 and "does not build workload 'timm:resnet34'" in err
