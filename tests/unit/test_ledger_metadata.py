import random

import pytest

from magnetar.common.errors import InvalidArgument, NotEnoughBookies
from magnetar.ledger.framing import frame, unframe
from magnetar.ledger.metadata import Fragment, LedgerMetadata, LedgerState, write_set
from magnetar.ledger.placement import choose_ensemble, replace_bookies

B = ("b1", "b2", "b3", "b4")


def test_striping_matches_the_seed_example():
    assert write_set(B, 3, 0) == ["b1", "b2", "b3"]
    assert write_set(B, 3, 1) == ["b2", "b3", "b4"]
    assert write_set(B, 3, 2) == ["b3", "b4", "b1"]
    assert write_set(B, 3, 3) == ["b4", "b1", "b2"]
    assert write_set(B, 3, 4) == ["b1", "b2", "b3"]


@pytest.mark.parametrize("quorums", [(2, 3, 2), (3, 2, 3), (3, 2, 0), (0, 0, 0)])
def test_bad_quorums_are_refused(quorums):
    with pytest.raises(InvalidArgument, match="ensemble size >= write quorum >= ack quorum >= 1"):
        LedgerMetadata(*quorums, fragments=(Fragment(0, ("a",) * quorums[0]),))


def test_fragments_pick_the_ensemble_of_each_entry():
    m = LedgerMetadata(3, 2, 2, fragments=(Fragment(0, ("a", "b", "c")),))
    m = m.with_fragment(10, ("a", "x", "c")).with_fragment(25, ("y", "x", "c"))
    assert m.write_set(9) == ["a", "b"]
    assert m.write_set(10) == ["x", "c"]  # 10 % 3 = 1: positions 1 and 2
    assert m.write_set(25) == ["x", "c"]
    assert m.write_set(27) == ["y", "x"]
    assert m.current_ensemble == ("y", "x", "c")
    assert m.bookies() == {"a", "b", "c", "x", "y"}
    # A new fragment at an entry some fragment already starts at replaces it.
    assert [f.first_entry for f in m.with_fragment(10, ("z", "x", "c")).fragments] == [0, 10]


def test_json_round_trip_and_the_shell_shape():
    m = LedgerMetadata(3, 2, 2, fragments=(Fragment(0, ("a", "b", "c")),), properties={"topic": "t"})
    m = m.with_fragment(5, ("a", "d", "c")).closed(41, 4200)
    doc = m.to_dict()
    assert doc["state"] == "CLOSED" and doc["last_entry_id"] == 41 and doc["length"] == 4200
    assert doc["fragments"] == [{"first_entry": 0, "bookies": ["a", "b", "c"]}, {"first_entry": 5, "bookies": ["a", "d", "c"]}]
    assert LedgerMetadata.from_dict(doc) == m
    assert LedgerMetadata.from_dict(doc).state is LedgerState.CLOSED


@pytest.mark.parametrize("doc", [{}, {"ensemble_size": "x"}, {"ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1,
                                                                "state": "WEIRD", "last_entry_id": -1, "length": 0, "fragments": []}])
def test_corrupt_metadata_is_reported(doc):
    with pytest.raises(InvalidArgument, match="ledger metadata"):
        LedgerMetadata.from_dict(doc)


def test_ensembles_spread_and_replacements_avoid_the_ensemble():
    rng = random.Random(1)
    bookies = [f"b{i}" for i in range(6)]
    seen = {tuple(sorted(choose_ensemble(bookies, 3, rng=rng))) for _ in range(50)}
    assert len(seen) > 5  # not always the same bookies
    with pytest.raises(NotEnoughBookies, match="needed 4, found 3"):
        choose_ensemble(bookies[:3], 4)
    new = replace_bookies(["b0", "b1", "b2"], {"b1"}, bookies, rng=rng)
    assert new[0] == "b0" and new[2] == "b2" and new[1] not in {"b0", "b1", "b2"}
    with pytest.raises(NotEnoughBookies):
        replace_bookies(["b0", "b1", "b2"], {"b1"}, ["b0", "b1", "b2"])


def test_entry_framing():
    assert unframe(frame(1234, b"abc")) == (1234, b"abc")
    with pytest.raises(Exception, match="no header"):
        unframe(b"abc")
