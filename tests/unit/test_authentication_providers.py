"""The door-neutral authentication core (common/authentication.py): Pulsar's ``token``,
``basic`` and ``tls`` providers and its anonymous role, given what a door saw."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from magnetar.common import shacrypt, tokens
from magnetar.common.authentication import (
    AuthenticationService,
    BasicAuthenticator,
    Credentials,
    basic_header,
    certificate_role,
)
from magnetar.common.errors import AuthenticationError, InvalidArgument
from magnetar.testing.certs import TestCa

KEY = tokens.generate_secret_key()


def _password_file(tmp_path: Path, **users: str) -> str:
    path = tmp_path / "users.htpasswd"
    path.write_text("# magnetar users\n\n" + "".join(f"{u}:{shacrypt.hash_password(p)}\n" for u, p in users.items()))
    return str(path)


@pytest.fixture
def service(tmp_path: Path) -> AuthenticationService:
    return AuthenticationService.from_settings(
        ["token", "basic", "tls"], token_secret_key=f"data:;base64,{base64.b64encode(KEY).decode()}",
        basic_auth_conf=_password_file(tmp_path, alice="wonderland", bob="builder"),
    )


# -- SHA-crypt: the hashes of the password file ------------------------------------------


@pytest.mark.parametrize(("password", "hashed"), [
    # the SHA-crypt specification's test vectors, as glibc crypt(3) and `openssl passwd -5/-6` give them
    ("Hello world!", "$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"),
    ("Hello world!", "$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"),
    ("Hello world!", "$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"),
    # `openssl passwd -6 -salt abc secret`
    ("secret", "$6$abc$IdWKNKTJEb8LxY7CGg8YBXlvtfZzFw7Mp/r6niK9YB2mdvgY..TKjv1T..8RadRt2qvUHYRLr/TsVArtr91iR1"),
])  # fmt: skip
def test_sha_crypt_gives_the_published_hashes(password: str, hashed: str) -> None:
    assert shacrypt.verify(password.encode(), hashed)
    assert not shacrypt.verify(password.encode() + b"!", hashed)


def test_a_new_hash_has_a_random_salt_and_verifies() -> None:
    first, second = shacrypt.hash_password("pässwörd"), shacrypt.hash_password("pässwörd")
    assert first != second and first.startswith("$6$")
    assert shacrypt.verify("pässwörd".encode(), first) and shacrypt.verify("pässwörd".encode(), second)


# -- basic -------------------------------------------------------------------------------


def test_a_basic_user_is_its_role(service: AuthenticationService) -> None:
    assert service.authenticate(Credentials(basic_header("alice", "wonderland"))) == "alice"
    assert service.authenticate(Credentials(basic_header("bob", "builder"))) == "bob"


@pytest.mark.parametrize(("header", "reason"), [
    (basic_header("alice", "wonderlanD"), "user name or password is wrong"),
    (basic_header("carol", "wonderland"), "user name or password is wrong"),  # unknown: the same words
    ("Basic not-base64!", "malformed"),
    ("Basic " + base64.b64encode(b"alice-without-a-colon").decode(), "malformed"),
    ("Basic " + base64.b64encode(b":nobody").decode(), "malformed"),
    ("Basic " + base64.b64encode(b"\xff\xfe:x").decode(), "malformed"),
])  # fmt: skip
def test_bad_basic_credentials_are_refused(service: AuthenticationService, header: str, reason: str) -> None:
    with pytest.raises(AuthenticationError, match=reason) as refused:
        service.authenticate(Credentials(header))
    assert "wonderland" not in refused.value.message


def test_a_verified_password_is_remembered_but_a_wrong_one_is_not(service: AuthenticationService) -> None:
    header = Credentials(basic_header("alice", "wonderland"))
    service.authenticate(header)
    started = time.perf_counter()
    for _ in range(100):
        assert service.authenticate(header) == "alice"
    assert (time.perf_counter() - started) / 100 < 0.001  # no 5,000 rounds of SHA-512 each time
    for _ in range(2):
        with pytest.raises(AuthenticationError):
            service.authenticate(Credentials(basic_header("alice", "wonderlanD")))


@pytest.mark.parametrize(("line", "reason"), [
    ("alice:$apr1$abc$0123456789abcdefghijkl", "'apr1'"),
    ("alice:$1$abc$0123456789abcdefghijkl", "'1'"),
    ("alice:$2y$05$0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ", "'2y'"),
    ("alice:abJnggxhB/yWI", "'crypt'"),
    ("alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "'crypt'"),
    ("alice", "line 1 is not user:hash"),
    ("", "names no user"),
])  # fmt: skip
def test_a_password_file_with_another_scheme_or_a_bad_line_is_refused_at_start(
    tmp_path: Path, line: str, reason: str
) -> None:
    path = tmp_path / "users"
    path.write_text(line + "\n")
    with pytest.raises(InvalidArgument, match=reason):
        BasicAuthenticator.from_file(path)


def test_a_user_named_twice_and_a_missing_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "users"
    hashed = shacrypt.hash_password("x")
    path.write_text(f"alice:{hashed}\nalice:{hashed}\n")
    with pytest.raises(InvalidArgument, match="named twice"):
        BasicAuthenticator.from_file(path)
    with pytest.raises(InvalidArgument, match="cannot read"):
        BasicAuthenticator.from_file(tmp_path / "missing")
    with pytest.raises(InvalidArgument, match="needs basic_auth_conf"):
        AuthenticationService.from_settings(["basic"])


# -- tls -----------------------------------------------------------------------------------


def test_a_client_certificate_is_the_role_of_its_common_name(tmp_path: Path, service: AuthenticationService) -> None:
    ca = TestCa.create(tmp_path / "ca")
    pem = Path(ca.issue("app-1", []).cert_file).read_bytes()
    assert certificate_role(pem) == "app-1"
    assert service.authenticate(Credentials(None, pem)) == "app-1"
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    der = x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    assert service.authenticate(Credentials(None, der)) == "app-1"


def test_a_certificate_without_a_common_name_is_refused(tmp_path: Path, service: AuthenticationService) -> None:
    ca = TestCa.create(tmp_path / "ca")
    pem = Path(ca.issue("no-cn", [], common_name=False).cert_file).read_bytes()
    with pytest.raises(AuthenticationError, match="no common name"):
        service.authenticate(Credentials(None, pem))
    with pytest.raises(AuthenticationError, match="cannot be read"):
        service.authenticate(Credentials(None, b"-----BEGIN CERTIFICATE-----\nnot one\n-----END CERTIFICATE-----\n"))


def test_a_header_wins_over_the_certificate_and_tls_off_ignores_certificates(tmp_path: Path) -> None:
    ca = TestCa.create(tmp_path / "ca")
    pem = Path(ca.issue("app-1", []).cert_file).read_bytes()
    both = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), tls=True)
    assert both.authenticate(Credentials("Bearer " + tokens.create_token("bob", KEY), pem)) == "bob"
    token_only = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY))
    with pytest.raises(AuthenticationError, match="no token was presented"):
        token_only.authenticate(Credentials(None, pem))


# -- anonymous --------------------------------------------------------------------------------


def test_a_caller_without_credentials_is_the_anonymous_role() -> None:
    service = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), anonymous_user_role="guest")
    assert service.authenticate(Credentials()) == "guest"
    assert service.authenticate(Credentials("Bearer " + tokens.create_token("bob", KEY))) == "bob"


@pytest.mark.parametrize("header", [
    "Bearer " + tokens.create_token("bob", tokens.generate_secret_key()),  # another key
    "Bearer " + tokens.create_token("bob", KEY, expires_in_s=1, now=1_000_000),  # expired
    "Bearer not-a-jwt",
    "Bearer ",
    basic_header("alice", "x"),  # basic is not enabled here
    "Digest username=alice",
])  # fmt: skip
def test_credentials_that_fail_are_refused_even_with_an_anonymous_role(header: str) -> None:
    service = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), anonymous_user_role="guest")
    with pytest.raises(AuthenticationError):
        service.authenticate(Credentials(header))


def test_without_an_anonymous_role_a_caller_without_credentials_is_refused_as_before() -> None:
    service = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY))
    with pytest.raises(AuthenticationError, match="^authentication required: no token was presented$"):
        service.authenticate(Credentials())
    several = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), tls=True)
    with pytest.raises(AuthenticationError, match=r"no credentials were presented \(accepted: token, tls\)"):
        several.authenticate(Credentials())


def test_the_settings_name_pulsars_providers(tmp_path: Path) -> None:
    from magnetar.broker.config import BrokerConfig

    with pytest.raises(InvalidArgument, match="unknown authentication provider"):
        BrokerConfig.load(authentication_providers=["token", "kerberos"])
    with pytest.raises(InvalidArgument, match="is empty"):
        BrokerConfig.load(authentication_enabled=True, authentication_providers=[]).authenticator()
    config = BrokerConfig.load(
        authentication_enabled=True, authentication_providers=["basic"], anonymous_user_role="guest",
        basic_auth_conf=_password_file(tmp_path, alice="wonderland"),
    )
    service = config.authenticator()
    assert service is not None and service.methods == ("basic",)
    assert service.authenticate(Credentials(basic_header("alice", "wonderland"))) == "alice"
    assert service.authenticate(Credentials()) == "guest"
    assert BrokerConfig.load().authenticator() is None  # off by default


def test_only_a_password_not_yet_verified_is_costly(service: AuthenticationService) -> None:
    """What a door runs in a thread: hashing a new (or wrong) password, nothing else."""
    good, wrong = Credentials(basic_header("alice", "wonderland")), Credentials(basic_header("alice", "x"))
    assert service.is_costly(good) and service.is_costly(wrong)
    service.authenticate(good)
    assert not service.is_costly(good) and service.is_costly(wrong)
    bearer = Credentials("Bearer " + tokens.create_token("bob", KEY))
    assert not any(service.is_costly(c) for c in (bearer, Credentials(), Credentials("Basic !!")))


def test_a_pulsar_clients_method_and_data_are_credentials(tmp_path: Path, service: AuthenticationService) -> None:
    """What the Pulsar protocol door's CONNECT carries (auth_method_name, auth_data)."""
    token = tokens.create_token("bob", KEY)
    assert service.authenticate(Credentials.of_method("token", token.encode())) == "bob"
    assert service.authenticate(Credentials.of_method("basic", b"alice:wonderland")) == "alice"
    pem = Path(TestCa.create(tmp_path / "ca").issue("app-1", []).cert_file).read_bytes()
    assert service.authenticate(Credentials.of_method("tls", b"", pem)) == "app-1"
    guest = AuthenticationService(token=tokens.TokenAuthenticator("HS256", KEY), anonymous_user_role="guest")
    assert guest.authenticate(Credentials.of_method("", b"")) == "guest"
    for method, data, reason in (("sasl", b"x", "'sasl' is not accepted"), ("basic", b"alice", "malformed"),
                                 ("token", b"\xff", "not UTF-8")):
        with pytest.raises(AuthenticationError, match=reason):
            service.authenticate(Credentials.of_method(method, data))
