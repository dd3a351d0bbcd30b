"""Choosing bookies for ensembles: random among the writable ones, so load spreads."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from magnetar.common.errors import NotEnoughBookies


def choose_ensemble(
    writable: Sequence[str], size: int, exclude: Collection[str] = (), rng: random.Random | None = None
) -> list[str]:
    """``size`` distinct bookies from ``writable`` minus ``exclude``.

    Raises:
        NotEnoughBookies: fewer candidates than ``size``.
    """
    candidates = sorted(set(writable) - set(exclude))
    if len(candidates) < size:
        raise NotEnoughBookies(size, len(candidates))
    return (rng or random).sample(candidates, size)


def replace_bookies(
    ensemble: Sequence[str], failed: Collection[str], writable: Sequence[str], rng: random.Random | None = None
) -> list[str]:
    """The ensemble with each failed bookie swapped for a writable one not already in it.

    Raises:
        NotEnoughBookies: not enough spare writable bookies.
    """
    failed_in = [b for b in ensemble if b in failed]
    spares = choose_ensemble(writable, len(failed_in), exclude=set(ensemble) | set(failed), rng=rng)
    swap = dict(zip(failed_in, spares, strict=True))
    return [swap.get(b, b) for b in ensemble]
