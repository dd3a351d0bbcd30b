"""Typed service configuration: defaults < TOML file < environment < command-line flags.

Each service defines one subclass with its own env prefix (``MAGNETAR_BOOKIE_`` …) and
builds it once in its entry point with :meth:`ServiceConfig.load`; core code receives
the object and never reads ``os.environ``.
"""

from __future__ import annotations

import contextvars
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from magnetar.common.authentication import PROVIDERS, AuthenticationService
from magnetar.common.errors import InvalidArgument
from magnetar.common.tokens import read_key_bytes

_config_file: contextvars.ContextVar[Path | None] = contextvars.ContextVar(
    "magnetar_config_file", default=None
)


class _TomlFileSource(PydanticBaseSettingsSource):
    """Reads the TOML file named by the ``load`` call in progress."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _config_file.get()
        if path is None:
            return {}
        try:
            with open(path, "rb") as fh:
                return tomllib.load(fh)
        except FileNotFoundError as exc:
            raise InvalidArgument(f"config file not found: {path}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise InvalidArgument(f"config file {path} is not valid TOML: {exc}") from exc


class ServiceConfig(BaseSettings):
    """Keys every service has."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True)

    zookeeper: str = "127.0.0.1:2181"
    """ZooKeeper connect string, host:port[,host:port...]."""
    zk_root: str = "/magnetar"
    """Root znode under which all Magnetar metadata lives."""
    zk_session_timeout_s: float = 10.0
    """ZooKeeper session timeout; ephemeral registrations vanish this long after a crash."""
    host: str = "127.0.0.1"
    """Address the gRPC server binds."""
    port: int = 0
    """gRPC port (0: the service's default)."""
    advertised_address: str = ""
    """host:port other processes use to reach this one (default: host:port)."""
    metrics_port: int = 0
    """Prometheus /metrics port; 0 disables the endpoint."""
    log_level: str = "INFO"
    tls_enabled: bool = False
    """Serve this service's port with TLS (gRPC, or HTTPS for the gateway) instead of plain text."""
    tls_cert_file: str = ""
    """PEM certificate chain of this service (served with TLS; shown as client certificate)."""
    tls_key_file: str = ""
    """PEM private key of ``tls_cert_file``."""
    tls_trust_certs_file: str = ""
    """PEM CA bundle that peers' certificates must chain to: clients' (mTLS) and servers' this
    service calls ("": the system's roots for servers)."""
    tls_require_client_cert: bool = False
    """With ``tls_enabled``: refuse clients without a certificate signed by ``tls_trust_certs_file``."""

    @model_validator(mode="after")
    def _tls_has_its_files(self) -> Self:
        if self.tls_enabled and not (self.tls_cert_file and self.tls_key_file):
            raise ValueError("tls_enabled needs tls_cert_file and tls_key_file")
        if self.tls_require_client_cert and not self.tls_trust_certs_file:
            raise ValueError("tls_require_client_cert needs tls_trust_certs_file (the CA of client certificates)")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlFileSource(settings_cls))

    @classmethod
    def load(cls, config_file: str | Path | None = None, **overrides: Any) -> Self:
        """Build the config; ``overrides`` (command-line flags) that are None are ignored.

        Raises:
            InvalidArgument: the file is missing or invalid, or a value is wrong.
        """
        token = _config_file.set(Path(config_file) if config_file else None)
        try:
            return cls(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidArgument(f"invalid configuration: {problems}") from exc
        finally:
            _config_file.reset(token)

    def address(self, default_port: int) -> str:
        """The host:port peers should use to reach this service."""
        return self.advertised_address or f"{self.host}:{self.port or default_port}"


class AuthenticationSettings(BaseModel):
    """Authentication of a service's doors (docs/security.md); off by default."""

    authentication_enabled: bool = False
    """Require a role on every call but health checks (Pulsar's ``authenticationEnabled``)."""
    authentication_providers: list[str] = ["token"]
    """The providers enabled, of ``token``, ``basic`` and ``tls`` (Pulsar's
    ``authenticationProviders``). In the environment, write the list as JSON."""
    anonymous_user_role: str = ""
    """The role of a caller that presents no credentials (Pulsar's ``anonymousUserRole``;
    "": such a caller is refused)."""
    token_algorithm: str = "HS256"
    """The only signing algorithm accepted: HS256/384/512 (secret key) or RS256/384/512,
    ES256/384/512 (key pair); tokens naming another one (``none`` included) are refused."""
    token_secret_key_file: str = ""
    """The secret key (HS algorithms): a path, file:///path or data:;base64,<key>."""
    token_public_key_file: str = ""
    """The public key (RS, ES algorithms), PEM or DER: a path, file:///path or data:..."""
    basic_auth_conf: str = ""
    """The ``basic`` provider's password file of ``user:hash`` lines ($6$ or $5$ hashes):
    a path, file:///path or data:;base64,... (Pulsar's ``basicAuthConf``)."""
    superuser_roles: list[str] = []
    """Roles that may do everything (the services' own token is one of these)."""

    client_certificates_optional: ClassVar[bool] = False
    """Whether the door can ask for a client certificate without requiring one (the
    gateway's uvicorn can; gRPC asks for one only when it requires it)."""

    @model_validator(mode="after")
    def _known_providers(self) -> Self:
        providers = {p.strip().lower() for p in self.authentication_providers}
        unknown = sorted(providers - set(PROVIDERS))
        if unknown:
            raise ValueError(f"unknown authentication provider(s) {unknown}: use {', '.join(PROVIDERS)}")
        if self.authentication_enabled and "tls" in providers:
            if not (getattr(self, "tls_enabled", False) and getattr(self, "tls_trust_certs_file", "")):
                raise ValueError(
                    "the tls authentication provider needs tls_enabled and tls_trust_certs_file (the CA of client certificates)"
                )
            if not self.client_certificates_optional and not getattr(self, "tls_require_client_cert", False):
                raise ValueError(
                    "the tls authentication provider needs tls_require_client_cert: "
                    "a gRPC server asks for a client certificate only when it requires one"
                )
        return self

    def authenticator(self) -> AuthenticationService | None:
        """The configured authentication; None when authentication is off.

        Raises:
            InvalidArgument: no provider, or a provider's key or password file is missing,
                unreadable or bad.
        """
        if not self.authentication_enabled:
            return None
        return AuthenticationService.from_settings(
            self.authentication_providers,
            token_algorithm=self.token_algorithm,
            token_secret_key=self.token_secret_key_file,
            token_public_key=self.token_public_key_file,
            basic_auth_conf=self.basic_auth_conf,
            anonymous_user_role=self.anonymous_user_role,
        )


class ServiceTokenSettings(BaseModel):
    """The token a service presents to brokers and bookies (a superuser role's)."""

    broker_client_auth_token: str = ""
    """The token itself (prefer the _file key: environments and files leak less)."""
    broker_client_auth_token_file: str = ""
    """A file holding the token (read once at start); used if the token is not set."""

    def service_token(self) -> str | None:
        """The token to present, or None (no authentication).

        Raises:
            InvalidArgument: the token file cannot be read or is empty.
        """
        if self.broker_client_auth_token:
            return self.broker_client_auth_token.strip()
        if not self.broker_client_auth_token_file:
            return None
        token = read_key_bytes(self.broker_client_auth_token_file).decode(errors="replace").strip()
        if not token:
            raise InvalidArgument(f"the token file {self.broker_client_auth_token_file} is empty")
        return token


class ClientTlsConfig(BaseSettings):
    """The key of services that call other services (brokers, auditors, the gateway)."""

    tls_client_enabled: bool = False
    """Call bookies, brokers and auditor replicas with TLS, trusting ``tls_trust_certs_file``
    and showing ``tls_cert_file``/``tls_key_file`` (when set) as client certificate."""
