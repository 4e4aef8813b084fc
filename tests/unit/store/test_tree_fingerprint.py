"""The convert stage's address of a download: the tree fingerprint (store/paths.py)."""

import hashlib
import json
import os

from medvqa_build.store.paths import tree_fingerprint


def _reference(root):
    """The fingerprint's definition: the hash of the JSON list of (path below root, size,
    mtime_ns) of every file, folders walked in sorted order, files sorted in each."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            st = os.stat(os.path.join(dirpath, name))
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            entries.append((rel, st.st_size, st.st_mtime_ns))
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def _tree(root):
    (root / "images" / "sub").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "labels.csv").write_text("image,finding\n")
    (root / "images" / "b.jpg").write_bytes(b"\xff\xd8bb")
    (root / "images" / "a.jpg").write_bytes(b"\xff\xd8a")
    (root / "images" / "sub" / 'ü "q".png').write_bytes(b"")
    # names json.dumps escapes: a tab, DEL, a backslash; and one that is not UTF-8
    for name in ("tab\t.png", "del\x7f.png", "back\\slash.png", "plain ~!.png"):
        (root / "images" / "sub" / name).write_bytes(b"x")
    if os.name == "posix":
        with open(os.fsencode(root / "images") + b"/\xff.png", "wb") as fh:
            fh.write(b"yy")
    return root


def test_streamed_hash_is_the_json_list_hash(tmp_path):
    root = _tree(tmp_path / "root")
    assert tree_fingerprint(root) == _reference(root)
    assert tree_fingerprint(tmp_path / "root" / "empty") == _reference(root / "empty")
    assert tree_fingerprint(root / "empty") == hashlib.sha256(b"[]").hexdigest()


def test_a_changed_size_name_or_time_changes_it(tmp_path):
    root = _tree(tmp_path / "root")
    before = tree_fingerprint(root)
    (root / "images" / "a.jpg").write_bytes(b"\xff\xd8aa")
    grown = tree_fingerprint(root)
    assert grown != before
    os.utime(root / "labels.csv", ns=(1, 1))
    touched = tree_fingerprint(root)
    assert touched != grown
    (root / "images" / "a.jpg").rename(root / "images" / "c.jpg")
    assert tree_fingerprint(root) not in (before, grown, touched)
    assert tree_fingerprint(root) == _reference(root)
