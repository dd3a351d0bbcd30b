"""Magnetar: persistent publish/subscribe messaging built like Apache Pulsar and BookKeeper."""

__version__ = "0.1.0"
