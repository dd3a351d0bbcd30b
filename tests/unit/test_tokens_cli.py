"""``magnetar tokens``: keys, tokens, show and validate; errors are one line, exit 1
(bad usage 2), never a traceback."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import pytest

from magnetar.common import tokens
from magnetar.tools import tokenstool


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = tokenstool.main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_secret_key_token_show_and_validate(capsys, tmp_path) -> None:
    key = str(tmp_path / "secret.key")
    assert run(capsys, "create-secret-key", "--output", key)[0] == 0
    assert len((tmp_path / "secret.key").read_bytes()) == 32 and os.stat(key).st_mode & 0o777 == 0o600
    code, token, _ = run(capsys, "create", "--secret-key", key, "--subject", "app-1", "--expiry", "1h")
    assert code == 0
    token = token.strip()
    code, out, _ = run(capsys, "show", token)
    header, claims = out.split("\n---\n")
    assert json.loads(header) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(claims)["sub"] == "app-1" and "exp" in json.loads(claims)
    assert run(capsys, "validate", token, "--secret-key", key)[:2] == (0, "app-1\n")
    (tmp_path / "token").write_text(token + "\n")
    assert run(capsys, "validate", "--token-file", str(tmp_path / "token"), "--secret-key", f"file://{key}")[1] == "app-1\n"


def test_base64_secret_key_is_read_back(capsys, tmp_path) -> None:
    code, out, _ = run(capsys, "create-secret-key", "--base64")
    assert code == 0 and len(base64.b64decode(out.strip())) == 32
    (tmp_path / "b64.key").write_text(out)
    token = run(capsys, "create", "--secret-key", str(tmp_path / "b64.key"), "-s", "bob")[1].strip()
    auth = tokens.TokenAuthenticator("HS256", base64.b64decode(out.strip()))
    assert auth.authenticate(token) == "bob"


@pytest.mark.parametrize("algorithm", ["RS256", "ES256"])
def test_key_pair_tokens(capsys, tmp_path, algorithm: str) -> None:
    priv, pub = str(tmp_path / "priv.pem"), str(tmp_path / "pub.pem")
    assert run(capsys, "create-key-pair", "--algorithm", algorithm, "--output-private-key", priv,
               "--output-public-key", pub)[0] == 0
    assert os.stat(priv).st_mode & 0o777 == 0o600
    token = run(capsys, "create", "--private-key", priv, "--subject", "carol")[1].strip()
    assert tokens.parse_unverified(token)[0]["alg"] == algorithm  # taken from the key
    assert run(capsys, "validate", token, "--public-key", pub)[:2] == (0, "carol\n")


def test_refusals_are_one_line_and_exit_1(capsys, tmp_path) -> None:
    key, other = str(tmp_path / "a.key"), str(tmp_path / "b.key")
    run(capsys, "create-secret-key", "-o", key)
    run(capsys, "create-secret-key", "-o", other)
    token = run(capsys, "create", "--secret-key", key, "-s", "alice")[1].strip()
    cases = [
        (("validate", token, "--secret-key", other), "signature does not verify"),
        (("validate", "garbage", "--secret-key", key), "malformed"),
        (("validate", token, "--secret-key", key, "--algorithm", "HS512"), "at least 64"),
        (("create", "-s", "x", "--secret-key", str(tmp_path / "missing")), "cannot read key file"),
        (("create", "-s", "x", "--secret-key", key, "--expiry", "5q"), "bad duration"),
        (("show", "not-a-token"), "not a JWT"),
    ]
    for argv, reason in cases:
        code, out, err = run(capsys, *argv)
        assert (code, out) == (1, ""), argv
        assert err.startswith("magnetar tokens: ") and reason in err and err.count("\n") == 1, err
        assert token not in err


def test_expired_token(capsys, tmp_path) -> None:
    key = str(tmp_path / "a.key")
    run(capsys, "create-secret-key", "-o", key)
    expired = tokens.create_token("alice", tokens.load_secret_key(key), expires_in_s=1, now=1_000_000)
    code, _, err = run(capsys, "validate", expired, "--secret-key", key)
    assert code == 1 and "expired" in err


def test_bad_usage_exits_2(capsys) -> None:
    assert run(capsys, "create", "--subject", "x")[0] == 2  # no key
    assert run(capsys, "create-key-pair", "--algorithm", "HS256", "--output-private-key", "a",
               "--output-public-key", "b")[0] == 2


def test_the_magnetar_command_runs_it(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    key = tmp_path / "k"
    done = subprocess.run([sys.executable, "-m", "magnetar.tools.cli", "tokens", "create-secret-key", "-o", str(key)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "magnetar.tools.cli", "tokens", "validate", "x.y.z", "--secret-key", str(key)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("magnetar tokens: ") and "Traceback" not in done.stderr


def test_create_basic_user_writes_a_line_the_basic_provider_accepts(capsys, monkeypatch, tmp_path) -> None:
    import io

    from magnetar.common.authentication import (
        AuthenticationService,
        BasicAuthenticator,
        Credentials,
        basic_header,
    )

    monkeypatch.setattr(sys, "stdin", io.StringIO("s3cret: with spaces\n"))
    code, line, err = run(capsys, "create-basic-user", "--user", "app-1")
    assert (code, err) == (0, "") and line.startswith("app-1:$6$")
    (tmp_path / "users").write_text(line)
    service = AuthenticationService(basic=BasicAuthenticator.from_file(tmp_path / "users"))
    assert service.authenticate(Credentials(basic_header("app-1", "s3cret: with spaces"))) == "app-1"
    for user, stdin in (("a:b", "x\n"), ("app-1", "\n")):
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code, out, err = run(capsys, "create-basic-user", "--user", user)
        assert (code, out) == (1, "") and err.startswith("magnetar tokens: ") and len(err.splitlines()) == 1
