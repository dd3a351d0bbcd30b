"""Chunked messages diverted to the DLQ (pure: which entries make one whole move).

The dispatcher diverts entries one at a time, and a chunked message is an entry per
chunk. A move of a chunked message must copy every chunk, in order, or nothing: a
partial copy would be a partial message. :class:`ChunkGathering` holds the diverted
chunks by their message's uuid until chunks 0..n-1 are all there, and then hands out the
whole message (:class:`GatheredChunks`).

Which entries make the message, as a reassembling consumer picks them
(``client/chunks.py``): the latest first chunk (a producer's resend after a reconnect
starts again from chunk 0), then each next chunk the first one stored after it. The
other diverted chunks of the same uuid (copies of a resend) are acknowledged with the
message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from magnetar.managedledger.position import Position


@dataclass(frozen=True)
class GatheredChunks:
    """A chunked message whose chunks were all diverted."""

    uuid: str
    chain: tuple[Position, ...]
    """Chunk 0..n-1, in order: what the move copies."""
    extra: tuple[Position, ...] = ()
    """Other diverted entries of the message (a resend's copies): acknowledged with it."""

    @property
    def positions(self) -> tuple[Position, ...]:
        return self.chain + self.extra


@dataclass
class _Open:
    num_chunks: int
    seen: dict[int, set[Position]] = field(default_factory=dict)

    def positions(self) -> list[Position]:
        return sorted(p for ps in self.seen.values() for p in ps)


class ChunkGathering:
    """The diverted chunks of the messages not yet whole, by uuid."""

    def __init__(self) -> None:
        self._open: dict[str, _Open] = {}

    def __contains__(self, uuid: str) -> bool:
        return uuid in self._open

    def add(self, position: Position, uuid: str, chunk_id: int, num_chunks: int) -> GatheredChunks | None:
        """Hold diverted chunk ``chunk_id`` of ``num_chunks`` of message ``uuid``, stored
        at ``position``; the whole message once its chunks are all held (and forgotten
        here), else None.

        A chunk that says another number of chunks than those held before it starts the
        message again (as a consumer would drop what it had): the earlier ones are kept
        only to be acknowledged with it."""
        held = self._open.get(uuid)
        if held is None or held.num_chunks != num_chunks:
            earlier = held.positions() if held is not None else []
            held = self._open[uuid] = _Open(num_chunks)
            if earlier:
                held.seen[-1] = set(earlier)
        held.seen.setdefault(chunk_id, set()).add(position)
        chain = _chain(held)
        if chain is None:
            return None
        del self._open[uuid]
        extra = tuple(p for p in held.positions() if p not in set(chain))
        return GatheredChunks(uuid, chain, extra)

    def drop(self, uuid: str) -> list[Position]:
        """Forget message ``uuid`` (it did not become whole in time); its held positions."""
        held = self._open.pop(uuid, None)
        return held.positions() if held is not None else []


def _chain(held: _Open) -> tuple[Position, ...] | None:
    """Chunk 0..n-1 in order as a consumer reassembles them, or None when not all there."""
    firsts = held.seen.get(0)
    if not firsts:
        return None
    chain = [max(firsts)]
    for chunk_id in range(1, held.num_chunks):
        after = [p for p in held.seen.get(chunk_id, ()) if p > chain[-1]]
        if not after:
            return None
        chain.append(min(after))
    return tuple(chain)
