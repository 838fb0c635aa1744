"""Hub presets on disk: which files of a preset are in the local Hugging Face cache, and the
PairSpec of local paths a run uses. Never downloads; `hub_reachable` only opens a TCP connection.

The cache is the one huggingface_hub uses (HF_HUB_CACHE, else HF_HOME/hub), read with its own
scan_cache_dir. A GGUF quantization counts as cached when all of its files (every shard of a split
file) are in one snapshot; an HF model when a snapshot holds config.json, a tokenizer and every
weight file (all shards named by an index file). Revisions are tried newest first, the one `main`
points to before all others, so a file downloaded before the repo moved on is still found.

What it does not do: name the presets (models/presets.py), download (models/download.py), or check
tokenizers (models/compat.py).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse

from spec_harness.core.config import PairSpec
from spec_harness.core.errors import HarnessError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


# ---------------------------------------------------------------- the local cache


def cache_dir() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


@dataclass(frozen=True)
class CachedFile:
    path: Path
    size: int


class CacheIndex:
    """One scan of the Hugging Face cache: repo id -> its revisions, each {repo path: CachedFile}."""

    def __init__(self, root: Optional[Path] = None):
        from huggingface_hub import CacheNotFound, scan_cache_dir

        self.root = Path(root) if root else cache_dir()
        self._repos: dict[str, list[dict[str, CachedFile]]] = {}
        try:
            info = scan_cache_dir(self.root)
        except CacheNotFound:
            return
        for repo in info.repos:
            if repo.repo_type != "model":
                continue
            revs = sorted(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified), reverse=True)
            self._repos[repo.repo_id] = [
                {f.file_path.relative_to(r.snapshot_path).as_posix(): CachedFile(f.file_path, f.size_on_disk) for f in r.files}
                for r in revs
            ]

    def revisions(self, repo: Optional[str]) -> list[dict[str, CachedFile]]:
        return self._repos.get(repo, []) if repo else []

    def gguf_quants(self, model) -> dict[str, list[CachedFile]]:
        """Quantizations of a preset side's GGUF repo (a models.presets.HubModel) complete in some
        revision -> their files (newest revision wins)."""
        out: dict[str, list[CachedFile]] = {}
        for files in self.revisions(model.gguf):
            for q, names in model.quant_files(files).items():
                out.setdefault(q, [files[n] for n in names])
        return out

    def hf_snapshot(self, repo: Optional[str]) -> Optional[tuple[Path, int]]:
        """(snapshot folder, bytes) of the newest complete HF snapshot of a repo, or None."""
        for files in self.revisions(repo):
            if hf_complete(files):
                folder = files["config.json"].path.parent
                return folder, sum(f.size for name, f in files.items() if "/" not in name)
        return None


def weight_files(names) -> list[str]:
    """The weight files a model folder loads: safetensors when present, else PyTorch .bin."""
    top = [n for n in names if "/" not in n]
    for suffix in (".safetensors", ".bin"):
        found = sorted(n for n in top if n.endswith(suffix) and not n.startswith(("training_args", "optimizer")))
        if found:
            return found
    return []


def hf_complete(files: dict[str, CachedFile]) -> bool:
    """config.json, a tokenizer and all weight shards (as listed by an index file, when there is one)."""
    if "config.json" not in files or not any(t in files for t in TOKENIZER_FILES):
        return False
    weights = weight_files(files)
    if not weights:
        return False
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if index in files:
            try:
                shards = set(json.loads(files[index].path.read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError):
                return False
            return shards <= set(files)
    return True


# ---------------------------------------------------------------- a run's local paths


def _gguf_for_run(pair, index: CacheIndex, quant: Optional[str]) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """-> (quant, target first file, draft first file) of a quantization cached for both, or Nones."""
    if not pair.has_gguf:
        if quant:
            raise HarnessError(f"{pair.name} has no GGUF files (HF only); drop :{quant}")
        return None, None, None
    t, d = (index.gguf_quants(m) for m in pair.models)
    both = sorted(set(t) & set(d))
    if quant and quant not in both:
        have = f"cached: {', '.join(both)}" if both else "no GGUF quantization of it is cached"
        raise HarnessError(
            f"{pair.name}:{quant} is not downloaded ({have}); run `harness models download {pair.name} --quant {quant}`"
        )
    q = quant or (pair.quant if pair.quant in both else (both[0] if both else None))
    if q is None:
        return None, None, None
    return q, str(t[q][0].path), str(d[q][0].path)


def local_pair(pair, quant: Optional[str] = None, index: Optional[CacheIndex] = None) -> PairSpec:
    """PairSpec of a hub preset's cached files (HF snapshot folders, first GGUF file of a quantization).
    `pair` is a models.presets.HubPair.

    A format that is not cached is left None (the runtimes that need it say so); with neither
    format cached, one line says which command downloads the pair.
    """
    name = pair.name
    index = index or CacheIndex()
    hf = [index.hf_snapshot(m.hf) for m in pair.models]
    t_hf, d_hf = (str(h[0]) if h else None for h in hf)
    if not (t_hf and d_hf):
        t_hf = d_hf = None
    q, t_gguf, d_gguf = _gguf_for_run(pair, index, quant)
    if not (t_hf or t_gguf):
        raise HarnessError(
            f"pair {name} is not downloaded (looked in {index.root}); run `harness models download {name}` while online"
        )
    for have, fmt, what in ((t_hf, "hf", "HF weights (torch, hf runtimes)"),
                            (t_gguf or not pair.has_gguf, "gguf", "GGUF files (llama.cpp runtimes)")):
        if not have:
            print(f"note: {name}: no {what} in the cache; `harness models download {name} --format {fmt}` adds them",
                  file=sys.stderr)
    return PairSpec(name if not q or q == pair.quant else f"{name}:{q}", t_hf, d_hf, t_gguf, d_gguf)


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check, so an offline machine gets one line instead of half a minute of retries."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False
