"""Packed string lists and the visual samplers' packed fit refs read back what went in."""

import pytest

from medvqa_build.records import Sample
from medvqa_build.stages.generate import _FitRef, _FitRefs
from medvqa_build.store.packed import PackedStrings


def test_packed_strings_round_trip():
    packed = PackedStrings()
    texts = ["", "a", "polyp/ü", "x" * 300, ""]
    assert [packed.append(t) for t in texts] == [0, 1, 2, 3, 4]
    assert [packed[i] for i in range(len(packed))] == texts
    assert packed[-2] == "x" * 300
    assert len(packed.data) == sum(len(t.encode()) for t in texts)


def test_fit_refs_read_back_each_sample():
    refs = _FitRefs()
    samples = [
        Sample("kvasir:a/1.jpg", "kvasir", "a/1.jpg", 8, 8, modality="endoscopy", group_id="P1"),
        Sample("spine:b/2.png", "spine", "b/2.png", 8, 8, modality="x-ray"),
        Sample("kvasir:a/3.jpg", "kvasir", "a/3.jpg", 8, 8, modality="endoscopy", group_id="P2"),
    ]
    for s in samples:
        refs.append(s)
    assert len(refs) == 3
    assert list(refs) == [_FitRef(s.sample_id, s.source, s.modality, s.group_id) for s in samples]
    assert refs[-1].group_id == "P2" and refs[1].group_id == ""
    assert refs.names == ["kvasir", "endoscopy", "spine", "x-ray"]  # each name stored once
    with pytest.raises(IndexError):
        refs[3]


def test_sample_ids_json_matches_json_dumps(tmp_path):
    import json

    from medvqa_build.stages.embed import _write_json_list

    ids = [f'src:img "{i}" é\\{i}.png' for i in range(2500)]
    packed = PackedStrings()
    for i in ids:
        packed.append(i)
    assert list(packed) == ids
    _write_json_list(tmp_path / "ids.json", packed)
    assert (tmp_path / "ids.json").read_text() == json.dumps(ids) + "\n"
    _write_json_list(tmp_path / "empty.json", PackedStrings())
    assert (tmp_path / "empty.json").read_text() == "[]\n"


def test_sorted_strings_find_the_first_original_index():
    from medvqa_build.store.packed import SortedStrings

    ids = SortedStrings(["s:b", "s:a", "s:ü", "s:a"])
    assert [ids.index(t) for t in ("s:a", "s:b", "s:ü", "s:c", 3)] == [1, 0, 2, None, None]
    assert list(ids) == ["s:b", "s:a", "s:ü", "s:a"] and len(ids) == 4
    assert SortedStrings([]).index("x") is None and list(SortedStrings([])) == []


def test_packed_strings_extend_arrow_equals_extend():
    import pyarrow as pa

    texts = ["", "a", "polyp/ü", "x" * 300, "", "s:b"]
    whole = pa.array(texts)
    cases = [
        whole,
        whole.slice(2, 3),  # an offset into the buffers
        whole.take(pa.array([5, 0, 3])),
        whole.cast(pa.large_string()).slice(1),
        pa.array(["", ""]),  # no data buffer to copy
        pa.array([], pa.string()),
    ]
    for arr in cases:
        packed, expected = PackedStrings(), PackedStrings()
        packed.append("first")
        expected.append("first")
        packed.extend_arrow(arr)
        expected.extend(arr.to_pylist())
        assert (packed.data, packed.ends) == (expected.data, expected.ends)
    with pytest.raises(ValueError):
        PackedStrings().extend_arrow(pa.array(["a", None]))


def test_fit_refs_extend_arrow_equals_extend():
    import pyarrow as pa

    ids = ["k:1", "s:2", "k:3", "s:4"]
    sources = ["kvasir", "spine", "kvasir", "spine"]
    modalities = ["endoscopy", "x-ray", "endoscopy", "ct"]
    groups = ["P1", "", "P2", ""]
    by_lists, by_arrow = _FitRefs(), _FitRefs()
    for refs in (by_lists, by_arrow):
        refs.add("x:0", "spine", "mri", None)  # names known before
    by_lists.extend(ids, sources, modalities, groups)
    by_arrow.extend_arrow(*(pa.array(x) for x in (ids, sources, modalities, groups)))
    assert list(by_arrow) == list(by_lists)
    names = ["spine", "mri", "kvasir", "endoscopy", "x-ray", "ct"]
    assert by_arrow.names == by_lists.names == names
    assert (by_arrow.sources, by_arrow.modalities) == (by_lists.sources, by_lists.modalities)


def test_sorted_strings_of_packed_equals_sorted_strings_of_the_texts():
    import numpy as np

    from medvqa_build.store.packed import SortedStrings

    texts = ["s:b", "s:a", "", "s:ü", "s:a", "s:longer-id/42"]
    packed = PackedStrings()
    packed.extend(texts)
    for index in ([5, 0, 1, 3, 4, 2], [1, 3], [4, 0, 4], []):
        expected = SortedStrings([texts[i] for i in index])
        for chunk in (1, 2, 65536):
            got = SortedStrings.of_packed(packed, np.array(index, np.int64), chunk=chunk)
            assert got.keys.dtype == expected.keys.dtype
            assert got.keys.tolist() == expected.keys.tolist()
            assert got.order.tolist() == expected.order.tolist()
