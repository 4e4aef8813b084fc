"""A recipe naming CLIP weights the machine does not have fails at once, in one line."""

import time

from medvqa_build.cli import main

SMALL = ["--set", "sources.0.generate.n_images=10", "--set", "sources.0.generate.n_videos=0"]


def test_missing_pretrained_weights_is_one_clear_line(tmp_path, repo, capsys):
    start = time.monotonic()
    code = main(
        [
            "run",
            str(repo / "recipes" / "demo.yaml"),
            "-o",
            str(tmp_path),
            "-q",
            *SMALL,
            "--set",
            "embedder=open_clip:ViT-B-32/openai",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "ViT-B-32" in err and "checkpoint" in err and "Traceback" not in err
    assert time.monotonic() - start < 45  # no minute of hub retries (HF_HUB_OFFLINE=1 in tests)


def test_missing_local_checkpoint_is_one_clear_line(tmp_path, repo, capsys):
    missing = tmp_path / "nope.safetensors"
    code = main(
        [
            "run",
            str(repo / "recipes" / "demo.yaml"),
            "-o",
            str(tmp_path / "o"),
            "-q",
            *SMALL,
            "--set",
            f"embedder=open_clip:ViT-B-32/{missing}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and str(missing) in err and err.count("\n") == 1, err
