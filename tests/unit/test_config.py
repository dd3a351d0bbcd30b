import pytest

from magnetar.bookie.config import BookieConfig
from magnetar.common.errors import InvalidArgument


def test_sample_config_matches_the_defaults():
    # conf/bookie.toml documents every key with its default value.
    assert BookieConfig.load("conf/bookie.toml").model_dump() == BookieConfig.load().model_dump() | {
        "port": 3181
    }
    with open("conf/bookie.toml") as fh:
        assert set(BookieConfig.model_fields) <= set(fh.read().split())


def test_flags_beat_env_beat_file(tmp_path, monkeypatch):
    f = tmp_path / "b.toml"
    f.write_text('data_dir = "/from/file"\nport = 1\nflush_interval_s = 2.5\n')
    monkeypatch.setenv("MAGNETAR_BOOKIE_PORT", "2")
    monkeypatch.setenv("MAGNETAR_BOOKIE_DATA_DIR", "/from/env")
    cfg = BookieConfig.load(f, data_dir="/from/flag", port=None)
    assert (cfg.data_dir, cfg.port, cfg.flush_interval_s) == ("/from/flag", 2, 2.5)


@pytest.mark.parametrize(
    ("content", "message"),
    [("port = 'x'", "port"), ("nonsense = 1", "nonsense"), ("flush_interval_s = 0", "flush_interval_s"), ("[[", "TOML")],
)
def test_bad_config_gives_a_clear_error(tmp_path, content, message):
    f = tmp_path / "b.toml"
    f.write_text(content)
    with pytest.raises(InvalidArgument, match=message):
        BookieConfig.load(f)


def test_missing_file(tmp_path):
    with pytest.raises(InvalidArgument, match="not found"):
        BookieConfig.load(tmp_path / "nope.toml")


def test_auditor_sample_config_matches_the_defaults():
    from magnetar.auditor.config import AuditorConfig

    assert AuditorConfig.load("conf/auditor.toml").model_dump() == AuditorConfig.load().model_dump() | {"port": 3182}
    with open("conf/auditor.toml") as fh:
        assert set(AuditorConfig.model_fields) <= set(fh.read().split())
    assert AuditorConfig.load(grace_period_s=2.0).grace_period_s == 2.0  # --grace-period


def test_broker_sample_config_matches_the_defaults():
    from magnetar.broker.config import BrokerConfig

    assert BrokerConfig.load("conf/broker.toml").model_dump() == BrokerConfig.load().model_dump() | {"port": 6660}
    with open("conf/broker.toml") as fh:
        assert set(BrokerConfig.model_fields) <= set(fh.read().split())


@pytest.mark.parametrize(("service", "default_port"), [("broker", 6660), ("auditor", 3182), ("gateway", 8080)])
def test_every_services_sample_config_lists_every_key_with_its_default(service: str, default_port: int):
    import importlib
    import tomllib

    module = importlib.import_module(f"magnetar.{service}.config")
    config_cls = next(v for k, v in vars(module).items() if k.endswith("Config") and k != "ServiceConfig"
                      and isinstance(v, type) and v.__module__ == module.__name__)
    with open(f"conf/{service}.toml", "rb") as fh:
        listed = tomllib.load(fh)
    assert set(listed) == set(config_cls.model_fields)
    assert config_cls.load(f"conf/{service}.toml").model_dump() == config_cls.load().model_dump() | {"port": default_port}


def test_pulsars_ports_go_to_pulsars_protocol_and_grpc_moves_to_6660():
    """Pulsar applications keep pulsar://host:6650 (pulsar+ssl://host:6651) and change only
    the host name; Magnetar's gRPC door (magnetar://) is on 6660."""
    from magnetar.broker.config import DEFAULT_PORT, BrokerConfig
    from magnetar.client.connection import parse_service_url

    config = BrokerConfig.load()
    assert (DEFAULT_PORT, config.protocol_port, config.protocol_tls_port) == (6660, 6650, 6651)
    assert parse_service_url("magnetar://h") == ["h:6660"]


@pytest.mark.parametrize(
    "ports",
    [{"port": 6650}, {"protocol_port": 6660}, {"protocol_port": 7000, "port": 7000}, {"protocol_port": 7000, "protocol_tls_port": 7000, "tls_enabled": True}],
)
def test_a_broker_refuses_two_doors_on_one_port(ports: dict, tmp_path):
    from magnetar.broker.config import BrokerConfig

    tls = {"tls_cert_file": str(tmp_path / "c.pem"), "tls_key_file": str(tmp_path / "k.pem")} if ports.get("tls_enabled") else {}
    with pytest.raises(InvalidArgument, match="must differ"):
        BrokerConfig.load(**ports, **tls)
    # Without TLS the TLS port is not served: it may be anything.
    assert BrokerConfig.load(protocol_port=7000, protocol_tls_port=7000).protocol_port == 7000
