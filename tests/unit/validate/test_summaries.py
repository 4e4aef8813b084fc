"""The build rules' compact summaries agree with the plain dict/set bookkeeping they replace."""

import random
from array import array
from collections import Counter, defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from medvqa_build.validate.summaries import IdLog, SplitTracker, duplicated


def test_id_log_round_trips_ids_and_shares_the_slot_of_the_last_item():
    log = IdLog()
    a, b = SimpleNamespace(item_id="a1"), SimpleNamespace(item_id="ünïcode-β")
    assert log.position(a) == 0
    assert log.position(a) == 0  # the next rule fed the same item
    assert log.position(b) == 1
    assert log.position(a) == 2  # a new occurrence
    assert [log[i] for i in range(len(log))] == ["a1", "ünïcode-β", "a1"]


def test_duplicated_finds_every_repeated_value_and_groups_them():
    hashes = array("q", [5, -3, 7, 5, 9, -3, 5])
    at, group = duplicated(hashes)
    pairs = sorted(zip(at.tolist(), group.tolist(), strict=True))
    assert [i for i, _ in pairs] == [0, 1, 3, 5, 6]
    by_group = defaultdict(set)
    for i, g in pairs:
        by_group[g].add(hashes[i])
    assert sorted(map(sorted, by_group.values())) == [[-3], [5]]
    assert duplicated(array("q", [1, 2, 3]))[0].size == 0
    assert duplicated(array("q"))[0].size == 0


@pytest.mark.parametrize("flush", [1, 7, 4096])
def test_split_tracker_reports_exactly_the_keys_in_several_splits(monkeypatch, flush):
    monkeypatch.setattr(SplitTracker, "FLUSH", flush)
    rng = random.Random(flush)
    tracker = SplitTracker()
    expected: dict[tuple, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for position in range(3000):
        for _ in range(rng.randint(1, 3)):
            key = ("image", f"source://s/{rng.randrange(400)}.png")
            # most keys stay in one split; a leak can show up long after the key was first seen
            split = "test" if int(key[1][11:-4]) % 5 == 0 else "train"
            if rng.random() < 0.002:
                split = rng.choice(["val", "test", "train"])
            tracker.add(key, split, position)
            expected[key][split].append(position)
    leaks = {key: per_split for key, per_split in tracker.leaks()}
    want = {k: v for k, v in expected.items() if len(v) > 1}
    assert want, "the random data plants some leaks"
    assert set(leaks) == set(want)
    for key, per_split in want.items():
        got = leaks[key]
        assert set(got) == set(per_split)
        for split, positions in per_split.items():
            n, at = got[split]
            assert n == len(positions)
            assert at.tolist() == sorted(set(positions))


def test_split_tracker_keeps_key_text_only_for_leaking_keys(monkeypatch):
    monkeypatch.setattr(SplitTracker, "FLUSH", 16)
    tracker = SplitTracker()
    for i in range(1000):
        tracker.add(("group", f"g{i}"), "train", i)
    tracker.add(("group", "g3"), "test", 1000)  # seen in train 997 records earlier
    assert [key for key, _ in tracker.leaks()] == [("group", "g3")]
    assert len(tracker.texts) == 1  # no text held for the 999 keys in one split
    assert len(tracker._pending) == 0
    counts = Counter({s: n for s, (n, _) in tracker.leaks()[0][1].items()})
    assert counts == {"train": 1, "test": 1}


def test_split_tracker_refuses_a_65th_split_name():
    tracker = SplitTracker()
    for i in range(64):
        tracker.add(("group", "g"), f"s{i}", i)
    with pytest.raises(ValueError, match="at most 64 split names"):
        tracker.add(("group", "g"), "one-more", 64)
    assert np.array(tracker.leaks()[0][1]["s63"][1]).tolist() == [63]
