"""A fast, seeded, plain-Python fuzz driver for the decoders (issue 20).

Hypothesis runs the decoder properties at 35-1,300 inputs/s, too slow for ``make fuzz``'s
100,000 inputs per decoder; this driver draws inputs with :class:`random.Random` (a few
microseconds each) and feeds them to the same oracles (``oracles.py``):

- random bytes (and text) of random length;
- mutations of a corpus of valid encodings built once per target with the real encoders:
  1-4 of truncation, a bit flip, an overwritten byte, inserted, appended or deleted bytes;
- random valid values, for round trips.

Each target gets ``EXAMPLES`` inputs (``MAGNETAR_FUZZ_EXAMPLES``). The bounded run (``make
test``) uses a fixed seed; a long run (``make fuzz``) a random one, printed; both are
replayed with ``MAGNETAR_FUZZ_SEED``. A failing input is reported with the seed, its
index and its repr.
"""

from __future__ import annotations

import math
import os
import random
import string
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fuzzsettings import EXAMPLES, LONG, record_result

from magnetar.bookie import cookie as cookies
from magnetar.bookie.record import Record
from magnetar.common.message_id import INT64_MAX, MessageId
from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState
from magnetar.managedledger.cursor_state import CursorDocument
from magnetar.managedledger.layout import LedgerInfo
from magnetar.managedledger.position import Position
from magnetar.proto.v1 import broker_pb2 as pb

_env_seed = os.environ.get("MAGNETAR_FUZZ_SEED")
SEED = int(_env_seed) if _env_seed else (random.SystemRandom().randrange(2**32) if LONG else 20)
"""The run's seed: ``MAGNETAR_FUZZ_SEED``, else random in a long run, else fixed."""

I64 = (-(2**63), 2**63 - 1)
U64 = (0, 2**64 - 1)
I32 = (-(2**31), 2**31 - 1)

# Text: mostly ASCII, with the characters decoders trip over (controls, NEL, line and
# paragraph separators, non-ASCII digits, a replacement char, astral ones); and now and
# then any code point but a surrogate (as hypothesis's ``st.text()``).
_ODD_CHARS = "\x00\x01\x1f\x7f\x85\xa0é中٣\u2028\u2029\ufeff\ufffd\U0001f600"
_CHARS = string.printable + _ODD_CHARS


class Gen:
    """Random inputs for one target (its own :class:`random.Random`, seeded from the run's
    seed and the target's name, so targets do not depend on each other's draws)."""

    def __init__(self, name: str, seed: int = SEED) -> None:
        self.r = random.Random(f"{seed}:{name}")
        self.random = self.r.random
        self.randrange = self.r.randrange
        self.randint = self.r.randint
        self.choice = self.r.choice
        self.randbytes = self.r.randbytes

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def size(self, max_size: int, min_size: int = 0) -> int:
        """A length, favouring short ones (half the time at most an eighth of the maximum)."""
        if self.r.random() < 0.5:
            return self.r.randint(min_size, max(min_size, max_size // 8))
        return self.r.randint(min_size, max_size)

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi], favouring the bounds, small values and every magnitude."""
        x = self.r.random()
        if x < 0.15:
            v = self.r.choice((lo, hi, lo + 1, hi - 1))
        elif x < 0.3:
            v = self.r.randint(-2, 3)
        elif x < 0.6:
            v = self.r.getrandbits(self.r.randint(0, max(hi.bit_length(), (-lo).bit_length())))
            if lo < 0 and self.r.random() < 0.5:
                v = -v
        else:
            return self.r.randint(lo, hi)
        return min(max(v, lo), hi)

    def raw(self, max_size: int, min_size: int = 0) -> bytes:
        return self.r.randbytes(self.size(max_size, min_size))

    def text(self, max_size: int, alphabet: str | None = None, min_size: int = 0) -> str:
        n = self.size(max_size, min_size)
        if alphabet is None and self.r.random() < 0.1:
            return "".join(_any_char(self.r) for _ in range(n))
        return "".join(self.r.choices(alphabet or _CHARS, k=n))

    def mutate(self, data: bytes) -> bytes:
        """1-4 of: truncation, a bit flip, appended or inserted garbage, a deleted slice,
        an overwritten byte (as ``test_decoders.mutated``)."""
        r = self.r
        buf = bytearray(data)
        for _ in range(r.randint(1, 4)):
            op = r.randrange(6)
            if op == 0 or not buf:
                buf += r.randbytes(r.randint(1, 64))
            elif op == 1:
                del buf[r.randrange(len(buf)) :]
            elif op == 2:
                buf[r.randrange(len(buf))] ^= 1 << r.randrange(8)
            elif op == 3:
                i = r.randint(0, len(buf))
                buf[i:i] = r.randbytes(r.randint(1, 16))
            elif op == 4:
                i = r.randrange(len(buf))
                del buf[i : i + r.randint(1, 16)]
            else:
                buf[r.randrange(len(buf))] = r.randrange(256)
        return bytes(buf)

    def mutate_text(self, text: str) -> str:
        return self.mutate(text.encode()).decode("utf-8", "replace")

    def pick_mutated(self, corpus: Sequence[bytes]) -> bytes:
        return self.mutate(self.r.choice(corpus))

    # -- JSON -------------------------------------------------------------------------------
    def json_scalar(self, big_ints: int = 70, infinity: bool = True, nan: bool = False) -> Any:
        k = self.r.randrange(5)
        if k == 0:
            return None
        if k == 1:
            return self.r.random() < 0.5
        if k == 2:
            return self.integer(-(2**big_ints), 2**big_ints)
        if k == 3:
            return self.floating(infinity, nan)
        return self.text(8)

    def floating(self, infinity: bool = True, nan: bool = False) -> float:
        x = self.r.random()
        if x < 0.3:
            specials = [0.0, -0.0, 1.5, -1.0, 1e308, -1e308, 5e-324, 2.0**63, 2.0**64]
            if infinity:
                specials += [math.inf, -math.inf]
            if nan:
                specials.append(math.nan)
            return self.r.choice(specials)
        if x < 0.6:
            return float(self.integer(-(2**70), 2**70))
        return self.r.uniform(-1e6, 1e6) * 10.0 ** self.r.randint(-20, 20)

    def json_value(self, max_leaves: int = 16, infinity: bool = True, key_size: int = 8) -> Any:
        """A JSON value: scalars, lists and objects of up to ``max_leaves`` scalars."""
        budget = [max_leaves]

        def value(depth: int) -> Any:
            if budget[0] <= 0 or depth > 4 or self.r.random() < 0.55:
                budget[0] -= 1
                return self.json_scalar(infinity=infinity)
            if self.r.random() < 0.5:
                return [value(depth + 1) for _ in range(self.r.randint(0, 4))]
            return {self.text(key_size): value(depth + 1) for _ in range(self.r.randint(0, 4))}

        return value(0)

    def json_document(self, max_size: int = 5, infinity: bool = True) -> dict[str, Any]:
        return {self.text(8): self.json_value(infinity=infinity) for _ in range(self.r.randint(0, max_size))}

    def hostile_json(self) -> bytes:
        """Inputs that broke JSON decoders before: deep nesting, huge numbers, NaN and the like."""
        k = self.r.randrange(6)
        if k == 0:
            return self.r.choice((b"[", b"{\"a\":")) * self.r.randint(500, 3000)
        if k == 1:
            return b'{"a":' + b"1" * self.r.randint(4000, 6000) + b"}"
        if k == 2:
            return self.r.choice((b'{"a":NaN}', b'{"a":Infinity}', b'{"a":-Infinity}', b'{"a":1e400}', b'{"a":-1e400}'))
        if k == 3:
            return b'{"a":"\\ud800"}'  # a lone surrogate
        if k == 4:
            return b"\xef\xbb\xbf{}"  # a UTF-8 BOM
        return b'{"a":1,"a":2}'

    # -- values of the project's types ------------------------------------------------------
    def message_id(self) -> MessageId:
        return MessageId(
            ledger_id=self.integer(-1, INT64_MAX), entry_id=self.integer(-1, INT64_MAX), partition=self.integer(-1, 2**31 - 1), batch_index=self.integer(-1, 2**31 - 1),
        )

    def record(self, max_payload: int = 300) -> Record:
        return Record(self.integer(*U64), self.integer(*I64), self.integer(*I64), self.raw(max_payload))

    def position(self, lo_entry: int = -1) -> Position:
        return Position(self.integer(0, 2**63 - 1), self.integer(lo_entry, 2**63 - 1))

    def single_message(self) -> pb.SingleMessage:
        return pb.SingleMessage(
            payload=self.raw(200),
            properties={self.text(10): self.text(10) for _ in range(self.randint(0, 3))},
            partition_key=self.text(10),
            sequence_id=self.integer(0, 2**63 - 1),
            event_time_ms=self.integer(0, 2**63 - 1),
        )

    def entry_batch(self) -> pb.EntryBatch:
        return pb.EntryBatch(
            producer_name=self.text(10),
            publish_time_ms=self.integer(*I64),
            batched=self.chance(0.5),
            messages=[
                pb.SingleMessage(payload=self.raw(50), sequence_id=self.integer(*U64), deliver_at_ms=self.integer(*I64))
                for _ in range(self.randint(0, 4))
            ],
        )

    def cookie(self) -> cookies.Cookie:
        return cookies.Cookie(
            bookie_id=self.text(30, min_size=1),
            data_dir=self.text(30, min_size=1),
            journal_dir=self.text(30, min_size=1),
            instance_id="".join(self.r.choices("0123456789abcdef", k=32)),
            layout_version=self.randint(0, 10),
            created=self.text(30),
        )

    def cursor_document(self) -> CursorDocument:
        def n(k: int) -> int:
            return self.randint(0, k) if self.chance(0.7) else 0

        batch_acks = []
        for _ in range(n(6)):
            size = self.randint(1, 200)
            batch_acks.append((self.position(), size, self.r.getrandbits(size)))
        return CursorDocument(
            mark_delete=self.position(),
            ranges=[(self.position(), self.position()) for _ in range(n(6))],
            batch_acks=batch_acks,
            redelivery_counts=[(self.position(), self.integer(0, 2**40)) for _ in range(n(6))],
            properties={self.text(8): self.json_value() for _ in range(n(3))},
            read_position=self.position() if self.chance(0.5) else None,
        )

    def ledger_info(self) -> LedgerInfo:
        return LedgerInfo(
            self.integer(0, 2**63 - 1), self.integer(0, 2**40), self.integer(0, 2**40), self.integer(0, 2**42), self.integer(0, 2**42),
        )

    def ledger_metadata(self) -> LedgerMetadata:
        e = self.randint(1, 5)
        qw = self.randint(1, e)
        qa = self.randint(1, qw)
        firsts = sorted({self.integer(1, 2**40) for _ in range(self.randint(0, 3))})
        return LedgerMetadata(
            ensemble_size=e, write_quorum=qw, ack_quorum=qa,
            fragments=tuple(Fragment(f, tuple(self.text(12, min_size=1) for _ in range(e))) for f in [0, *firsts]),
            state=self.choice(list(LedgerState)), last_entry_id=self.integer(-1, 2**62),
            length=self.integer(0, 2**62), ctime_ms=self.integer(0, 2**42),
            properties={self.text(8): self.text(8) for _ in range(self.randint(0, 3))},
            writer=self.text(12),
        )


def _any_char(r: random.Random) -> str:
    while True:
        c = r.randrange(0x110000)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


REPORTS: list[str] = []
"""A line per target run: inputs, rate and seed (``test_decoders_fast`` shows them in a long run)."""

Input = tuple[Callable[..., object], tuple[Any, ...]]
"""An oracle and the arguments to call it with."""


def run(name: str, inputs: Callable[[Gen], Input], examples: int = EXAMPLES) -> float:
    """Feed ``examples`` inputs drawn by ``inputs`` to their oracles; returns inputs/s.

    Raises:
        AssertionError: an oracle failed (or a decoder raised what it must not), with the
            seed, the input's index and the input.
    """
    gen = Gen(name)
    start = time.perf_counter()
    for i in range(examples):
        oracle, args = inputs(gen)
        try:
            oracle(*args)
        except Exception as exc:
            shown = repr(args)
            if len(shown) > 3000:
                shown = shown[:3000] + f"... ({len(shown)} chars)"
            raise AssertionError(
                f"{name}: input {i} failed {oracle.__name__}{shown} with {type(exc).__name__}: {exc}; "
                f"replay with MAGNETAR_FUZZ_SEED={SEED}"
            ) from exc
    seconds = time.perf_counter() - start
    rate = examples / max(seconds, 1e-9)
    line = f"fastfuzz {name}: {examples} inputs, {rate:,.0f}/s, seed {SEED}"
    print(line)
    REPORTS.append(line)
    record_result("decoder", name, inputs=examples, seconds=seconds, seed=SEED)
    return rate


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A temporary directory, in memory (``/dev/shm``) where there is one: the decoders
    under test read files, and an fsync on a disk would cost milliseconds per input."""
    shm = Path("/dev/shm")
    where = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="magnetar-fuzz-", dir=where) as tmp:
        yield Path(tmp)
