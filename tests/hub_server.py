"""A tiny Hugging Face Hub look-alike for tests: stdlib ``ThreadingHTTPServer`` on 127.0.0.1.

It implements what ``HfApi.create_repo`` / ``create_branch`` / ``create_commit`` (preupload,
LFS batch + PUT, ndjson commit) and ``datasets.load_dataset(repo_id)`` (repo info, tree,
paths-info, resolve with ranges) use. Clients need ``HF_ENDPOINT=<url>`` and
``HF_HUB_DISABLE_XET=1`` in their environment before ``huggingface_hub`` is imported.
``fail`` injects server errors: ``{"/commit/": 3}`` answers the next 3 matching requests 500.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

_API = re.compile(r"^/api/(datasets|models|spaces)/([^/]+/[^/]+)(?:/([a-z-]+)(?:/(.*))?)?$")
_RESOLVE = re.compile(r"^/(?:datasets/|spaces/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_LFS_BATCH = re.compile(r"^/(?:datasets/|spaces/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch$")


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[
            str, dict
        ] = {}  # id -> {"private", "refs": {branch: {path: blob}}, "sha": {}}
        self.lfs: dict[str, bytes] = {}
        self.commits: list[dict] = []  # {"repo", "revision", "paths", "create_pr"}
        self.fail: dict[str, int] = {}
        self.requests: list[str] = []
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
                    return self._send(200, {"errors": [], "warnings": []})
                if path.startswith("/lfs-upload/"):
                    hub.lfs[path.rsplit("/", 1)[1]] = body
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
                    "private": bool(spec.get("private")),
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
                    files = json.loads(body)["files"]
                    mode = [
                        {
                            "path": f["path"],
                            "shouldIgnore": False,
                            "uploadMode": "regular" if f["path"].endswith(".md") else "lfs",
                        }
                        for f in files
                    ]
                    return self._send(200, {"files": mode, "commitOid": repo["sha"]["main"]})
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
                files = repo["refs"][target]
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
