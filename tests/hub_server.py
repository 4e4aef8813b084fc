"""A tiny Hugging Face Hub look-alike for tests: stdlib ``ThreadingHTTPServer`` on 127.0.0.1.

It implements what ``HfApi.create_repo`` / ``create_branch`` / ``create_commit`` (preupload,
LFS batch + PUT, ndjson commit) and ``datasets.load_dataset(repo_id)`` (repo info, tree,
paths-info, resolve with ranges) use. Clients need ``HF_ENDPOINT=<url>`` in their environment
before ``huggingface_hub`` is imported.

Where the Hub is strict, so is this: ``validate-yaml`` and a commit that changes README.md
check the card's metadata as the Hub does (licence ids, task categories, size categories and
languages from huggingface_hub/datasets' own lists, configs whose ``data_files`` match files
of the commit) and answer 400 with the errors; pre-upload decides LFS or regular from size,
sample and ``.gitattributes`` and answers each file's ``oid`` (SHA-256 of an LFS file, git blob
SHA-1 of a regular one), so a client skips unchanged files. Xet is not served: a Xet token
request answers 501 and is recorded in ``xet_requests`` (push must never make one).
``fail`` injects server errors: ``{"/commit/": 3}`` answers the next 3 matching requests 500.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

_API = re.compile(r"^/api/(datasets|models|spaces)/([^/]+/[^/]+)(?:/([a-z-]+)(?:/(.*))?)?$")
_RESOLVE = re.compile(r"^/(?:datasets/|spaces/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_LFS_BATCH = re.compile(r"^/(?:datasets/|spaces/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch$")


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# the Hub's default .gitattributes of a new dataset repo: these go to LFS whatever their size
DEFAULT_LFS = ("*.parquet", "*.png", "*.jpg", "*.jpeg", "*.arrow", "*.zip", "*.gz", "*.npy")
LFS_MIN_BYTES = 10 * 2**20  # the Hub stores a larger file in LFS
_SLUG = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


def _resource(name: str) -> set[str]:
    import datasets.utils.resources as res

    data = json.loads((Path(res.__file__).parent / name).read_text())
    return set(data)


def card_errors(content: str, files: set[str] | None = None) -> list[str]:
    """What the Hub's metadata validation says of a dataset card (empty: valid). ``files``: the
    repository's files after the commit, to check that every config's data_files exist."""
    import yaml
    from datasets.utils.metadata import MetadataConfigs, known_task_ids
    from huggingface_hub import DatasetCard

    from medvqa_build.licences import HUB_LICENCES

    try:
        data = DatasetCard(content, ignore_metadata_errors=False).data.to_dict()
    except (ValueError, yaml.YAMLError) as exc:
        return [f"invalid YAML metadata: {exc}"]
    errors = []
    licences = data.get("license") or []
    for licence in [licences] if isinstance(licences, str) else licences:
        if licence not in HUB_LICENCES:
            errors.append(f'"license" must be one of the Hub licence ids, got {licence!r}')
    if licences == "other" or "other" in licences:
        name, link = data.get("license_name"), data.get("license_link")
        if not isinstance(name, str) or not _SLUG.match(name):
            errors.append('"license_name" must be a lower-case slug when "license" is other')
        if not link:
            errors.append('"license_link" is required when "license" is other')
    for key, known in (
        ("task_categories", set(known_task_ids)),
        ("size_categories", _resource("size_categories.json")),
        ("language", _resource("languages.json")),
    ):
        values = data.get(key) or []
        for value in [values] if isinstance(values, str) else values:
            if value not in known:
                errors.append(f'"{key}" has an unknown value {value!r}')
    for config in data.get("configs") or []:
        try:
            MetadataConfigs._raise_if_data_files_field_not_valid(config)
        except ValueError as exc:
            errors.append(f"config {config.get('config_name')!r}: {exc}")
            continue
        if files is None:
            continue
        specs = config.get("data_files") or []
        patterns = [specs] if isinstance(specs, str) else specs
        for spec in patterns:
            for pattern in [spec] if isinstance(spec, str) else [spec["path"]]:
                for one in [pattern] if isinstance(pattern, str) else pattern:
                    if not any(fnmatch.fnmatch(f, one) for f in files):
                        errors.append(
                            f"config {config['config_name']!r}: no file matches data_files {one!r}"
                        )
    return errors


def _lfs_patterns(gitattributes: bytes | None) -> list[str]:
    if gitattributes is None:
        return list(DEFAULT_LFS)
    return [
        line.split()[0]
        for line in gitattributes.decode().splitlines()
        if "filter=lfs" in line and line.split()
    ]


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[
            str, dict
        ] = {}  # id -> {"private", "refs": {branch: {path: blob}}, "sha": {}}
        self.lfs: dict[str, bytes] = {}
        self.commits: list[dict] = []  # {"repo", "revision", "paths", "create_pr"}
        self.fail: dict[str, int] = {}
        self.requests: list[str] = []
        self.uploads: list[str] = []  # LFS objects PUT (oids), in order
        self.xet_requests: list[str] = []
        self.validations: list[list[str]] = []  # the errors of each card validation
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def files(self, repo: str, revision: str = "main") -> dict[str, bytes]:
        return {p: b["data"] for p, b in self.repos[repo]["refs"][revision].items()}

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _send(
                self, status: int, body: bytes | dict | list = b"", headers: dict | None = None
            ):
                if not isinstance(body, bytes):
                    body = json.dumps(body).encode()
                    headers = {"Content-Type": "application/json", **(headers or {})}
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, str(v))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _injected(self) -> bool:
                with hub.lock:
                    for key, left in hub.fail.items():
                        if left > 0 and key in self.path:
                            hub.fail[key] = left - 1
                            return True
                return False

            def _route(self) -> None:
                url = urlparse(self.path)
                path, query = unquote(url.path), parse_qs(url.query)
                hub.requests.append(f"{self.command} {path}")
                body = self._body() if self.command in ("POST", "PUT") else b""
                if self._injected():
                    return self._send(500, {"error": "injected server error"})
                if path == "/api/whoami-v2":
                    return self._send(200, {"type": "user", "name": "tester", "orgs": []})
                if path == "/api/repos/create":
                    return self._create(json.loads(body))
                if path == "/api/validate-yaml":
                    spec = json.loads(body)
                    errors = card_errors(spec.get("content", ""))
                    hub.validations.append(errors)
                    if errors:
                        return self._send(
                            400, {"errors": [{"message": e} for e in errors], "warnings": []}
                        )
                    return self._send(200, {"errors": [], "warnings": []})
                if "xet-write-token" in path or "xet-read-token" in path:
                    hub.xet_requests.append(path)
                    return self._send(501, {"error": "Xet is not served by this stand-in"})
                if path.startswith("/lfs-upload/"):
                    oid = path.rsplit("/", 1)[1]
                    if hashlib.sha256(body).hexdigest() != oid:
                        return self._send(400, {"error": "sha256 does not match the oid"})
                    hub.lfs[oid] = body
                    hub.uploads.append(oid)
                    return self._send(200, {})
                if m := _LFS_BATCH.match(path):
                    return self._lfs_batch(json.loads(body))
                if m := _RESOLVE.match(path):
                    return self._resolve(m.group(1), m.group(2), m.group(3))
                if m := _API.match(path):
                    return self._api(m.group(2), m.group(3), m.group(4) or "", body, query)
                return self._send(404, {"error": f"not implemented: {path}"})

            do_GET = do_POST = do_PUT = do_HEAD = _route

            @staticmethod
            def _ref(repo: dict, rev: str) -> str:
                """A branch name, or the branch whose head is the commit ``rev``."""
                if rev in repo["refs"]:
                    return rev
                return next((r for r, sha in repo["sha"].items() if sha == rev), rev)

            def _repo(self, repo_id: str):
                repo = hub.repos.get(repo_id)
                if repo is None:
                    self._send(
                        404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
                    )
                return repo

            def _create(self, spec: dict) -> None:
                repo_id = f"{spec.get('organization') or 'tester'}/{spec['name']}"
                if repo_id in hub.repos:
                    return self._send(
                        409,
                        {
                            "error": "You already created this repo",
                            "url": f"{hub.url}/datasets/{repo_id}",
                        },
                    )
                hub.repos[repo_id] = {
                    # huggingface_hub 2.x sends "visibility", older clients "private"
                    "private": spec.get("visibility") == "private" or bool(spec.get("private")),
                    "type": spec.get("type"),
                    "refs": {"main": {}},
                    "sha": {"main": "0" * 40},
                }
                return self._send(200, {"url": f"{hub.url}/datasets/{repo_id}", "name": repo_id})

            def _lfs_batch(self, spec: dict) -> None:
                objects = []
                for obj in spec.get("objects", []):
                    entry = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
                    if obj["oid"] not in hub.lfs:
                        entry["actions"] = {
                            "upload": {"href": f"{hub.url}/lfs-upload/{obj['oid']}"}
                        }
                    objects.append(entry)
                return self._send(200, {"transfer": "basic", "objects": objects})

            def _entries(self, files: dict, paths: list[str] | None, prefix: str, recursive: bool):
                out, dirs = [], set()
                for p in sorted(files):
                    blob = files[p]
                    if paths is not None and p not in paths:
                        continue
                    if paths is None and prefix and not p.startswith(prefix + "/"):
                        continue
                    rest = p[len(prefix) + 1 :] if prefix and paths is None else p
                    if paths is None and not recursive and "/" in rest:
                        dirs.add((prefix + "/" if prefix else "") + rest.split("/", 1)[0])
                        continue
                    if paths is None and recursive:
                        parts = p.split("/")[:-1]
                        for k in range(1, len(parts) + 1):
                            d = "/".join(parts[:k])
                            if not prefix or d.startswith(prefix + "/"):
                                dirs.add(d)
                    entry = {
                        "type": "file",
                        "path": p,
                        "size": len(blob["data"]),
                        "oid": blob["oid"],
                    }
                    if blob.get("lfs"):
                        entry["lfs"] = {
                            "oid": blob["lfs"],
                            "size": len(blob["data"]),
                            "pointerSize": 130,
                        }
                    out.append(entry)
                if paths is not None:
                    dirs = {d for d in paths if any(f.startswith(d + "/") for f in files)}
                out += [
                    {"type": "directory", "path": d, "oid": _git_oid(d.encode()), "size": 0}
                    for d in sorted(dirs)
                ]
                return out

            def _api(self, repo_id: str, action: str | None, rest: str, body: bytes, query) -> None:
                repo = self._repo(repo_id)
                if repo is None:
                    return
                if action in (None, "revision"):
                    rev = self._ref(repo, rest or "main")
                    if rev not in repo["refs"]:
                        return self._send(
                            404,
                            {"error": "Revision not found"},
                            {"X-Error-Code": "RevisionNotFound"},
                        )
                    siblings = [{"rfilename": p} for p in sorted(repo["refs"][rev])]
                    return self._send(
                        200,
                        {
                            "id": repo_id,
                            "_id": repo_id,
                            "sha": repo["sha"][rev],
                            "private": repo["private"],
                            "siblings": siblings,
                            "tags": [],
                            "downloads": 0,
                            "likes": 0,
                            "disabled": False,
                            "gated": False,
                            "lastModified": "2026-01-01T00:00:00.000Z",
                        },
                    )
                if action == "branch":
                    repo["refs"].setdefault(rest, dict(repo["refs"]["main"]))
                    repo["sha"].setdefault(rest, repo["sha"]["main"])
                    return self._send(200, {})
                if action == "preupload":
                    return self._preupload(repo, rest, json.loads(body))
                if action == "commit":
                    return self._commit(repo_id, repo, rest, body, query)
                rev, _, sub = rest.partition("/")
                rev = self._ref(repo, rev)
                files = repo["refs"].get(rev)
                if files is None:
                    return self._send(
                        404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"}
                    )
                if action == "tree":
                    recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                    return self._send(200, self._entries(files, None, sub.strip("/"), recursive))
                if action == "paths-info":
                    spec = parse_qs(body.decode())
                    paths = spec.get("paths") or json.loads(body or b"{}").get("paths", [])
                    return self._send(200, self._entries(files, list(paths), "", False))
                return self._send(404, {"error": f"not implemented: {action}"})

            def _preupload(self, repo: dict, rev: str, spec: dict) -> None:
                """Upload mode from size, sample and .gitattributes; the oid of the file the
                revision already has at each path (None when it has none)."""
                files = repo["refs"].get(self._ref(repo, rev or "main"), {})
                attrs = files.get(".gitattributes", {}).get("data")
                lfs = _lfs_patterns(attrs)
                ignore = [
                    p.strip()
                    for p in (spec.get("gitIgnore") or "").splitlines()
                    if p.strip() and not p.startswith("#")
                ]
                out = []
                for f in spec["files"]:
                    sample = base64.b64decode(f.get("sample") or "")
                    big = int(f.get("size") or 0) >= LFS_MIN_BYTES
                    matched = any(fnmatch.fnmatch(Path(f["path"]).name, p) for p in lfs)
                    mode = "lfs" if big or b"\0" in sample or matched else "regular"
                    blob = files.get(f["path"])
                    oid = None if blob is None else (blob.get("lfs") or blob["oid"])
                    out.append(
                        {
                            "path": f["path"],
                            "uploadMode": mode,
                            "shouldIgnore": any(fnmatch.fnmatch(f["path"], p) for p in ignore),
                            "oid": oid,
                        }
                    )
                return self._send(200, {"files": out, "commitOid": repo["sha"]["main"]})

            def _commit(self, repo_id: str, repo: dict, rev: str, body: bytes, query) -> None:
                create_pr = query.get("create_pr", ["0"])[0] in ("1", "true")
                if create_pr:
                    number = sum(1 for r in repo["refs"] if r.startswith("refs/pr/")) + 1
                    target = f"refs/pr/{number}"
                    repo["refs"][target] = dict(repo["refs"].get(rev, {}))
                else:
                    target = rev
                if target not in repo["refs"]:
                    return self._send(
                        404, {"error": "Revision not found"}, {"X-Error-Code": "RevisionNotFound"}
                    )
                files = dict(repo["refs"][target])
                paths = []
                for line in body.decode().splitlines():
                    op = json.loads(line)
                    value = op["value"]
                    if op["key"] == "file":
                        data = base64.b64decode(value["content"])
                        files[value["path"]] = {"data": data, "oid": _git_oid(data)}
                    elif op["key"] == "lfsFile":
                        data = hub.lfs[value["oid"]]
                        files[value["path"]] = {
                            "data": data,
                            "oid": _git_oid(data),
                            "lfs": value["oid"],
                        }
                    elif op["key"] == "deletedFile":
                        files.pop(value["path"], None)
                    else:
                        continue
                    paths.append(value["path"])
                if "README.md" in paths:
                    errors = card_errors(files["README.md"]["data"].decode(), set(files))
                    hub.validations.append(errors)
                    if errors:
                        return self._send(
                            400, {"error": "Invalid metadata in README.md: " + "; ".join(errors)}
                        )
                repo["refs"][target] = files
                sha = hashlib.sha1(
                    json.dumps([len(hub.commits), target, paths]).encode()
                ).hexdigest()
                repo["sha"][target] = sha
                hub.commits.append(
                    {"repo": repo_id, "revision": target, "paths": paths, "create_pr": create_pr}
                )
                pr = (
                    f"{hub.url}/datasets/{repo_id}/discussions/{target.rsplit('/', 1)[1]}"
                    if create_pr
                    else None
                )
                return self._send(
                    200,
                    {
                        "commitUrl": f"{hub.url}/datasets/{repo_id}/commit/{sha}",
                        "commitOid": sha,
                        "pullRequestUrl": pr,
                    },
                )

            def _resolve(self, repo_id: str, rev: str, path: str) -> None:
                repo = self._repo(repo_id)
                if repo is None:
                    return
                rev = self._ref(repo, rev)
                files = repo["refs"].get(rev)
                if files is None or path not in files:
                    return self._send(
                        404, {"error": "Entry not found"}, {"X-Error-Code": "EntryNotFound"}
                    )
                blob = files[path]
                data = blob["data"]
                headers = {
                    "X-Repo-Commit": repo["sha"][rev],
                    "ETag": f'"{blob.get("lfs") or blob["oid"]}"',
                    "Accept-Ranges": "bytes",
                    "Content-Type": "application/octet-stream",
                }
                if blob.get("lfs"):
                    headers.update(
                        {"X-Linked-Etag": f'"{blob["lfs"]}"', "X-Linked-Size": len(data)}
                    )
                rng = re.match(r"bytes=(\d*)-(\d*)", self.headers.get("Range") or "")
                if rng and (rng.group(1) or rng.group(2)):
                    if rng.group(1):
                        start = int(rng.group(1))
                        end = int(rng.group(2)) if rng.group(2) else len(data) - 1
                    else:
                        start, end = max(0, len(data) - int(rng.group(2))), len(data) - 1
                    end = min(end, len(data) - 1)
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    return self._send(206, data[start : end + 1], headers)
                return self._send(200, data, headers)

        return Handler
