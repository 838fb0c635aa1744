"""`harness models download | list | info` and `harness run --pair` against a fake Hub on 127.0.0.1
(tests/fakehub.py) and a Hugging Face cache in a temporary HF_HOME: no network.

The fake Hub serves the real preset repo names: the Qwen HF repos hold the tiny pair's files, the
GGUF repos small GGUF files, the Llama HF repos are gated, the Llama GGUF repos claim files larger
than any disk, and the SmolLM2 repos do not exist.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakehub import FakeHub, Repo, folder_files, write_gguf

ROOT = Path(__file__).resolve().parents[1]
QWEN = "qwen2.5-0.5b-3b"
TOKEN = "hf_goodtoken"


@pytest.fixture(scope="module")
def hub(tmp_path_factory, tiny_pair):
    folder = tmp_path_factory.mktemp("gguf")
    g = write_gguf(folder / "g.gguf").read_bytes()
    g8 = write_gguf(folder / "g8.gguf", n_layers=1).read_bytes()  # other bytes: the cache shares equal blobs
    h = FakeHub(token=TOKEN)
    target, draft = folder_files(tiny_pair.target), folder_files(tiny_pair.draft)
    h.repos.update({
        "Qwen/Qwen2.5-3B-Instruct": Repo(target),
        "Qwen/Qwen2.5-0.5B-Instruct": Repo(draft),
        "Qwen/Qwen2.5-3B-Instruct-GGUF": Repo({"qwen2.5-3b-instruct-q4_k_m.gguf": g, "qwen2.5-3b-instruct-q8_0.gguf": g8,
                                               "README.md": b"# fake"}),
        "Qwen/Qwen2.5-0.5B-Instruct-GGUF": Repo({"qwen2.5-0.5b-instruct-q4_k_m.gguf": g, "qwen2.5-0.5b-instruct-q8_0.gguf": g8}),
        "meta-llama/Llama-3.2-3B-Instruct": Repo(target, gated=True),
        "meta-llama/Llama-3.2-1B-Instruct": Repo(draft, gated=True),
        "bartowski/Llama-3.2-3B-Instruct-GGUF": Repo({"Llama-3.2-3B-Instruct-Q4_K_M.gguf": g},
                                                     sizes={"Llama-3.2-3B-Instruct-Q4_K_M.gguf": 10**18}),
        "bartowski/Llama-3.2-1B-Instruct-GGUF": Repo({"Llama-3.2-1B-Instruct-Q4_K_M.gguf": g}),
    })
    yield h
    h.close()


def harness(*args, home: Path, hub: FakeHub | None, timeout=300, **env):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    base.update(HF_HOME=str(home), HF_HUB_OFFLINE="0", HF_ENDPOINT=hub.url if hub else "http://127.0.0.1:9",
                HF_HUB_DISABLE_TELEMETRY="1")
    base.update(env)
    return subprocess.run([sys.executable, "-m", "spec_harness.harness.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=base, timeout=timeout)


def one_error_line(r) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


@pytest.fixture(scope="module")
def downloaded(hub, tmp_path_factory):
    """An HF_HOME holding the Qwen preset in both formats, fetched from the fake Hub."""
    home = tmp_path_factory.mktemp("hf_home")
    r = harness("models", "download", QWEN, home=home, hub=hub)
    assert r.returncode == 0, r.stderr
    return home, r


def test_download_fetches_both_formats_into_hf_home(hub, downloaded):
    home, r = downloaded
    assert "4 repos" in r.stdout and "harness run --pair qwen2.5-0.5b-3b" in r.stdout
    snaps = home / "hub" / "models--Qwen--Qwen2.5-0.5B-Instruct-GGUF" / "snapshots"
    assert [p.name for p in snaps.glob("*/*")] == ["qwen2.5-0.5b-instruct-q4_k_m.gguf"]  # one quantization only
    hf = next((home / "hub" / "models--Qwen--Qwen2.5-3B-Instruct" / "snapshots").iterdir())
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in hf.iterdir()}
    assert hub.gets("README.md") == 0 and hub.gets("q8_0.gguf") == 0


def test_list_shows_cached_files_and_sizes(downloaded):
    home, _ = downloaded
    r = harness("models", "list", home=home, hub=None)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    start = [i for i, line in enumerate(lines) if line.startswith(QWEN)][0]
    files = next(i for i in range(start, len(lines)) if lines[i].startswith("  target"))  # after a wrapped title
    qwen = [lines[start]] + lines[files:files + 4]
    assert "Qwen/Qwen2.5-3B-Instruct " in qwen[1] and "cached, " in qwen[1] and "KB" in qwen[1]
    assert "cached: Q4_K_M" in qwen[2] and "Q8_0" not in qwen[2]
    assert any("facebook/opt-125m" in line and "not downloaded" in line for line in lines)
    assert str(home / "hub") in r.stdout[r.stdout.rindex("cache: "):] and all(len(line) <= 100 for line in lines)


def test_second_download_is_a_no_op_even_offline(hub, downloaded):
    home, _ = downloaded
    before = len(hub.requests)
    r = harness("models", "download", QWEN, home=home, hub=hub, HF_HUB_OFFLINE="1")
    assert r.returncode == 0, r.stderr
    assert "already in the cache" in r.stdout and len(hub.requests) == before


def test_another_quantization_fetches_only_what_is_missing(hub, downloaded, tmp_path):
    home, _ = downloaded
    gets = hub.gets(".gguf"), hub.gets("model.safetensors")
    r = harness("models", "download", QWEN, "--quant", "q8_0", home=home, hub=hub)
    assert r.returncode == 0, r.stderr
    assert hub.gets(".gguf") == gets[0] + 2 and hub.gets("model.safetensors") == gets[1]  # HF files were cached
    assert "harness run --pair qwen2.5-0.5b-3b:Q8_0" in r.stdout
    listing = harness("models", "list", home=home, hub=None).stdout
    assert re.search(r"Qwen2.5-0.5B-Instruct-GGUF +cached: Q4_K_M 432.5 KB, Q8_0 \d+\.\d KB", listing), listing


@pytest.mark.slow
def test_run_uses_the_cache_without_the_network(hub, downloaded, tmp_path):
    home, _ = downloaded
    before = len(hub.requests)
    out, prompts = tmp_path / "run", tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "p1", "category": "factual", "prompt": "The capital of France is"}) + "\n")
    r = harness("run", "--pair", QWEN, "--runtime", "torch", "--max-new-tokens", "8", "--warmup", "0",
                "--prompts", str(prompts), "--out", str(out), home=home, hub=hub)  # online, and nothing is asked
    assert r.returncode == 0, r.stderr
    assert hub.requests[before:] == []
    pair = json.loads((out / "run.json").read_text())["config"]["pair"]
    assert pair["name"] == QWEN
    assert pair["target"].startswith(str(home / "hub" / "models--Qwen--Qwen2.5-3B-Instruct" / "snapshots"))
    assert pair["draft_gguf"].endswith("qwen2.5-0.5b-instruct-q4_k_m.gguf")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows and all(row["error"] is None and row["pair"] == QWEN for row in rows)


def test_info_of_a_downloaded_pair_compares_tokenizers(downloaded, monkeypatch):
    from click.testing import CliRunner
    from huggingface_hub import constants

    from spec_harness.harness.cli import main

    home, _ = downloaded
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(home / "hub"))  # in-process: transformers is imported already
    r = CliRunner().invoke(main, ["models", "info", QWEN])
    assert r.exit_code == 0, r.output
    assert r.output.count("architecture") == 4  # target and draft, HF and GGUF
    assert "hf tokenizers of target and draft: the same" in r.output
    assert "gguf tokenizers of target and draft: the same" in r.output


def test_run_of_a_preset_not_downloaded_says_how_to_get_it(tmp_path):
    r = harness("run", "--pair", "smollm2-135m-1.7b", "--out", str(tmp_path / "o"), home=tmp_path / "empty", hub=None)
    assert "run `harness models download smollm2-135m-1.7b` while online" in one_error_line(r)


def test_run_of_a_quantization_not_downloaded_lists_the_cached_ones(downloaded, tmp_path):
    home, _ = downloaded
    r = harness("run", "--pair", f"{QWEN}:Q2_K", "--out", str(tmp_path / "o"), home=home, hub=None)
    line = one_error_line(r)
    assert f"{QWEN}:Q2_K is not downloaded (cached: Q4_K_M" in line and "--quant Q2_K" in line


@pytest.mark.parametrize(
    "args, env, needle",
    [
        ([QWEN], {"HF_HUB_OFFLINE": "1"}, "offline (HF_HUB_OFFLINE is set)"),
        ([QWEN], {"HF_ENDPOINT": "http://127.0.0.1:9"}, "cannot reach the Hugging Face Hub at http://127.0.0.1:9"),
        (["smollm2-135m-1.7b"], {}, "no such repo on http://127.0.0.1:"),
        ([QWEN, "--quant", "Q5_K_M", "--format", "gguf"], {},
         "Qwen/Qwen2.5-3B-Instruct-GGUF has no Q5_K_M file; quantizations there: Q4_K_M, Q8_0"),
        (["llama-3.2-1b-3b", "--format", "hf"], {}, "meta-llama/Llama-3.2-3B-Instruct is gated: accept its license at"),
        (["llama-3.2-1b-3b", "--format", "hf"], {"HF_TOKEN": "hf_wrong"}, "is gated and your token has no access"),
        (["llama-3.2-1b-3b", "--format", "gguf"], {}, "disk full in "),
        (["opt-125m-1.3b", "--format", "gguf"], {}, "opt-125m-1.3b has no GGUF files (HF only); use --format hf"),
        (["tiny"], {}, "tiny is built in-process"),
        (["nope"], {}, "unknown pair 'nope'"),
    ],
)
def test_download_errors_are_one_line(hub, tmp_path, args, env, needle):
    r = harness("models", "download", *args, home=tmp_path, hub=hub, **env)
    assert needle in one_error_line(r)
    assert not list((tmp_path / "hub").glob("*/blobs/*"))  # nothing half-downloaded


def test_gated_repo_downloads_with_a_token(hub, tmp_path):
    r = harness("models", "download", "llama-3.2-1b-3b", "--format", "hf", home=tmp_path, hub=hub, HF_TOKEN=TOKEN)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "hub" / "models--meta-llama--Llama-3.2-1B-Instruct").is_dir()
