"""``magnetar standalone --token-secret-key``: the settings its children start with.

Each child's config is built from the environment standalone hands it, as the child
builds it at start: every door authenticates with the key, the broker authorizes, and
the token the components present is accepted as the first superuser role's."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from magnetar.auditor.config import AuditorConfig
from magnetar.bookie.config import BookieConfig
from magnetar.broker.config import BrokerConfig
from magnetar.common import tokens
from magnetar.common.authentication import Credentials
from magnetar.gateway.config import GatewayConfig
from magnetar.tools import standalone


def child_env(monkeypatch: pytest.MonkeyPatch, args: list[str], data_dir: Path) -> None:
    parsed = standalone.build_parser().parse_args(args)
    for name, value in standalone._auth_env(parsed, data_dir).items():
        monkeypatch.setenv(name, value)


def test_token_secret_key_turns_authentication_on_in_every_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(tokens.generate_secret_key())
    data_dir = tmp_path / "data"
    child_env(monkeypatch, ["--token-secret-key", str(key_file), "--superuser-roles", "admin, ops"], data_dir)

    zk = "127.0.0.1:1"
    bookie = BookieConfig(zookeeper=zk, data_dir=str(tmp_path / "b"))
    broker, auditor, gateway = BrokerConfig(zookeeper=zk), AuditorConfig(zookeeper=zk), GatewayConfig(zookeeper=zk)
    operator = tokens.create_token("ops", tokens.load_secret_key(key_file))
    for config in (bookie, broker, auditor, gateway):
        assert config.authentication_enabled and config.superuser_roles == ["admin", "ops"]
        authenticator = config.authenticator()
        assert authenticator is not None
        assert authenticator.authenticate(Credentials(f"Bearer {operator}")) == "ops"
    assert broker.authorization_enabled
    for config in (broker, auditor, gateway):  # they call bookies and brokers as the first superuser
        token = config.service_token()
        assert token is not None
        assert broker.authenticator().authenticate(Credentials(f"Bearer {token}")) == "admin"  # type: ignore[union-attr]
    assert stat.S_IMODE((data_dir / "service.token").stat().st_mode) == 0o600


def test_without_a_key_nothing_changes(tmp_path: Path):
    parsed = standalone.build_parser().parse_args([])
    assert standalone._auth_env(parsed, tmp_path) == {}
    assert not (tmp_path / "service.token").exists()


@pytest.mark.parametrize(("args", "words"), [
    (["--superuser-roles", " , "], "names no role"),
    (["--superuser-roles", "admin"], "empty"),
])
def test_bad_auth_options_are_refused_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             args: list[str], words: str):
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(b"" if words == "empty" else tokens.generate_secret_key())
    data_dir = tmp_path / "data"
    code = standalone.main(["--data-dir", str(data_dir), "--token-secret-key", str(key_file), *args])
    assert code == 1
    assert words in capsys.readouterr().err
    assert not data_dir.exists()  # nothing started, nothing written
