"""Token keys for tests with authentication on: a secret key on disk, a service token
of a superuser role, and tokens of any role (``keys.token("app-1")``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from magnetar.common import tokens

SERVICE_ROLE = "magnetar-service"


@dataclass
class Keys:
    secret_file: Path
    key: bytes
    service_token: str
    service_token_file: Path

    @classmethod
    def make(cls, directory: Path) -> Keys:
        """A fresh HS256 secret key and a service token, written under ``directory``."""
        key = tokens.generate_secret_key()
        secret_file = directory / "secret.key"
        secret_file.write_bytes(key)
        service_token = tokens.create_token(SERVICE_ROLE, key)
        token_file = directory / "service.token"
        token_file.write_text(service_token + "\n")
        return cls(secret_file, key, service_token, token_file)

    def token(self, role: str, expires_in_s: float | None = None, now: float | None = None) -> str:
        return tokens.create_token(role, self.key, expires_in_s=expires_in_s, now=now)

    def settings(self, **more: object) -> dict[str, object]:
        """A service's settings for authentication with these keys (plus ``more``)."""
        return {
            "authentication_enabled": True, "token_secret_key_file": str(self.secret_file),
            "superuser_roles": [SERVICE_ROLE], **more,
        }
