"""The ``magnetar`` command reaches its code: pyproject's console script (what the images'
ENTRYPOINT, the chart and docker-compose run) and each command of ``magnetar.tools.cli``
name functions that exist, so moving a module without its entry fails here, not in a pod."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

from magnetar.tools import cli

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _entry(target: str, default: str) -> object:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function or default)


def test_the_console_scripts_name_functions_that_exist() -> None:
    scripts = tomllib.loads(PYPROJECT.read_text())["project"]["scripts"]
    assert "magnetar" in scripts
    for name, target in scripts.items():
        assert callable(_entry(target, "main")), f"console script {name} = {target}"


def test_every_command_names_a_main_that_exists() -> None:
    assert {"standalone", "broker", "bookie", "auditor", "gateway", "admin", "produce", "consume",
            "tokens", "health", "shell"} <= set(cli.COMMANDS)
    for name, (target, _) in cli.COMMANDS.items():
        assert callable(_entry(target, "main")), f"magnetar {name} -> {target}"
