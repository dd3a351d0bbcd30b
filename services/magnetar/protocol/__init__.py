"""Pulsar's binary protocol as bytes: frames, checksums and the commands a broker sends
(no broker code; the broker's door is magnetar.broker.protocol)."""
