"""Token authentication's core (magnetar.common.tokens): every algorithm, expiry, ``alg:
none``, a wrong key, a wrong algorithm, garbage, and the key file formats."""

from __future__ import annotations

import base64
import json

import jwt
import pytest

from magnetar.common import tokens
from magnetar.common.errors import AuthenticationError, InvalidArgument

SECRET = bytes(range(32))


def _pair(algorithm: str, tmp_path) -> tuple[object, object]:
    private_pem, public_pem = tokens.generate_key_pair(algorithm)
    (tmp_path / "priv.pem").write_bytes(private_pem)
    (tmp_path / "pub.pem").write_bytes(public_pem)
    return tokens.load_private_key(tmp_path / "priv.pem"), tokens.load_public_key(tmp_path / "pub.pem")


@pytest.mark.parametrize("algorithm", ["HS256", "HS384", "HS512"])
def test_a_secret_key_token_names_its_role(algorithm: str) -> None:
    key = tokens.generate_secret_key(algorithm)
    token = tokens.create_token("alice", key, algorithm, expires_in_s=60)
    assert tokens.TokenAuthenticator(algorithm, key).authenticate(token) == "alice"
    assert len(key) == {"HS256": 32, "HS384": 48, "HS512": 64}[algorithm]


@pytest.mark.parametrize("algorithm", ["RS256", "ES256", "ES384"])
def test_a_key_pair_token_names_its_role(algorithm: str, tmp_path) -> None:
    private, public = _pair(algorithm, tmp_path)
    token = tokens.create_token("bob", private, algorithm)
    assert tokens.TokenAuthenticator(algorithm, public).authenticate(token) == "bob"
    # The servers' settings: the public key file alone.
    auth = tokens.TokenAuthenticator.from_settings(algorithm, public_key=str(tmp_path / "pub.pem"))
    assert auth.authenticate(token) == "bob"
    assert tokens.parse_unverified(token) == ({"alg": algorithm, "typ": "JWT"}, {"sub": "bob"})


def test_expiry_is_honoured() -> None:
    auth = tokens.TokenAuthenticator("HS256", SECRET)
    expired = tokens.create_token("alice", SECRET, expires_in_s=60, now=1_000_000)
    with pytest.raises(AuthenticationError, match="expired"):
        auth.authenticate(expired)
    assert auth.authenticate(tokens.create_token("alice", SECRET, expires_in_s=60)) == "alice"
    assert auth.authenticate(tokens.create_token("alice", SECRET)) == "alice"  # no exp: no limit (Pulsar's default)


def test_alg_none_is_refused() -> None:
    header = base64.urlsafe_b64encode(json.dumps({"alg": "none", "typ": "JWT"}).encode()).rstrip(b"=")
    claims = base64.urlsafe_b64encode(json.dumps({"sub": "root"}).encode()).rstrip(b"=")
    for unsigned in (f"{header.decode()}.{claims.decode()}.", jwt.encode({"sub": "root"}, None, algorithm="none")):
        with pytest.raises(AuthenticationError, match="'none'; only HS256 is accepted"):
            tokens.TokenAuthenticator("HS256", SECRET).authenticate(unsigned)
    with pytest.raises(InvalidArgument, match="unsupported token algorithm"):
        tokens.TokenAuthenticator("none", SECRET)


def test_another_key_is_refused(tmp_path) -> None:
    other = tokens.create_token("alice", b"x" * 32)
    with pytest.raises(AuthenticationError, match="signature does not verify"):
        tokens.TokenAuthenticator("HS256", SECRET).authenticate(other)
    private, _ = _pair("RS256", tmp_path)
    (tmp_path / "other").mkdir()
    _, public = _pair("RS256", tmp_path / "other")
    with pytest.raises(AuthenticationError, match="signature does not verify"):
        tokens.TokenAuthenticator("RS256", public).authenticate(tokens.create_token("alice", private, "RS256"))


def test_another_algorithm_than_the_configured_one_is_refused(tmp_path) -> None:
    private, public = _pair("RS256", tmp_path)
    rs_token = tokens.create_token("alice", private, "RS256")
    with pytest.raises(AuthenticationError, match="signed with 'RS256'; only HS256"):
        tokens.TokenAuthenticator("HS256", SECRET).authenticate(rs_token)
    # The classic confusion: an HS256 token keyed with the server's public key.
    public_pem = tokens.read_key_bytes(tmp_path / "pub.pem")
    forged = jwt.api_jws.PyJWS(algorithms=["HS256"]).encode(b'{"sub":"root"}', b"k" * 32, algorithm="HS256")
    for token in (forged, tokens.create_token("root", SECRET + SECRET, "HS384")):
        with pytest.raises(AuthenticationError, match="only RS256"):
            tokens.TokenAuthenticator("RS256", public).authenticate(token)
    assert public_pem.startswith(b"-----BEGIN PUBLIC KEY-----")


@pytest.mark.parametrize("garbage", ["", None, "garbage", "a.b.c", "eyJhbGciOiJIUzI1NiJ9..", "Bearer x.y.z"])
def test_garbage_is_refused_without_echoing_it(garbage: str | None) -> None:
    with pytest.raises(AuthenticationError) as info:
        tokens.TokenAuthenticator("HS256", SECRET).authenticate(garbage)
    assert not garbage or garbage not in info.value.message


def test_a_token_without_a_subject_is_refused() -> None:
    token = jwt.encode({"role": "alice"}, SECRET, algorithm="HS256")
    with pytest.raises(AuthenticationError, match="no subject"):
        tokens.TokenAuthenticator("HS256", SECRET).authenticate(token)
    with pytest.raises(InvalidArgument, match="subject"):
        tokens.create_token("", SECRET)


def test_secret_key_files_raw_base64_and_urls(tmp_path) -> None:
    key = tokens.generate_secret_key()
    (tmp_path / "raw.key").write_bytes(key)
    (tmp_path / "b64.key").write_bytes(base64.b64encode(key) + b"\n")
    data_url = "data:;base64," + base64.b64encode(key).decode()
    for source in (tmp_path / "raw.key", tmp_path / "b64.key", f"file://{tmp_path}/raw.key", data_url):
        assert tokens.load_secret_key(source) == key
    text = b"a passphrase, not base64 at all, 32 bytes or more!"  # used as it is
    (tmp_path / "pass.key").write_bytes(text)
    assert tokens.load_secret_key(tmp_path / "pass.key") == text
    assert tokens.TokenAuthenticator.from_settings("HS256", secret_key=str(tmp_path / "pass.key"))
    (tmp_path / "short.key").write_bytes(b"secret")  # too short to resist guessing
    with pytest.raises(InvalidArgument, match="6 bytes; HS256 needs at least 32"):
        tokens.TokenAuthenticator.from_settings("HS256", secret_key=str(tmp_path / "short.key"))
    with pytest.raises(InvalidArgument, match="HS512 needs at least 64"):
        tokens.create_token("alice", key, "HS512")
    with pytest.raises(InvalidArgument, match="cannot read key file"):
        tokens.load_secret_key(tmp_path / "missing.key")
    with pytest.raises(InvalidArgument, match="needs token_secret_key_file"):
        tokens.TokenAuthenticator.from_settings("HS256")
    with pytest.raises(InvalidArgument, match="needs token_public_key_file"):
        tokens.TokenAuthenticator.from_settings("ES256", secret_key=str(tmp_path / "raw.key"))


def test_pem_and_der_keys_and_wrong_files(tmp_path) -> None:
    from cryptography.hazmat.primitives import serialization

    private, public = _pair("ES256", tmp_path)
    der = public.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    (tmp_path / "pub.der").write_bytes(der)  # Pulsar's create-key-pair writes DER
    token = tokens.create_token("carol", private, "ES256")
    assert tokens.TokenAuthenticator("ES256", tokens.load_public_key(tmp_path / "pub.der")).authenticate(token) == "carol"
    with pytest.raises(InvalidArgument, match="not a public key"):
        tokens.load_public_key(tmp_path / "priv.pem")
    with pytest.raises(InvalidArgument, match="not an unencrypted private key"):
        tokens.load_private_key(tmp_path / "pub.pem")
    with pytest.raises(InvalidArgument, match="cannot sign"):
        tokens.create_token("carol", b"secret" * 8, "ES256")


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("30m", 1800), ("1h", 3600), ("7d", 604800), ("1y", 31536000)])
def test_durations(text: str, seconds: int) -> None:
    assert tokens.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1", "h", "0h", "-1h", "1.5h", "5q"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidArgument, match="bad duration"):
        tokens.parse_duration(text)
