"""`harness models download`: fetch a preset's files into the Hugging Face cache with huggingface_hub.

Two phases. Planning asks the Hub (auth check and file listing of every repo) and decides the files:
for GGUF the files of one quantization (a missing quantization is an error listing those that
exist), for HF the config, tokenizer and weight files of the top folder (safetensors when the repo
has them, else PyTorch .bin). Nothing is downloaded until every repo has answered and the free disk
space covers what is missing. Fetching then uses hf_hub_download per GGUF file and snapshot_download
with allow_patterns per HF repo, with huggingface_hub's progress bars.

huggingface_hub does the rest: HF_HOME / HF_HUB_CACHE (where), HF_ENDPOINT (which Hub), HF_TOKEN
(gated and private repos), HF_HUB_OFFLINE (no network). Resuming: a re-run skips every file already
complete in the cache; the file that was interrupted starts over (huggingface_hub 2.x writes each
download to a process-unique temporary file and removes it on failure; within one run it resumes
with HTTP Range after a dropped connection).

Every failure a user can fix is one HarnessError line: offline, Hub unreachable, no such repo, gated
repo without a token (or without access), no file for that quantization, disk full.
What it does not do: decide which cached files a run uses (models/hub.py).
"""

from __future__ import annotations

import errno
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from spec_harness.core.errors import HarnessError
from spec_harness.models.hub import CacheIndex, cache_dir, hub_reachable, weight_files
from spec_harness.models.presets import HubModel, HubPair, hub_pair

FORMATS = ("gguf", "hf", "both")
DEFAULT_FORMAT = "both"  # gguf and hf files
HF_EXTRA = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "tokenizer.model", "vocab.json", "merges.txt", "added_tokens.json",
            "chat_template.jinja", "model.safetensors.index.json", "pytorch_model.bin.index.json")


@dataclass
class Fetch:
    """One repo's share of a download: which files, how many bytes, how many still missing."""

    role: str
    kind: str  # "gguf" or "hf"
    repo: str
    files: list[str] = field(default_factory=list)
    size: int = 0
    missing: int = 0  # bytes not yet in the cache
    quant: Optional[str] = None


# ---------------------------------------------------------------- errors


def endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def human_size(n: Optional[float]) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def disk_full(where: Path, need: Optional[int] = None, free: Optional[int] = None) -> HarnessError:
    amounts = f" (needs {human_size(need)}, {human_size(free)} free)" if need is not None else ""
    return HarnessError(f"disk full in {where}{amounts}: free some space, or set HF_HOME to a larger disk and retry")


def _network_errors() -> tuple[type, ...]:
    """Connection and timeout errors of whichever HTTP client huggingface_hub uses (httpx2 in 2.x,
    httpx in 1.x, requests in 0.x)."""
    found: list[type] = [ConnectionError, TimeoutError]
    for module, names in (("httpx2", ("ConnectError", "TimeoutException")), ("httpx", ("ConnectError", "TimeoutException")),
                          ("requests", ("ConnectionError", "Timeout"))):
        try:
            mod = __import__(module)
        except ImportError:
            continue
        found += [getattr(mod, n) for n in names if hasattr(mod, n)]
    return tuple(found)


def hub_error(e: BaseException, repo: str) -> HarnessError:
    """A huggingface_hub / network / disk exception -> one line naming the cause and the fix."""
    from huggingface_hub import errors, get_token
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    remote_entry = getattr(errors, "RemoteEntryNotFoundError", errors.EntryNotFoundError)  # 0.x: one class for both
    url = f"{endpoint()}/{repo}"
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
        return disk_full(cache_dir())
    if isinstance(e, GatedRepoError):
        if get_token():
            return HarnessError(f"{repo} is gated and your token has no access to it: accept its license at {url} and retry")
        return HarnessError(f"{repo} is gated: accept its license at {url}, then set HF_TOKEN (or run `hf auth login`)")
    if isinstance(e, RepositoryNotFoundError):
        return HarnessError(f"no such repo on {endpoint()}: {repo} (check the name; a private repo needs HF_TOKEN)")
    if isinstance(e, RevisionNotFoundError):
        return HarnessError(f"{repo} has no such revision")
    if isinstance(e, LocalEntryNotFoundError) or type(e).__name__ == "OfflineModeIsEnabled":
        return offline_error(f"{repo} is not in the cache")
    if isinstance(e, remote_entry):
        return HarnessError(f"{repo} lacks a file it listed a moment ago; retry")
    if isinstance(e, _network_errors()):
        return HarnessError(f"cannot reach the Hugging Face Hub at {endpoint()} while fetching {repo} ({type(e).__name__}): check the network and retry")
    if isinstance(e, HfHubHTTPError):
        first = next((line for line in str(e).splitlines() if line.strip()), "")
        return HarnessError(f"the Hub refused {repo}: {first}")
    return HarnessError(f"download of {repo} failed: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")


def offline_error(what: str) -> HarnessError:
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return HarnessError(f"offline (HF_HUB_OFFLINE is set) and {what}: unset HF_HUB_OFFLINE and retry while online")
    return HarnessError(f"cannot reach the Hugging Face Hub at {constants.ENDPOINT} and {what}: retry while online (or check HF_ENDPOINT)")


def _guard(repo: str, call: Callable):
    """Run a huggingface_hub call, turning its failures into one-line HarnessErrors."""
    try:
        return call()
    except HarnessError:
        raise
    except Exception as e:  # noqa: BLE001 - every exception is mapped; unknown ones keep their type name
        raise hub_error(e, repo) from None


# ---------------------------------------------------------------- planning


def formats(pair: HubPair, fmt: str) -> list[str]:
    if fmt not in FORMATS:
        raise HarnessError(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    kinds = ["hf", "gguf"] if fmt == "both" else [fmt]
    if "gguf" in kinds and not pair.has_gguf:
        if fmt == "gguf":
            raise HarnessError(f"{pair.name} has no GGUF files (HF only); use --format hf")
        kinds.remove("gguf")
    return kinds


def cached_bytes(index: CacheIndex, repo: str, files: list[str]) -> int:
    """Bytes of `files` already in the cache (in any revision)."""
    have = {}
    for rev in index.revisions(repo):
        have.update({n: f.size for n, f in rev.items() if n in files and n not in have})
    return sum(have.values())


def plan_repo(model: HubModel, kind: str, quant: str, index: CacheIndex) -> Fetch:
    """Ask the Hub about one repo and choose its files; HarnessError if access or files fail."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    repo = model.gguf if kind == "gguf" else model.hf
    api = HfApi()
    _guard(repo, lambda: api.auth_check(repo))
    listing = _guard(repo, lambda: {f.path: f.size for f in api.list_repo_tree(repo, recursive=True) if isinstance(f, RepoFile)})
    fetch = Fetch(model.role, kind, repo, quant=quant if kind == "gguf" else None)
    if kind == "gguf":
        by_quant = model.quant_files(listing)
        if quant not in by_quant:
            have = ", ".join(sorted(by_quant)) or "none matching " + model.file
            raise HarnessError(f"{repo} has no {quant} file; quantizations there: {have} (pass --quant)")
        fetch.files = by_quant[quant]
    else:
        weights = weight_files(listing)
        if not weights or "config.json" not in listing:
            raise HarnessError(f"{repo} has no config.json or weight files at its top level; not a transformers model")
        fetch.files = sorted(set(weights) | {n for n in HF_EXTRA if n in listing})
    fetch.size = sum(listing[n] or 0 for n in fetch.files)
    fetch.missing = max(fetch.size - cached_bytes(index, repo, fetch.files), 0)
    return fetch


def check_disk(need: int) -> None:
    """HarnessError when the cache's disk has less free space than the bytes still missing."""
    root = cache_dir()
    probe = next((p for p in [root, *root.parents] if p.exists()), Path("/"))
    free = shutil.disk_usage(probe).free
    if need > free:
        raise disk_full(root, need, free)


def already_cached(pair: HubPair, kinds: list[str], quant: str, index: CacheIndex) -> bool:
    for m in pair.models:
        if "hf" in kinds and not index.hf_snapshot(m.hf):
            return False
        if "gguf" in kinds and quant not in index.gguf_quants(m):
            return False
    return True


def plan(name: str, quant: Optional[str], fmt: str, index: CacheIndex) -> tuple[HubPair, list[Fetch]]:
    """-> (pair, fetches); [] when everything asked for is already cached (no network then)."""
    from huggingface_hub import constants

    pair = hub_pair(name)
    kinds = formats(pair, fmt)
    if quant and "gguf" not in kinds:
        raise HarnessError(f"--quant applies to GGUF files, and this download has none ({name}, --format {fmt}); drop --quant")
    quant = (quant or pair.quant or "").upper()
    if already_cached(pair, kinds, quant, index):
        return pair, []
    what = f"{name} ({'/'.join(kinds)}) is not completely in the cache at {index.root}"
    if constants.HF_HUB_OFFLINE or not hub_reachable():
        raise offline_error(what)
    fetches = [plan_repo(m, kind, quant, index) for m in pair.models for kind in kinds]
    check_disk(missing_bytes(fetches))
    return pair, fetches


def missing_bytes(fetches: list[Fetch]) -> int:
    """Bytes still to download; a repo shared by target and draft counts once."""
    return sum({(f.repo, tuple(f.files)): f.missing for f in fetches}.values())


# ---------------------------------------------------------------- fetching


def fetch(f: Fetch) -> Path:
    """Download one repo's files into the cache; -> the snapshot folder holding them."""
    from huggingface_hub import hf_hub_download, snapshot_download

    if f.kind == "gguf":
        paths = [_guard(f.repo, lambda n=n: hf_hub_download(f.repo, n)) for n in f.files]
        return Path(paths[0]).parent
    return Path(_guard(f.repo, lambda: snapshot_download(f.repo, allow_patterns=f.files)))


def download(name: str, quant: Optional[str] = None, fmt: str = DEFAULT_FORMAT, echo: Callable[[str], None] = print) -> list[Fetch]:
    """Plan, then fetch every repo of a preset; echo says what happens. -> the fetches done."""
    index = CacheIndex()
    pair, fetches = plan(name, quant, fmt, index)
    if not fetches:
        echo(f"{name}: already in the cache ({index.root}); nothing to download")
        return []
    echo(f"{name}: {len(fetches)} repos, {human_size(missing_bytes(fetches))} to download into {index.root}")
    for f in fetches:
        what = f"{f.quant} GGUF" if f.kind == "gguf" else "HF"
        echo(f"  {f.role:<6} {what:<11} {f.repo}: {len(f.files)} files, {human_size(f.size)}"
             + ("" if f.missing else " (cached)"))
        folder = fetch(f)
        echo(f"         -> {folder}")
    quant = next((f.quant for f in fetches if f.quant), pair.quant)
    echo(f"done; run it with `harness run --pair {name}" + (f":{quant}" if quant != pair.quant else "") + "`")
    return fetches
