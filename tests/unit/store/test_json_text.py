"""store/json_text.py: the depth measured before parsing is the depth of the value parsed,
whatever the strings hold (property-based), and a file deeper than the limit is refused
before ``json.loads`` could recurse."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from medvqa_build.store.json_text import JsonTooDeep, json_depth, load_json


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


text = st.text(alphabet=st.sampled_from('ab[]{}"\\\n\x00é'), max_size=12)
values = st.recursive(
    st.none() | st.booleans() | st.integers() | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(values, st.booleans())
def test_depth_is_the_parsed_values(value, ascii_only):
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    assert json_depth(data) == _depth(value)


def test_deep_files_are_refused_before_parsing(monkeypatch):
    with pytest.raises(JsonTooDeep, match="nested 100,000 levels deep, over max_json_depth=64"):
        load_json(b"[" * 100_000)
    assert load_json('{"a": [[1]]}') == {"a": [[1]]}
    monkeypatch.setenv("MEDVQA_LIMITS", "max_json_depth=2")
    with pytest.raises(JsonTooDeep, match="nested 3 levels"):
        load_json('{"a": [[1]]}')
