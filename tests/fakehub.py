"""A fake Hugging Face Hub on 127.0.0.1 for tests: the endpoints huggingface_hub 2.x calls for
auth_check, repo_info, list_repo_tree, hf_hub_download and snapshot_download (model repos, and
dataset repos kept in `repos` as "datasets/OWNER/NAME"), with the Hub's
error headers (X-Error-Code: RepoNotFound, GatedRepo, EntryNotFound). Point HF_ENDPOINT at `url`.

Also: small GGUF files with a byte-level vocabulary, written with the gguf package.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional
from urllib.parse import unquote, urlsplit

import numpy as np


@dataclass
class Repo:
    files: dict[str, bytes]
    gated: bool = False
    sha: str = "0123456789abcdef0123456789abcdef01234567"
    sizes: dict[str, int] = field(default_factory=dict)  # sizes to claim in listings (default: real)


class FakeHub:
    def __init__(self, token: str = "hf_goodtoken"):
        self.repos: dict[str, Repo] = {}
        self.token = token
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def gets(self, suffix: str) -> int:
        """How many GET requests downloaded a file whose path ends with `suffix`."""
        return sum(1 for m, p in self.requests if m == "GET" and "/resolve/" in p and p.endswith(suffix))

    # ------------------------------------------------------------ routing

    def _handle(self, h: BaseHTTPRequestHandler, head: bool):
        path = unquote(urlsplit(h.path).path)
        self.requests.append(("HEAD" if head else "GET", path))
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] and len(parts) >= 5:  # a dataset repo is kept as "datasets/OWNER/NAME"
            return self._api(h, "datasets/" + "/".join(parts[2:4]), parts[4], parts[5:])
        if parts[:2] == ["api", "models"] and len(parts) >= 5:
            repo_id, action, rest = "/".join(parts[2:4]), parts[4], parts[5:]
            return self._api(h, repo_id, action, rest)
        if parts[:1] == ["datasets"] and len(parts) >= 6 and parts[3] == "resolve":
            return self._resolve(h, "/".join(parts[:3]), "/".join(parts[5:]), head)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, "/".join(parts[:2]), "/".join(parts[4:]), head)
        return self._send(h, 404, b"not found", {"X-Error-Code": "RepoNotFound"})

    def _authorized(self, h, repo: Repo) -> bool:
        return not repo.gated or h.headers.get("Authorization") == f"Bearer {self.token}"

    def _api(self, h, repo_id: str, action: str, rest: list[str]):
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._send(h, 401, b"Repository not found", {"X-Error-Code": "RepoNotFound"})
        if action == "auth-check":
            if not self._authorized(h, repo):
                return self._send(h, 403, b"gated", {"X-Error-Code": "GatedRepo"})
            return self._json(h, {})
        if action == "revision":
            return self._json(h, {"id": repo_id, "sha": repo.sha, "siblings": [{"rfilename": n} for n in repo.files]})
        if action == "tree":
            return self._json(h, [
                {"type": "file", "path": n, "size": repo.sizes.get(n, len(b)), "oid": hashlib.sha1(b).hexdigest()}
                for n, b in sorted(repo.files.items())
            ])
        return self._send(h, 404, b"no such endpoint", {})

    def _resolve(self, h, repo_id: str, filename: str, head: bool):
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._send(h, 401, b"Repository not found", {"X-Error-Code": "RepoNotFound"})
        if not self._authorized(h, repo):
            return self._send(h, 401, b"gated", {"X-Error-Code": "GatedRepo"}, head)
        body = repo.files.get(filename)
        headers = {"X-Repo-Commit": repo.sha}
        if body is None:
            return self._send(h, 404, b"Entry not found", {**headers, "X-Error-Code": "EntryNotFound"}, head)
        headers["ETag"] = '"' + hashlib.sha256(body).hexdigest() + '"'
        start = 0
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start = int(rng[6:].split("-")[0])
            headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
        return self._send(h, 206 if start else 200, body[start:], headers, head)

    def _json(self, h, obj):
        return self._send(h, 200, json.dumps(obj).encode(), {"Content-Type": "application/json"})

    @staticmethod
    def _send(h, status: int, body: bytes, headers: dict, head: bool = False):
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)


def folder_files(folder: Path) -> dict[str, bytes]:
    """A model folder's top-level files as a repo's contents."""
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}


def write_gguf(path: Path, n_layers: int = 2, hidden: int = 64, heads: int = 4, kv: int = 2, ff: int = 128,
               extra_rows: int = 0, eos: Optional[int] = 256) -> Path:
    """A small Llama-architecture GGUF whose vocabulary is the tiny pairs' (256 bytes + <|endoftext|>),
    optionally padded with `extra_rows` unused tokens (a padded embedding). Weights are zeros."""
    import gguf

    from spec_harness.models.tiny import EOS, bytes_to_unicode

    tokens = [bytes_to_unicode()[b] for b in range(256)] + [EOS] + [f"[PAD{i}]" for i in range(extra_rows)]
    types = [gguf.TokenType.NORMAL] * 256 + [gguf.TokenType.CONTROL] + [gguf.TokenType.UNUSED] * extra_rows
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(n_layers)
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_context_length(1024)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    w.add_bos_token_id(256)
    if eos is not None:
        w.add_eos_token_id(eos)
    vocab = len(tokens)
    kvd = kv * hidden // heads
    w.add_tensor("token_embd.weight", np.zeros((vocab, hidden), np.float32))
    for i in range(n_layers):
        for name, shape in {"attn_q": (hidden, hidden), "attn_k": (kvd, hidden), "attn_v": (kvd, hidden),
                            "attn_output": (hidden, hidden), "ffn_gate": (ff, hidden), "ffn_up": (ff, hidden),
                            "ffn_down": (hidden, ff)}.items():
            w.add_tensor(f"blk.{i}.{name}.weight", np.zeros(shape, np.float32))
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, np.float32))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.add_tensor("output.weight", np.zeros((vocab, hidden), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
