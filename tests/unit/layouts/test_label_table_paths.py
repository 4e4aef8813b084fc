"""label_table's listed paths: the text join of a plain file name is pathlib's join."""

from pathlib import Path

import pytest

from medvqa_build.layouts.label_table import path_joiner

FOLDERS = ["", ".", "images", "images/", "./images", "a//b", "a/./b", "/", "//", "/abs/dir", ".."]
NAMES = [
    "img_00001.jpg",
    "img 1 (copy).jpg",
    "ü-naïve.png",
    "..",
    "...",
    ".hidden",
    "",
    ".",
    "sub/x.jpg",
    "/etc/passwd",
    "./x.jpg",
    "x.jpg/",
    "a\\b.jpg",
    "C:x.jpg",
    "x\x00y",
]


@pytest.mark.parametrize("folder", FOLDERS)
def test_join_is_pathlib_join(folder):
    join = path_joiner(folder)
    for name in NAMES:
        assert join(name) == (Path(folder) / name).as_posix(), (folder, name)


def test_plain_names_take_the_text_path():
    join = path_joiner("images")
    assert join("img_00001.jpg") == "images/img_00001.jpg"
    assert path_joiner("")("x.jpg") == "x.jpg"
    assert path_joiner("/")("x.jpg") == "/x.jpg"
