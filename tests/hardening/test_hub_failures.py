"""Hub failures against the local Hub look-alike (tests/hub_server.py): the server fails
mid-upload, answers a gateway timeout, and rejects the token. The push retries with
exponential backoff, ends in one clear error line, never prints the token, and makes the
release visible in one final commit (data uploaded before it is not part of the repository),
so an unfinished push leaves nothing ``load_dataset`` could read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from medvqa_build.cli import main

from ..conftest import REPO
from ..hub_server import FakeHub

SMALL = [
    "--set",
    "sources.0.generate.n_images=30",
    "--set",
    "sources.0.generate.n_videos=1",
    "--set",
    "sources.0.generate.frames_per_video=8",
    "--set",
    "quota_scale=0.2",
    "--set",
    "export.formats=[hf]",
]
TOKEN = "hf_secret_token_8812"
PUSH = """
    import medvqa_build.export.hub
    sleeps = []
    medvqa_build.export.hub.time.sleep = sleeps.append
    from medvqa_build.cli import main
    rc = main(["push", {dir!r}, "me/demo", "-q", "--max-commit-mb", "0.05", "--timeout", "2",
               *{extra!r}])
    print("RC", rc, "SLEEPS", sleeps)
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    out = tmp_path_factory.mktemp("hubbuild")
    assert main(["run", str(REPO / "recipes" / "demo.yaml"), "-o", str(out), "-q", *SMALL]) == 0
    return out


def _push(hub: FakeHub, build, home, token: str = TOKEN, extra=()) -> subprocess.CompletedProcess:
    # no HF_HUB_DISABLE_XET here: push turns Xet off itself (hf_xet is installed)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        {
            "HF_ENDPOINT": hub.url,
            "HF_TOKEN": token,
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        }
    )
    code = textwrap.dedent(PUSH.format(dir=str(build), extra=list(extra)))
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _misbehave(hub: FakeHub, rule) -> None:
    """Route every request through ``rule(handler) -> (status, body) | None`` first."""
    base = hub.server.RequestHandlerClass

    class Handler(base):
        def _route(self):
            answer = rule(self)
            if answer is None:
                return base._route(self)
            if self.command in ("POST", "PUT"):
                self._body()
            return self._send(*answer)

        do_GET = do_POST = do_PUT = do_HEAD = _route

    hub.server.RequestHandlerClass = Handler


def _errors(p) -> list[str]:
    return [line for line in p.stderr.splitlines() if line.startswith("error:")]


def test_rejected_token_is_one_clear_line(build, tmp_path):
    with FakeHub() as hub:
        _misbehave(
            hub,
            lambda h: (
                (401, {"error": "Invalid credentials in Authorization header"})
                if h.path.startswith("/api/")
                else None
            ),
        )
        p = _push(hub, build, tmp_path)
    assert "RC 2" in p.stdout and "Traceback" not in p.stderr, p.stderr[-2000:]
    errors = _errors(p)
    assert len(errors) == 1 and "refused the token" in errors[0], p.stderr
    assert "SLEEPS []" in p.stdout  # a refused token is not retried
    assert TOKEN not in p.stdout + p.stderr and not hub.commits


def test_mid_upload_failures_are_retried_with_backoff(build, tmp_path):
    """The connection drops on LFS uploads and the gateway times out on the commit: retried,
    waits double each time, and the release ends complete in one commit."""
    state = {"lfs": 2, "timeouts": 2}

    def rule(h):
        if h.path.startswith("/lfs-upload/") and state["lfs"] > 0:
            state["lfs"] -= 1
            return 500, {"error": "upload interrupted"}
        if "/commit/" in h.path and state["timeouts"] > 0:
            state["timeouts"] -= 1
            time.sleep(0.2)
            return 504, {"error": "Gateway Timeout"}
        return None

    with FakeHub() as hub:
        _misbehave(hub, rule)
        p = _push(hub, build, tmp_path)
        files = hub.files("me/demo")
    assert "RC 0" in p.stdout, p.stderr[-2000:]
    sleeps = eval(p.stdout.split("SLEEPS", 1)[1])  # noqa: S307 - our own printed list
    assert sleeps and all(b == 2 * a for a, b in zip(sleeps, sleeps[1:], strict=False) if b > a), (
        sleeps
    )
    assert len(hub.commits) == 1 and "README.md" in hub.commits[0]["paths"]
    local = {
        p.relative_to(build / "hf").as_posix(): p.read_bytes()
        for p in (build / "hf").rglob("*")
        if p.is_file()
    }
    assert files == local
    assert TOKEN not in p.stdout + p.stderr


def test_persistent_failure_never_uploads_the_card(build, tmp_path):
    """A push whose commit keeps failing stops with one line naming the attempts, and
    nothing (card or data) becomes part of the repository."""
    with FakeHub() as hub:
        _misbehave(hub, lambda h: (500, {"error": "down"}) if "/commit/" in h.path else None)
        p = _push(hub, build, tmp_path)
        files = hub.files("me/demo")
    assert "RC 2" in p.stdout and "Traceback" not in p.stderr
    errors = _errors(p)
    assert len(errors) == 1 and "HTTP 500" in errors[0] and "after 4 attempts" in errors[0]
    assert "README.md" not in files and not hub.commits
    assert TOKEN not in p.stdout + p.stderr


def test_unfinished_push_leaves_no_loadable_data(build, tmp_path):
    """Batches uploaded before a failure are blobs, not files: no data/ to auto-detect."""
    with FakeHub() as hub:
        _misbehave(hub, lambda h: (500, {"error": "down"}) if "/commit/" in h.path else None)
        _push(hub, build, tmp_path)
        files = hub.files("me/demo")
    visible = [f for f in files if not any(part.startswith((".", "__")) for part in f.split("/"))]
    assert not visible, visible


def test_a_server_that_never_answers_times_out_and_is_retried(build, tmp_path):
    """A commit the server accepts and never answers (here: answers after the client's 2 s
    timeout) is abandoned, retried, and the push completes."""
    state = {"hangs": 1}

    def rule(h):
        if "/commit/" in h.path and state["hangs"] > 0:
            state["hangs"] -= 1
            time.sleep(4)
            return 500, {"error": "too late"}
        return None

    with FakeHub() as hub:
        _misbehave(hub, rule)
        p = _push(hub, build, tmp_path)
    assert "RC 0" in p.stdout, p.stderr[-2000:]
    assert "retry 1/3" in p.stderr and len(hub.commits) == 1


def test_second_push_of_an_unchanged_build_uploads_nothing(build, tmp_path):
    """The stand-in answers pre-upload with each file's oid: the second push of the same
    build uploads no LFS object and makes no commit; no Xet request is ever made."""
    with FakeHub() as hub:
        first = _push(hub, build, tmp_path)
        uploaded, commits = list(hub.uploads), len(hub.commits)
        second = _push(hub, build, tmp_path)
        assert hub.uploads == uploaded and len(hub.commits) == commits == 1
        assert not hub.xet_requests
        files = hub.files("me/demo")
    assert "RC 0" in first.stdout and "RC 0" in second.stdout, second.stderr[-2000:]
    n = len(files)
    assert uploaded and f"({n} unchanged, not uploaded)" in second.stdout, second.stdout
    assert "(0 unchanged" in first.stdout and "in 0 commit(s)" in second.stdout


def test_the_card_is_validated_as_the_hub_does(build, tmp_path):
    """Every push has its card checked (valid here); a card whose licence is no Hub id or
    whose config points at no file is refused with one line, and nothing is committed."""
    with FakeHub() as hub:
        assert "RC 0" in _push(hub, build, tmp_path).stdout
        assert hub.validations and all(v == [] for v in hub.validations)
        assert hub.repos["me/demo"]["private"] is True  # private unless --public
    bad = tmp_path / "bad"
    shutil.copytree(build / "hf", bad / "hf")
    card = (bad / "hf" / "README.md").read_text(encoding="utf-8")
    (bad / "hf" / "README.md").write_text(
        card.replace("license: cc0-1.0", "license: CC0 1.0", 1), encoding="utf-8"
    )
    with FakeHub() as hub:
        p = _push(hub, bad / "hf", tmp_path)
        assert not hub.commits
    assert "RC 2" in p.stdout and "Traceback" not in p.stderr
    errors = _errors(p)
    assert len(errors) == 1 and "license" in errors[0], p.stderr[-2000:]
    (bad / "hf" / "README.md").write_text(
        card.replace("path: data/all/test-*", "path: data/default/test-*"), encoding="utf-8"
    )
    with FakeHub() as hub:
        p = _push(hub, bad / "hf", tmp_path)
        assert not hub.commits
    errors = _errors(p)
    assert len(errors) == 1 and "data/default/test-*" in errors[0], p.stderr[-2000:]


def test_public_only_when_asked(build, tmp_path):
    with FakeHub() as hub:
        p = _push(hub, build, tmp_path, extra=["--public"])
        assert hub.repos["me/demo"]["private"] is False
    assert "RC 0" in p.stdout and ", public" in p.stdout
