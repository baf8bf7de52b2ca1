"""Who may use a server: loopback by default; elsewhere a token (checked in constant time on every
metadata entry) and TLS unless --insecure says otherwise."""

from __future__ import annotations

import os
import shutil

import grpc
import pytest
import torch
from child_commands import run_child

from trainspeed.errors import UsageError
from trainspeed.serve import auth
from trainspeed.serve.config import ServeConfig
from trainspeed.targets import get_target
from trainspeed.wire import remote_pb2 as pb
from trainspeed.wire import remote_pb2_grpc as pb_grpc
from trainspeed.wire.credentials import TLS_CA_VARIABLE, TOKEN_FILE_VARIABLE
from trainspeed.workloads import get_workload

from serve_runs import TOKEN


@pytest.mark.parametrize(
    "settings, fragment",
    [
        ({"listen": "0.0.0.0:50051"}, "not a loopback address: give --token-file"),
        ({"listen": "10.1.2.3:50051", "token_file": "TOKEN"}, "give --tls-cert and --tls-key, or --insecure"),
        ({"listen": "[::]:50051", "token_file": "TOKEN"}, "give --tls-cert and --tls-key, or --insecure"),
        ({"tls_cert": "x.pem"}, "give both --tls-cert and --tls-key"),
        ({"token_file": "SHORT"}, "at least 16 printable characters"),
        ({"token_file": "/no/such/file"}, "cannot read a token"),
        ({"listen": "nohost"}, "bad --listen 'nohost'"),
        ({"target": "remote:127.0.0.1:1/cpu:eager:fp32"}, "must be a local target"),
        # values the CLI's parser refuses first, in a ServeConfig made in Python
        ({"threads": 0}, "serve: --threads must be positive, got 0"),
        ({"max_sessions": 0}, "serve: --max-sessions must be >= 1, got 0"),
        ({"idle_timeout_s": float("nan")}, "serve: --idle-timeout-s must be a positive number of seconds, got nan"),
        ({"memory_budget_gib": -1.0}, "serve: --memory-budget-gib must be a positive number, got -1.0"),
    ],
)
def test_exposed_or_odd_settings_are_refused_before_listening(settings, fragment, token_file, tmp_path):
    short = tmp_path / "short"
    short.write_text("abc\n")
    values = {key: {"TOKEN": str(token_file), "SHORT": str(short)}.get(value, value) for key, value in settings.items()}
    with pytest.raises(UsageError, match=fragment.replace("[", r"\[").replace("(", r"\(")):
        ServeConfig(**values).validate()


@pytest.mark.parametrize("source", ["/dev/zero", "large file"])
def test_a_token_file_is_read_only_up_to_a_small_size(source, tmp_path):
    """/dev/zero was read until memory ran out; a large file of printable bytes was taken as a token."""
    path = source
    if source == "large file":
        path = tmp_path / "large"
        path.write_text("a" * (1 << 20))
    with pytest.raises(UsageError, match="more than 4096 bytes; a token file holds one line"):
        ServeConfig(token_file=str(path)).validate()


def test_a_token_file_others_may_read_is_used_with_one_warning(token_file, capsys):
    ServeConfig(token_file=str(token_file)).validate()
    assert capsys.readouterr().err == ""
    token_file.chmod(0o644)
    ServeConfig(token_file=str(token_file)).validate()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainspeed: warning: serve: --token-file"), lines
    assert "is readable by group or others (mode 644)" in lines[0] and f"chmod 600 {token_file}" in lines[0]


def test_loopback_needs_nothing_and_an_explicit_insecure_opens_other_addresses(token_file):
    ServeConfig(listen="127.0.0.1:1").validate()
    ServeConfig(listen="[::1]:1").validate()
    ServeConfig(listen="0.0.0.0:1", token_file=str(token_file), insecure=True).validate()


def test_the_token_is_compared_in_constant_time_over_every_entry(monkeypatch):
    compared = []
    real = auth.hmac.compare_digest

    def counting(a, b):
        compared.append(a)
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    expected = f"Bearer {TOKEN}".encode()
    good, bad = ("authorization", f"Bearer {TOKEN}"), ("authorization", "Bearer " + "x" * 32)
    assert auth.token_matches([("user-agent", "x"), good], expected)
    assert not auth.token_matches([bad, good], expected) and not auth.token_matches([good, bad], expected)
    assert not auth.token_matches([("user-agent", "x")], expected) and not auth.token_matches(None, expected)
    assert len(compared) == 1 + 2 + 2  # every authorization entry, no early exit


@pytest.fixture
def token_server(serve, token_file):
    """Listening on every address (so a token is required) without TLS, explicitly."""
    running = serve(listen="0.0.0.0:0", token_file=str(token_file), insecure=True)
    return running, f"remote:127.0.0.1:{running.address.port}/cpu:eager:fp32"


def test_the_right_token_is_let_in(token_server, token_file, monkeypatch):
    server, name = token_server
    monkeypatch.setenv(TOKEN_FILE_VARIABLE, str(token_file))
    target = get_target(name)
    workload = get_workload("mahjong")
    trainable = target.build(workload, "tiny", 0)
    batch = workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0))
    assert torch.isfinite(target.run_step(trainable, target.move_batch(batch)))


@pytest.mark.parametrize("token", [None, "f" * 32])
def test_a_missing_or_wrong_token_is_refused_in_one_line(token_server, tmp_path, monkeypatch, token):
    server, name = token_server
    if token is not None:
        (tmp_path / "wrong").write_text(token)
        monkeypatch.setenv(TOKEN_FILE_VARIABLE, str(tmp_path / "wrong"))
    with pytest.raises(UsageError, match=f"refused this client \\(missing or wrong token\\); set {TOKEN_FILE_VARIABLE}"):
        get_target(name)


def test_every_call_is_checked_not_only_describe(token_server):
    server, _ = token_server
    channel = grpc.insecure_channel(f"127.0.0.1:{server.address.port}")
    stub = pb_grpc.TrainerStub(channel)
    opened = pb.ClientMessage(open=pb.Open(workload="mahjong", size="tiny", target="cpu:eager:fp32"))
    for call in (lambda: stub.MeasurePeak(pb.PeakRequest(), timeout=10),
                 lambda: list(stub.Session(iter([opened]), timeout=10)),
                 lambda: list(stub.Session(iter([opened]), timeout=10, metadata=[("authorization", "Bearer " + "0" * 32)]))):
        with pytest.raises(grpc.RpcError) as caught:
            call()
        assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED
    channel.close()
    assert server.host.live_sessions == 0


def _openssl(*args: str) -> None:
    made = run_child(["openssl", *args], timeout=60)
    assert made.returncode == 0, made.stderr


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl (in a child process: a
    test that needs it is end-to-end)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert))
    return cert, key


@pytest.mark.e2e
def test_a_key_that_is_not_the_certificates_is_named_before_listening(certificate, tmp_path, capsys):
    """gRPC alone reported this as a taken port."""
    from trainspeed.cli import main

    cert, _ = certificate
    other_key = tmp_path / "other.key"
    _openssl("genrsa", "-out", str(other_key), "2048")
    code = main(["serve", "--listen", "127.0.0.1:0", "--tls-cert", str(cert), "--tls-key", str(other_key)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"trainspeed: error: serve: --tls-key {other_key} is not the private key of --tls-cert "
                                 f"{cert}; give the key the certificate was made with"], err


@pytest.mark.e2e
def test_tls_with_the_servers_certificate_works_and_without_it_is_one_line(serve, certificate, monkeypatch):
    cert, key = certificate
    server = serve(tls_cert=str(cert), tls_key=str(key))
    with pytest.raises(UsageError, match=f"no trainspeed server answers .*; if it speaks TLS, set {TLS_CA_VARIABLE}"):
        get_target(server.remote_name)
    monkeypatch.setenv(TLS_CA_VARIABLE, str(cert))
    target = get_target(server.remote_name)
    assert target.info.target == "cpu:eager:fp32"
    workload = get_workload("mahjong")
    trainable = target.build(workload, "tiny", 0)
    batch = workload.synthetic_batch("tiny", 8, torch.Generator().manual_seed(0))
    assert torch.isfinite(target.run_step(trainable, target.move_batch(batch)))


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--listen", "0.0.0.0:0"], "not a loopback address: give --token-file"),
        (["--target", "gpu:eager:fp32"], "unknown device 'gpu'"),
        (["--target", "cpu:lazy:fp32"], "mode 'lazy' is not available on cpu"),
        (["--threads", "0"], "argument --threads: '0' must be at least 1"),
        (["--threads", "100000"], f"argument --threads: '100000' is more than {os.cpu_count()} threads, more than this machine's CPUs"),
        (["--idle-timeout-s", "0"], "argument --idle-timeout-s: '0' must be above 0"),
        (["--idle-timeout-s", "3000000"], "argument --idle-timeout-s: '3000000' is more than 2147483 s (about 24.8 days"),
        (["--idle-timeout-s", "1e12"], "argument --idle-timeout-s: '1e12' is more than 2147483 s"),
        (["--idle-timeout-s", "nan"], "argument --idle-timeout-s: 'nan' is not a finite number"),
        (["--memory-budget-gib", "-1"], "argument --memory-budget-gib: '-1' must be above 0"),
        (["--memory-budget-gib", "1e300"], "GiB, more than this machine's memory"),
        (["--workload", "charlm"], "--workload 'charlm': write package.module:factory"),
        (["--workload", "no_such_module_anywhere:factory"], "--workload no_such_module_anywhere:factory: cannot import 'no_such_module_anywhere'"),
    ],
)
def test_serve_answers_bad_flags_with_one_line_and_exit_code_2(capsys, argv, fragment):
    from trainspeed.cli import main

    code = main(["serve", "--listen", "127.0.0.1:0", *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("trainspeed: error:") and fragment in err[0], err
