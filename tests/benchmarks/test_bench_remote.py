"""bench_remote.py end to end at one small batch: a server per link, the local baseline beside
them, a link shaped between network namespaces where this user can make them (else limited in the
client, and the rows say which), nothing left behind; then remote_report.py's table and figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_remote import namespaces_possible

REPO_ROOT = Path(__file__).resolve().parents[2]
RATE_BITS_S = 100e6


def _namespaces() -> set[str]:
    result = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    return set(result.stdout.split()) if result.returncode == 0 else set()


def test_local_and_remote_rows_over_loopback_and_a_shaped_link_then_the_report(tmp_path):
    out = tmp_path / "remote.jsonl"
    before = _namespaces()
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_remote.py", "--links", "loopback,100mbit/1ms", "--feeds", "host",
         "--batch-sizes", "2^6", "--windows", "1", "--min-window-s", "0.05", "--lock", str(tmp_path / "lock"),
         "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert _namespaces() == before

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(row["status"] == "ok" for row in rows), [row.get("error") for row in rows]
    local = [row for row in rows if row.get("transport") is None]
    remote = [row for row in rows if row.get("transport") == "grpc"]
    assert [row["target"] for row in local] == ["cpu:eager:fp32"]
    assert sorted((row["link"].split("-")[0], row["in_flight"]) for row in remote) == sorted(
        [("loopback", 1), ("loopback", 2)] + [("netns" if namespaces_possible() is None else "client", n) for n in (1, 2)]
    )
    for row in remote:
        assert row["bytes_sent_per_step"] >= local[0]["bytes_per_step"]
        assert row["server_step_s"] > 0
    (shaped,) = [row for row in remote if row["link"] != "loopback" and row["in_flight"] == 1]
    # No link carries bits faster than its rate: the wire time is at least bytes / rate.
    assert shaped["step_time_s"] - shaped["server_step_s"] >= 0.9 * shaped["bytes_sent_per_step"] * 8 / RATE_BITS_S

    report = subprocess.run([sys.executable, "benchmarks/remote_report.py", str(out), "--out", str(tmp_path / "figure")],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    assert "### loopback" in report.stdout and f"### {shaped['link']}" in report.stdout
    for suffix in (".png", ".svg"):
        assert (tmp_path / "figure").with_suffix(suffix).stat().st_size > 10_000
