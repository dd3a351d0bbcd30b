"""The blocking and asyncio clients take the same options, with the same defaults, which
come from one place (``client/options.py``), under pulsar-client's names."""

from __future__ import annotations

import inspect

import pytest

import magnetar
import magnetar.asyncio as ma
from magnetar.client.options import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS

# pulsar-client (Python, 3.x) parameter names of Client.create_producer / subscribe /
# create_reader, beyond the first positional ones.
PULSAR = {
    "create_producer": {
        "producer_name", "schema", "initial_sequence_id", "send_timeout_millis", "compression_type",
        "max_pending_messages", "max_pending_messages_across_partitions", "block_if_queue_full",
        "batching_enabled", "batching_max_messages", "batching_max_allowed_size_in_bytes",
        "batching_max_publish_delay_ms", "chunking_enabled", "message_routing_mode",
        "lazy_start_partitioned_producers", "properties", "batching_type", "encryption_key",
        "crypto_key_reader", "access_mode",
    },
    "subscribe": {
        "consumer_type", "schema", "message_listener", "receiver_queue_size",
        "max_total_receiver_queue_size_across_partitions", "consumer_name", "unacked_messages_timeout_ms",
        "broker_consumer_stats_cache_time_ms", "negative_ack_redelivery_delay_ms", "is_read_compacted",
        "properties", "pattern_auto_discovery_period", "initial_position", "crypto_key_reader",
        "replicate_subscription_state_enabled", "max_pending_chunked_message",
        "auto_ack_oldest_chunked_message_on_queue_full", "start_message_id_inclusive", "batch_receive_policy",
        "key_shared_policy", "batch_index_ack_enabled", "regex_subscription_mode", "dead_letter_policy",
        "is_pattern_topic",  # pulsar.asyncio.Client.subscribe's (a str pattern)
    },
    "create_reader": {
        "schema", "reader_listener", "receiver_queue_size", "reader_name", "subscription_role_prefix",
        "is_read_compacted", "crypto_key_reader", "start_message_id_inclusive",
    },
}
# Ours, documented where they are taken: Pulsar's Java names (priorityLevel, enableRetry),
# the older Python client's hashing_scheme, and Magnetar's own; Java's autoUpdatePartitions
# and autoUpdatePartitionsInterval (the C++-based Python client has one client-wide
# partitionsUpdateInterval instead); the C++ client's expireTimeOfIncompleteChunkedMessageMs
# (its Python wrapper does not take it); Java's subscriptionProperties and
# negativeAckRedeliveryBackoff (pulsar-client 3.x's Python wrapper has neither).
EXTRAS = {
    "hashing_scheme", "max_message_size", "priority_level", "enable_retry", "retry_delay_levels",
    "auto_update_partitions", "auto_update_partitions_interval_seconds", "expire_time_of_incomplete_chunked_message_ms",
    "subscription_properties", "negative_ack_redelivery_backoff",
}
POSITIONAL = {"self", "topic", "subscription_name", "start_message_id"}


def _options(cls: type, method: str) -> dict[str, object]:
    params = inspect.signature(getattr(cls, method)).parameters
    return {n: p.default for n, p in params.items() if n not in POSITIONAL}


@pytest.mark.parametrize("method", sorted(PULSAR))
def test_blocking_and_asyncio_clients_take_the_same_options_and_defaults(method: str) -> None:
    assert _options(magnetar.Client, method) == _options(ma.Client, method)


@pytest.mark.parametrize("method", sorted(PULSAR))
def test_options_are_named_as_pulsar_names_them(method: str) -> None:
    unknown = set(_options(ma.Client, method)) - PULSAR[method] - EXTRAS
    assert not unknown, f"{method}: options pulsar-client does not have: {unknown}"


@pytest.mark.parametrize(("method", "defaults"), [
    ("create_producer", PRODUCER_DEFAULTS), ("subscribe", CONSUMER_DEFAULTS), ("create_reader", CONSUMER_DEFAULTS),
])
def test_signature_defaults_are_the_option_objects_defaults(method: str, defaults: object) -> None:
    shared = {n: d for n, d in _options(ma.Client, method).items() if hasattr(defaults, n)}
    assert shared  # the test compares something
    for name, default in shared.items():
        if default is not None:
            assert default == getattr(defaults, name), name


def test_both_clients_export_the_same_names() -> None:
    from magnetar.client import aio, sync

    assert sorted(sync.__all__) == sorted(aio.__all__)
    assert sorted(magnetar.__all__) == sorted(ma.__all__)
    for name in magnetar.__all__:
        assert getattr(magnetar, name) is not None and getattr(ma, name) is not None


# pulsar-client's Client(...) options (Python, 3.x), after service_url.
PULSAR_CLIENT = {
    "authentication", "operation_timeout_seconds", "io_threads", "message_listener_threads",
    "concurrent_lookup_requests", "log_conf_file_path", "use_tls", "tls_trust_certs_file_path",
    "tls_allow_insecure_connection", "tls_validate_hostname", "logger", "connection_timeout_ms", "listener_name",
    "tls_private_key_file_path", "tls_certificate_file_path",
}
TLS_OPTIONS = {n for n in PULSAR_CLIENT if "tls" in n}


def _client_options(cls: type) -> dict[str, object]:
    params = inspect.signature(cls.__init__).parameters
    return {n: p.default for n, p in params.items() if n not in {"self", "service_url"}}


def test_both_clients_take_the_same_connection_options_named_as_pulsar_names_them() -> None:
    assert _client_options(magnetar.Client) == _client_options(ma.Client)
    assert set(_client_options(ma.Client)) <= PULSAR_CLIENT
    assert TLS_OPTIONS <= set(_client_options(ma.Client))
