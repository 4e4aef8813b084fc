import json

import pytest

from medvqa_build.cli import main
from medvqa_build.errors import UsageError
from medvqa_build.registry import Registry
from medvqa_build.sources import get_source


def test_registry_lists_known_names_on_a_miss():
    reg: Registry[int] = Registry("widget")
    reg.add("b", 2)
    reg.add("a", 1)
    assert reg.names() == ["a", "b"] and reg.get("a") == 1 and "b" in reg
    with pytest.raises(UsageError, match="unknown widget 'c'.*use one of: a, b"):
        reg.get("c")
    with pytest.raises(ValueError):
        reg.add("a", 3)


def test_unknown_source_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown source 'kvasir-segg'"):
        get_source("kvasir-segg")


def test_cli_sources_table_and_json(capsys):
    assert main(["sources"]) == 0
    table = capsys.readouterr().out
    assert "synthetic-endo" in table and "kvasir" in table and "label_table,frame_folders" in table
    assert main(["sources", "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["kvasir"]["layouts"] == ["class_folders"]
    assert rows["synthetic-endo"]["access"] == "generated"


def test_cli_unknown_source_exit_2(tmp_path, capsys):
    assert main(["convert", "nope", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown source 'nope'") and "Traceback" not in err


def test_user_manifest_folder_is_picked_up(tmp_path, monkeypatch, repo):
    from medvqa_build import sources

    text = (repo / "manifests" / "kvasir.yaml").read_text().replace("id: kvasir", "id: my-kvasir")
    (tmp_path / "my-kvasir.yaml").write_text(text)
    monkeypatch.setenv("MEDVQA_MANIFESTS", str(tmp_path))
    sources._load_all.cache_clear()
    try:
        assert get_source("my-kvasir").manifest.title.startswith("Kvasir v2")
    finally:
        monkeypatch.delenv("MEDVQA_MANIFESTS")
        sources._load_all.cache_clear()
