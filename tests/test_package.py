"""The project as one installed package: a wheel built from the repository, installed into a fresh
environment (its dependencies taken from this one, so nothing is downloaded), runs `harness run`
from another folder, with the shipped files (the default draft, prompt sets) read from the package."""

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(ROOT),
                        "-w", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return next(out.glob("spec_harness-*.whl"))


def test_the_wheel_holds_one_package_and_the_shipped_files(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"spec_harness"}
    for shipped in ("spec_harness/models/default/smollm2-draft.gguf", "spec_harness/harness/prompt_sets/factual.jsonl",
                    "spec_harness/runtimes/loop.py", "spec_harness/core/config.py"):
        assert shipped in names


@pytest.mark.slow
def test_installed_wheel_runs_the_main_job_from_another_folder(wheel, tmp_path):
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                         text=True).stdout.strip()
    # this environment's packages (torch, transformers, ...) after the new one's own: no download,
    # and none of this checkout on the path (a .pth line adds a folder, not the .pth files in it)
    Path(own, "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1"}
    where = subprocess.run([str(py), "-c", "import spec_harness.runtimes.loop as m; print(m.__file__)"],
                           capture_output=True, text=True, cwd=elsewhere, env=env)
    assert where.stdout.startswith(own), where.stdout + where.stderr
    r = subprocess.run([str(env_dir / "bin" / "harness"), "run", "--runtime", "torch", "--pair", "tiny",
                        "--max-new-tokens", "8", "--prompts", "factual", "--repeats", "1", "--out", "out"],
                       capture_output=True, text=True, cwd=elsewhere, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (elsewhere / "out" / "results.jsonl").stat().st_size > 0
    assert "Traceback" not in r.stderr
