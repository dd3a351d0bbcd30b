"""The broker's Pulsar binary protocol door (``pulsar://``): a listener and one
connection per socket over BrokerService, speaking magnetar.protocol's frames."""
