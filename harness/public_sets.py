"""The public prompt sets the harness knows by name: where each is published, and fetching one
into the Hugging Face cache (`harness prompts fetch NAME`) so that `--prompts NAME` reads it offline.

huggingface_hub does the downloading, as `harness models download` does (HF_HOME, HF_ENDPOINT,
HF_TOKEN for a gated set, HF_HUB_OFFLINE): a fetch skips every file already complete in the
cache, and a failure is one line (models/download.py's hub_error). A set published outside the
Hub (Spec-Bench, on GitHub) is named with where to get its file; `--prompts FILE` reads it.
What it does not own: reading the files (harness/prompt_formats.py) or the built-in sets
(harness/prompts.py).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from spec_harness.core.errors import HarnessError


@dataclass(frozen=True)
class PublicSet:
    name: str  # what --prompts and `harness prompts fetch` call it
    about: str  # one line: what it holds
    repo: Optional[str] = None  # its Hugging Face dataset repo; None: not on the Hub
    files: tuple[str, ...] = ()  # the repo's files the harness reads (fnmatch patterns)
    elsewhere: str = ""  # where to download it by hand, for a set not on the Hub


SETS = {s.name: s for s in (
    PublicSet("mt-bench", "MT-Bench: 80 two-turn questions in 8 categories",
              "HuggingFaceH4/mt_bench_prompts", ("raw/question.jsonl",)),
    PublicSet("speed-bench", "SPEED-Bench's qualitative split: 11 domains x 80 prompts, some multi-turn (gated: "
                             "accept its license on the Hub, set HF_TOKEN)",
              "nvidia/SPEED-Bench", ("*qualitative*.parquet",)),
    PublicSet("sharegpt", "ShareGPT conversations, the file `vllm bench serve --dataset-name sharegpt` reads "
                          "(about 640 MB)",
              "anon8231489123/ShareGPT_Vicuna_unfiltered", ("ShareGPT_V3_unfiltered_cleaned_split.json",)),
    PublicSet("spec-bench-questions", "Spec-Bench: 480 questions in 6 tasks (MT-Bench's format; its mt_bench task "
                                      "has two turns)",
              elsewhere="github.com/hemingkx/Spec-Bench, data/spec_bench/question.jsonl: download it and pass "
                        "--prompts question.jsonl"),
)}


def get(name: str) -> PublicSet:
    if name not in SETS:
        raise HarnessError(f"no public prompt set named {name!r}; `harness prompts list` names them: {', '.join(SETS)}")
    return SETS[name]


def fetch(name: str) -> list[Path]:
    """Download set `name`'s files into the Hugging Face cache (resumable); their paths there."""
    from huggingface_hub import snapshot_download

    from spec_harness.models.download import hub_error

    s = _on_hub(name)
    try:
        folder = Path(snapshot_download(s.repo, repo_type="dataset", allow_patterns=list(s.files)))
    except Exception as e:  # noqa: BLE001 - one line naming the cause and the fix
        raise hub_error(e, f"datasets/{s.repo}") from None
    return _files_in(s, folder)


def cached(name: str) -> list[Path]:
    """Set `name`'s files in the cache, read offline; one line saying how to fetch them if they are not there."""
    from huggingface_hub import snapshot_download

    s = _on_hub(name)
    try:
        folder = Path(snapshot_download(s.repo, repo_type="dataset", allow_patterns=list(s.files),
                                        local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the cache, whatever huggingface_hub calls it
        raise HarnessError(f"public prompt set {name} is not in the cache: run `harness prompts fetch {name}` "
                           "(once, online)") from None
    return _files_in(s, folder)


def fetched(name: str) -> Optional[Path]:
    """The folder holding set `name`'s files when they are in the cache, else None."""
    try:
        return cached(name)[0].parent
    except HarnessError:
        return None


def _on_hub(name: str) -> PublicSet:
    s = get(name)
    if s.repo is None:
        raise HarnessError(f"{name} is not on the Hugging Face Hub; it is published at {s.elsewhere}")
    return s


def _files_in(s: PublicSet, folder: Path) -> list[Path]:
    found = sorted(p for p in folder.rglob("*") if p.is_file()
                   and any(fnmatch.fnmatch(p.relative_to(folder).as_posix(), pat) for pat in s.files))
    if not found:
        raise HarnessError(f"datasets/{s.repo} holds no file matching {', '.join(s.files)}: the set's layout "
                           "changed; download its file by hand and pass --prompts FILE")
    return found
