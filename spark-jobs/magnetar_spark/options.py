"""The data source's options (names as the Pulsar Spark connector's where it has one),
parsed once into a typed, picklable object."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

SERVICE_URL = "service.url"
ADMIN_URL = "admin.url"
TOPIC, TOPICS = "topic", "topics"
STARTING, ENDING = "startingOffsets", "endingOffsets"
AUTH_TOKEN = "auth.token"
START_AT_SUBSCRIPTION = "startAtSubscription"
"""Start each partition after this subscription's mark-delete position (what it acked)."""
INCLUDE_ENTRY_SIZE = "includeEntrySize"
"""Add an ``entry_size`` column: messages in the stored entry (1 unless batched)."""
INCLUDE_CHUNK_IDS = "includeChunkIds"
"""Add a ``chunk_message_ids`` column: a chunked message's every entry (null otherwise)."""
POLL_TIMEOUT_MS = "pollTimeoutMs"
MAX_ENTRIES_PER_TRIGGER = "maxEntriesPerTrigger"
READER_REOPEN_AFTER = "readerReopenAfter"
"""Messages one SDK reader reads before the slice reopens one after the last entry read
(default 40,000: the broker stops dispatching to a consumer holding 50,000 unacked)."""
PRODUCER_NAME = "producer.name"
"""Writer: the producer name prefix of rows without a ``producer_name`` column."""
ACK_SUBSCRIPTION = "ack.subscription"
"""Writer: acknowledge each row's ``ack_topic``/``ack_message_id`` on this subscription
once its publish is confirmed."""
FAIL_AFTER = "test.failTaskAfter"
"""Writer, for tests: the first attempt of a task raises after this many confirmed sends
(only when the file named by ``test.failOnceMarker`` does not exist yet; it is created)."""
FAIL_MARKER = "test.failOnceMarker"


class OptionError(ValueError):
    """A missing or malformed option (the message says which and why)."""


@dataclass(frozen=True)
class SourceOptions:
    service_url: str
    admin_url: str
    topics: tuple[str, ...]
    starting: str
    ending: str
    token: str | None
    start_at_subscription: str | None
    include_entry_size: bool
    poll_timeout_ms: int
    max_entries_per_trigger: int | None
    reader_reopen_after: int = 40_000
    include_chunk_ids: bool = False

    @classmethod
    def parse(cls, options: Mapping[str, str], *, need_topics: bool = True) -> SourceOptions:
        """Raises OptionError for a missing or malformed option."""
        get = _getter(options)
        service_url = get(SERVICE_URL)
        if not service_url:
            raise OptionError(f"option {SERVICE_URL!r} is required (magnetar://host:6660)")
        admin_url = get(ADMIN_URL) or ""
        topics: tuple[str, ...] = ()
        if get(TOPIC) and get(TOPICS):
            raise OptionError(f"give either {TOPIC!r} or {TOPICS!r}, not both")
        raw = get(TOPIC) or get(TOPICS) or ""
        topics = tuple(dict.fromkeys(t.strip() for t in raw.split(",") if t.strip()))
        if need_topics:
            if not topics:
                raise OptionError(f"option {TOPIC!r} (or {TOPICS!r}, a comma list) is required")
            if not admin_url:
                raise OptionError(f"option {ADMIN_URL!r} (the gateway, http://host:8080) is required to read")
        starting, ending = get(STARTING) or "earliest", get(ENDING) or "latest"
        for name, value in ((STARTING, starting), (ENDING, ending)):
            _check_offsets(name, value)
        max_entries = get(MAX_ENTRIES_PER_TRIGGER)
        return cls(
            service_url=service_url, admin_url=admin_url.rstrip("/"), topics=topics, starting=starting,
            ending=ending, token=get(AUTH_TOKEN) or None, start_at_subscription=get(START_AT_SUBSCRIPTION) or None,
            include_entry_size=(get(INCLUDE_ENTRY_SIZE) or "false").lower() == "true",
            poll_timeout_ms=_int(POLL_TIMEOUT_MS, get(POLL_TIMEOUT_MS) or "120000"),
            max_entries_per_trigger=_int(MAX_ENTRIES_PER_TRIGGER, max_entries) if max_entries else None,
            reader_reopen_after=_int(READER_REOPEN_AFTER, get(READER_REOPEN_AFTER) or "40000"),
            include_chunk_ids=(get(INCLUDE_CHUNK_IDS) or "false").lower() == "true",
        )


def _getter(options: Mapping[str, str]):  # type: ignore[no-untyped-def]
    lowered = {str(k).lower(): v for k, v in options.items()}

    def get(name: str) -> str | None:
        value = lowered.get(name.lower())
        return None if value is None else str(value)

    return get


def _int(name: str, value: str) -> int:
    try:
        out = int(value)
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {value!r}") from None
    if out < 1:
        raise OptionError(f"option {name!r} must be at least 1, not {out}")
    return out


def _check_offsets(name: str, value: str) -> None:
    from magnetar.common.errors import InvalidArgument
    from magnetar.common.message_id import MessageId

    if value in ("earliest", "latest"):
        return
    try:
        if value.lstrip().startswith("{"):
            parsed = json.loads(value)
            if not isinstance(parsed, dict):
                raise ValueError("not a JSON object")
            for ids in parsed.values():
                if isinstance(ids, dict):
                    for mid in ids.values():
                        MessageId.parse(str(mid))
                else:
                    MessageId.parse(str(ids))
        else:
            MessageId.parse(value)
    except (ValueError, InvalidArgument) as exc:
        raise OptionError(
            f"option {name!r}: {value!r} is not earliest, latest, a message id (ledger:entry[:partition[:batch]]) "
            f"or a JSON object of message ids per topic ({exc})"
        ) from None


def offset_for(spec: str, topic: str, partition: int) -> str:
    """The start or end position ``spec`` gives one partition: "earliest", "latest" or a
    message id string. A JSON spec maps a topic to an id, or to ``{"<partition>": id}``;
    a topic it does not name gets "earliest" as start and "latest" as end (the caller
    decides which by passing ``default`` through :func:`resolve`)."""
    if not spec.lstrip().startswith("{"):
        return spec
    parsed = json.loads(spec)
    value = parsed.get(topic)
    if isinstance(value, dict):
        value = value.get(str(partition))
    return "" if value is None else str(value)
