"""Shared pytest setup: the fixtures of magnetar.testing (real ZooKeeper, processes)."""

pytest_plugins = ["magnetar.testing.pytest_plugin"]
