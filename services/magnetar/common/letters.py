"""The message properties of retry letters, dead letters and replays (Pulsar's names, plus
the replay's): written by the broker's moves and the gateway's replay, read by the SDK's
``reconsume_later`` and the dead-letter tools."""

from typing import Final

REAL_TOPIC: Final = "REAL_TOPIC"
"""The topic the message was first published to."""
ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
"""The id it had there."""
RETRY_TOPIC: Final = "RETRY_TOPIC"
RECONSUMETIMES: Final = "RECONSUMETIMES"
"""Retries so far (1 on the first retry letter)."""
DELAY_TIME: Final = "DELAY_TIME"
DEAD_LETTER_REASON: Final = "DEAD_LETTER_REASON"
REPLAYED_AT: Final = "REPLAYED_AT"
"""When the gateway's replay put it back (ms since the epoch)."""
REPLAY_COUNT: Final = "REPLAY_COUNT"
