"""Publish an HF export folder to the Hugging Face Hub (``medvqa-build push``).

The token comes from ``HF_TOKEN`` or the user's ``hf auth login``; it is never printed or
logged. The large files (Parquet shards, plots) are uploaded first, in batches of at most
``max_commit_mb``, without committing (``preupload_lfs_files``); then one commit adds every
file, README.md included. Until that commit nothing is visible in the repository, so a push
that fails half-way never leaves a release that ``load_dataset`` would read as complete. Each
batch and the commit are retried on server and network errors. Every failure becomes one
:class:`~medvqa_build.errors.MedvqaError` line.

Before anything is sent, the licence gate (:mod:`.licence_gate`) refuses pixels of a source
whose owners do not allow redistribution, and the repository is created private unless
``private=False``. Xet transfers are turned off (``HF_HUB_DISABLE_XET``): the push then goes
through the HTTP calls that ``timeout_s`` bounds and the retries cover (docs/publishing.md).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MedvqaError, UsageError
from ..licences import SourceTerms
from .annotations_only import annotations_only_export
from .licence_gate import check_licences

log = logging.getLogger(__name__)
WARNING_MARK = "this build failed validation"
# the oldest huggingface_hub with ``set_client_factory``/``hf_request_event_hook``, which
# ``_use_timeout`` installs (0.x sends through requests and has neither); the push tests pass
# on 1.0.0, 1.33.0 and 2.x (docs/publishing.md)
HUB_FLOOR = (1, 0, 0)


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
    private: bool = True
    unchanged: int = 0  # files the Hub already had (same oid): neither uploaded nor committed
    withheld: list[str] = field(default_factory=list)  # sources pushed without their pixels


def installed_hub_version() -> str | None:
    try:
        return importlib.metadata.version("huggingface_hub")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_hub_version() -> None:
    """One error line, before anything of ``huggingface_hub`` is imported, when it is missing
    or older than :data:`HUB_FLOOR`."""
    installed = installed_hub_version()
    floor = ".".join(map(str, HUB_FLOOR))
    parts = tuple(int(n) for n in re.findall(r"\d+", installed or "")[:3])
    if installed is None or parts < HUB_FLOOR:
        raise UsageError(
            f"push needs huggingface_hub>={floor}; "
            + ("it is not installed" if installed is None else f"{installed} is installed"),
            fix=f"pip install 'huggingface_hub>={floor}'",
        )


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
    """The first line of the error, and what the server said (one line, at most 300 chars)."""
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    server = " ".join((getattr(exc, "server_message", None) or "").split())
    if server and server not in text:
        text = f"{text} ({server})"
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
    if isinstance(exc, ValueError) and str(exc).startswith("Invalid metadata in README.md"):
        # huggingface_hub's own validate-yaml call, before anything is committed
        problems = "; ".join(line.lstrip("- ") for line in str(exc).splitlines()[1:])
        return HubError(
            f"the Hub rejected the card's metadata for {repo_id}: {problems[:300]}",
            fix="fix the YAML header of README.md (docs/publishing.md, Card metadata)",
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
    accepts the connection and never answers); a timed-out call is retried like a 5xx.

    The client is built with the HTTP library the installed huggingface_hub itself uses
    (httpx2 from 2.0 on, httpx in 1.x)."""
    from huggingface_hub.utils import _http, set_client_factory

    lib = getattr(_http, "httpx2", None) or _http.httpx

    def factory():
        return lib.Client(
            event_hooks={"request": [_http.hf_request_event_hook]},
            follow_redirects=True,
            timeout=lib.Timeout(timeout_s, connect=min(30.0, timeout_s)),
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
    private: bool = True,
    revision: str | None = None,
    create_pr: bool = False,
    max_commit_mb: float = 2000,
    retries: int = 3,
    backoff_s: float = 1.0,
    force: bool = False,
    message: str = "Upload benchmark built with medvqa_build",
    timeout_s: float = 300.0,
    progress: bool = True,
    annotations_only: bool = False,
    permitted: tuple[str, ...] = (),
    terms: Mapping[str, SourceTerms],
) -> PushResult:
    """Create ``repo_id`` (a dataset repo, private unless ``private=False``) if needed and
    upload the export folder to it.

    ``terms``: the terms of the build's sources as it recorded them (``BuildDir.source_terms``).
    A source whose terms say ``redistribution: not-allowed`` stops the push unless it is
    in ``permitted`` or ``annotations_only`` is set: then its items go up with source-relative
    image references instead of pixels, with the script that rebuilds them. ``timeout_s``
    bounds every HTTP call (one upload batch must finish within it)."""
    check_hub_version()
    if "/" not in repo_id or repo_id.count("/") != 1:
        raise UsageError(
            f"repo id {repo_id!r} is not NAMESPACE/NAME", fix="e.g. my-org/my-benchmark"
        )
    folder = find_export(path, force)
    gate = check_licences(folder, terms, permitted, annotations_only)
    options = dict(
        private=private,
        revision=revision,
        create_pr=create_pr,
        max_commit_mb=max_commit_mb,
        retries=retries,
        backoff_s=backoff_s,
        message=message,
        timeout_s=timeout_s,
        progress=progress,
    )
    if not gate.blocked:
        return _push_folder(folder, repo_id, **options)
    with tempfile.TemporaryDirectory(prefix="medvqa-annotations-") as tmp:
        out = annotations_only_export(folder, gate, Path(tmp) / "hf")
        result = _push_folder(out, repo_id, **options)
    result.withheld = list(gate.blocked)
    return result


def _push_folder(
    folder,
    repo_id,
    *,
    private,
    revision,
    create_pr,
    max_commit_mb,
    retries,
    backoff_s,
    message,
    timeout_s,
    progress,
) -> PushResult:
    # Xet uploads bypass the HTTP client ``_use_timeout`` bounds and the batches the retries
    # cover: off, for this process (the constant is read at import; a prior import is patched)
    os.environ["HF_HUB_DISABLE_XET"] = "1"
    from huggingface_hub import HfApi, constants
    from huggingface_hub.utils import disable_progress_bars

    constants.HF_HUB_DISABLE_XET = True

    if not progress:
        disable_progress_bars()

    _use_timeout(timeout_s)
    api = HfApi(token=_token())
    batches = _batches(folder, max_commit_mb * 1e6)
    result = PushResult(repo_id, "", revision or "main", files=sum(len(b) for b in batches))
    result.private = private

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
    # the Hub answers each file's oid: a file it has with the same content is skipped
    result.unchanged = sum(
        1 for op in all_ops if op._remote_oid is not None and op._remote_oid == op._local_oid
    )
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
    if result.unchanged < result.files:  # else the client made no commit (nothing changed)
        result.commits.append(info.oid)
    if create_pr:
        result.pr_url = info.pr_url
    return result
