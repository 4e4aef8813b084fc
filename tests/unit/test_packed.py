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
