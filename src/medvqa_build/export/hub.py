"""Publish an HF export folder to the Hugging Face Hub (``medvqa-build push``).

The token comes from ``HF_TOKEN`` or the user's ``hf auth login``; it is never printed or
logged. The large files (Parquet shards, plots) are uploaded first, in batches of at most
``max_commit_mb``, without committing (``preupload_lfs_files``); then one commit adds every
file, README.md included. Until that commit nothing is visible in the repository, so a push
that fails half-way never leaves a release that ``load_dataset`` would read as complete. Each
batch and the commit are retried on server and network errors. Every failure becomes one
:class:`~medvqa_build.errors.MedvqaError` line.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MedvqaError, UsageError

log = logging.getLogger(__name__)
WARNING_MARK = "this build failed validation"


class HubError(MedvqaError):
    """The Hub refused or could not be reached."""


@dataclass
class PushResult:
    repo_id: str
    url: str
    revision: str
    commits: list[str] = field(default_factory=list)
    files: int = 0
    pr_url: str | None = None


def find_export(path: str | Path, force: bool = False) -> Path:
    """The HF export folder of ``path`` (a build directory or the ``hf/`` folder itself).

    A build that failed validation is refused unless ``force``; a forced export is allowed
    because its card says so.
    """
    path = Path(path)
    folder = path / "hf" if (path / "build.json").is_file() else path
    if not (folder / "README.md").is_file() or not (folder / "data").is_dir():
        raise UsageError(
            "not an HF export (no README.md and data/)",
            where=str(folder),
            fix="pass a build directory or its hf/ folder (export format 'hf')",
        )
    report = folder.parent / "report.json"
    if (folder.parent / "build.json").is_file() and report.is_file():
        failed = json.loads(report.read_text()).get("validation", {}).get("failed")
        card = (folder / "README.md").read_text(encoding="utf-8")
        if failed and WARNING_MARK not in card and not force:
            raise MedvqaError(
                "this build failed validation; not pushed",
                where=str(report),
                fix="fix the build, or pass --force",
            )
    return folder


def _token() -> str:
    from huggingface_hub import get_token

    token = get_token()  # HF_TOKEN first, then the stored login
    if not token:
        raise UsageError("no Hugging Face token", fix="set HF_TOKEN or run `hf auth login`")
    return token


def _batches(folder: Path, max_bytes: float) -> list[list[Path]]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    data = [p for p in files if p.name != "README.md"]
    batches: list[list[Path]] = [[]]
    size = 0
    for p in data:
        n = p.stat().st_size
        if batches[-1] and size + n > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(p)
        size += n
    readme = folder / "README.md"
    if readme.is_file():
        batches[-1].append(readme)
    return [b for b in batches if b]


def _describe(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return text[:300]


def _classify(exc: Exception, repo_id: str) -> MedvqaError:
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"revision not found on {repo_id}", fix="check --revision")
    if isinstance(exc, RepositoryNotFoundError | GatedRepoError):
        return HubError(
            f"repository {repo_id} not found or not writable with this token",
            fix="check REPO_ID and that the token has write access",
        )
    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status in (401, 403):
            return HubError(
                f"the Hub refused the token for {repo_id} (HTTP {status})",
                fix="use a token with write access (HF_TOKEN or `hf auth login`)",
            )
        return HubError(
            f"the Hub answered HTTP {status} for {repo_id}: {_describe(exc)}",
            fix="retry later; nothing partial is left except finished commits",
        )
    return HubError(
        f"cannot reach the Hub for {repo_id} ({exc.__class__.__name__}: {_describe(exc)})",
        fix="check the network and HF_ENDPOINT, then retry",
    )


def _retryable(exc: Exception) -> bool:
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(exc, HfHubHTTPError):
        status = getattr(getattr(exc, "response", None), "status_code", None)
        return status is None or status >= 500 or status == 429
    return (
        isinstance(exc, OSError | ConnectionError | TimeoutError) or "httpx" in type(exc).__module__
    )


def _use_timeout(timeout_s: float) -> None:
    """Give huggingface_hub's HTTP client a timeout (its default waits forever on a server that
    accepts the connection and never answers); a timed-out call is retried like a 5xx."""
    import httpx2
    from huggingface_hub.utils import _http, set_client_factory

    def factory():
        return httpx2.Client(
            event_hooks={"request": [_http.hf_request_event_hook]},
            follow_redirects=True,
            timeout=httpx2.Timeout(timeout_s, connect=min(30.0, timeout_s)),
        )

    set_client_factory(factory)


def _attempt(what: str, fn, repo_id: str, retries: int, backoff_s: float):
    """``fn()``, retried with exponential backoff on what a retry can fix; any other client
    error becomes one :class:`HubError` line."""
    for k in range(retries + 1):
        try:
            return fn()
        except MedvqaError:
            raise
        except Exception as exc:  # noqa: BLE001 - every client error becomes one line
            if k < retries and _retryable(exc):
                log.warning(
                    "%s failed (%s); retry %d/%d", what, exc.__class__.__name__, k + 1, retries
                )
                time.sleep(backoff_s * 2**k)
                continue
            err = _classify(exc, repo_id)
            if k:
                err = HubError(f"{err.what} (after {k + 1} attempts at {what})", fix=err.fix)
            raise err from None


def _preupload(api, attempt, folder: Path, batches, repo_id, revision, create_pr) -> list:
    """Upload the files' content batch by batch (nothing is visible before the commit)."""
    from huggingface_hub import CommitOperationAdd

    all_ops = []
    for n, batch in enumerate(batches, start=1):
        ops = [
            CommitOperationAdd(
                path_in_repo=p.relative_to(folder).as_posix(), path_or_fileobj=str(p)
            )
            for p in batch
        ]
        attempt(
            f"upload {n}/{len(batches)}",
            lambda ops=ops: api.preupload_lfs_files(
                repo_id,
                additions=ops,
                repo_type="dataset",
                revision=revision,
                create_pr=create_pr,
            ),
        )
        all_ops += ops
    return all_ops


def push(
    path: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
    max_commit_mb: float = 2000,
    retries: int = 3,
    backoff_s: float = 1.0,
    force: bool = False,
    message: str = "Upload benchmark built with medvqa_build",
    timeout_s: float = 300.0,
    progress: bool = True,
) -> PushResult:
    """Create ``repo_id`` (a dataset repo) if needed and upload the export folder to it.

    ``timeout_s`` bounds every HTTP call (one upload batch must finish within it)."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import disable_progress_bars

    if not progress:
        disable_progress_bars()

    _use_timeout(timeout_s)
    folder = find_export(path, force)
    if "/" not in repo_id or repo_id.count("/") != 1:
        raise UsageError(
            f"repo id {repo_id!r} is not NAMESPACE/NAME", fix="e.g. my-org/my-benchmark"
        )
    api = HfApi(token=_token())
    batches = _batches(folder, max_commit_mb * 1e6)
    result = PushResult(repo_id, "", revision or "main", files=sum(len(b) for b in batches))

    def attempt(what: str, fn):
        return _attempt(what, fn, repo_id, retries, backoff_s)

    url = attempt(
        "create_repo",
        lambda: api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True),
    )
    result.url = str(url)
    if revision and revision != "main" and not create_pr:
        attempt(
            "create_branch",
            lambda: api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True),
        )
    all_ops = _preupload(api, attempt, folder, batches, repo_id, revision, create_pr)
    info = attempt(
        "commit",
        lambda: api.create_commit(
            repo_id,
            all_ops,
            commit_message=message,
            repo_type="dataset",
            revision=revision,
            create_pr=create_pr,
        ),
    )
    result.commits.append(info.oid)
    if create_pr:
        result.pr_url = info.pr_url
    return result
