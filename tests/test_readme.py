"""The README is a page a newcomer follows, and its examples run.

Every `harness ...` line in a fenced code block of README.md and docs/*.md (after an optional `$ `
prompt and `VAR=value` prefixes, its `# comment` cut, `\\` continuations joined) must be accepted
by the command line: the subcommand path exists, every option exists and its value converts
(click's own parsing, nothing invoked), and the cheap checks the command applies before any work
pass (runtime names, draft policies, drafters, comma lists of numbers, prompt sets, torch forwards,
target quantizations, preset names, sampling settings). Nothing is loaded, measured or written. A known-bad line must be
rejected by the same function, so the check can fail.

Also: README.md has at most MAX_LINES (265) lines, no commit hash, and a date only on a line that starts with
"Measured on"; it keeps the commands .ci/run runs (set-up and tests) and the main job.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import shlex
from pathlib import Path

import click
import pytest

from spec_harness.core import drafters as drafter_kinds
from spec_harness.core.errors import HarnessError

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_LINES = 265
PLACEHOLDER = "..."  # a line that elides arguments is an illustration, not a command
ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
FENCE = re.compile(r"^\s*(```|~~~)")


# ---------------------------------------------------------------- finding the commands


def code_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line inside a fenced code block, `\\` continuations joined."""
    out: list[tuple[int, str]] = []
    inside, pending, start = False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        if pending:
            line = pending + " " + line.strip()
        else:
            start = n
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        pending = ""
        out.append((start, line))
    return out


def harness_argv(line: str):
    """The arguments after `harness` of a command line, or None when the line is not one."""
    s = line.strip()
    if s.startswith("$ "):
        s = s[2:].lstrip()
    try:
        words = shlex.split(s, comments=True)
    except ValueError:
        return None
    while words and ENV.match(words[0]):
        words.pop(0)
    if len(words) < 1 or words[0] != "harness":
        return None
    return words[1:]


def commands(path: Path) -> list[tuple[str, str, list[str]]]:
    """(where, the line, its arguments) of every harness command in a page's code blocks."""
    found = []
    for n, line in code_lines(path.read_text(encoding="utf-8")):
        argv = harness_argv(line)
        if argv is not None and PLACEHOLDER not in line:
            found.append((f"{path.relative_to(ROOT)}:{n}", line.strip(), argv))
    return found


# ---------------------------------------------------------------- parsing them as the command line does


@contextlib.contextmanager
def _paths_need_not_exist(cmd: click.Command):
    """Example paths (`--run runs/x`) need not exist here: parse them as paths, not files on disk."""
    changed = [p.type for p in cmd.params if isinstance(p.type, click.Path) and p.type.exists]
    for t in changed:
        t.exists = False
    try:
        yield
    finally:
        for t in changed:
            t.exists = True


def _items(value) -> list[str]:
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _check_prompts(o: dict) -> None:
    """--prompts and --input-len as the command line reads them before any model loads."""
    from spec_harness.harness import input_len, public_sets
    from spec_harness.harness.prompts import load_prompts

    spec = o.get("prompt_spec")
    name, _, per = str(spec).rpartition(":") if spec is not None and str(spec).rpartition(":")[2].isdigit() \
        else (spec, "", "")
    if name in public_sets.SETS:
        public_sets.get(name)  # read from the cache once fetched: its name is what can be checked here
    elif spec is not None and (ROOT / name).is_file():
        load_prompts(str(ROOT / name) + (f":{per}" if per else ""))  # a fixture of the repository
    elif spec is not None and not str(name).endswith((".jsonl", ".json", ".parquet")):
        load_prompts(spec)
    if o.get("input_len") is not None:
        input_len.parse(o["input_len"])


def _cheap_checks(path: list[str], o: dict) -> None:
    """The checks each command applies to its options before any model loads (harness/cli.py)."""
    from spec_harness import runtimes
    from spec_harness.core.config import DraftPolicy, GenerationSettings, RuntimeSettings, SamplingParams
    from spec_harness.harness import cli
    from spec_harness.models.presets import PRESETS, hub_pair, split_pair_name
    from spec_harness.models.synthetic import is_synthetic, shipped

    if o.get("runtime_spec") is not None:
        runtimes.parse_names(o["runtime_spec"])
    policies = _items(o["policy_list"]) if o.get("policy_list") is not None else ["fixed"]
    for p in policies:
        DraftPolicy.parse(p)
    drafters = drafter_kinds.parse_list(o["drafter_list"]) if o.get("drafter_list") is not None else ["model"]
    axes = {"gamma_list": (int, "--gamma"), "temp_list": (float, "--temperature"), "top_p_list": (float, "--top-p"),
            "max_new_list": (int, "--max-new-tokens"), "concurrency_list": (int, "--concurrency"),
            "alpha_list": (float, "--alpha")}
    lists = {k: cli._split(o[k], cast, flag) for k, (cast, flag) in axes.items() if o.get(k) is not None}
    for f in _items(o.get("torch_forward_list") or ""):
        RuntimeSettings(torch_forward=f)
    if o.get("target_quant_list"):
        cli._target_quants(o["target_quant_list"])
    if path[:2] == ["models", "quantize"]:
        from spec_harness.models.quantize import parse_types

        parse_types(o["type_list"])
    if "device" in o or "dtype" in o or "n_threads" in o:
        RuntimeSettings(**{k: o[k] for k in ("device", "dtype", "n_threads") if o.get(k) is not None})
    _check_prompts(o)
    pairs = _items(o.get("pair_list") or "") if "pair_list" in o else ([o["pair"]] if o.get("pair") else [])
    if path[:2] == ["models", "download"]:
        pairs = [o["pair"]]
    for p in pairs:
        if is_synthetic(p):
            for shape in p.split(":", 1)[1].split(","):
                if "/" not in shape and not shape.endswith(".json"):
                    assert shape in shipped(), f"--pair {p}: no shipped shape {shape!r}"
            if path[0] in ("run", "sweep"):
                raise HarnessError(f"--pair {p}: a synthetic pair is for `harness calibrate`")
            continue
        name = split_pair_name(p)[0]
        if name not in PRESETS:
            raise HarnessError(f"unknown pair {name!r}")
        if path[:2] == ["models", "download"]:
            hub_pair(name)
    if pairs and (o.get("target") or o.get("target_gguf")):
        raise HarnessError("give either --pair or --target/--target-gguf, not both")
    if (o.get("target") or o.get("target_gguf")) and o.get("draft") is None and o.get("draft_gguf") is None and path[0] in (
            "run", "sweep", "calibrate"):
        raise HarnessError("--target needs a --draft")
    if o.get("resume") and not o.get("out") and path[0] in ("run", "sweep", "calibrate"):
        raise HarnessError("--resume needs --out")
    if path[0] in ("run", "sweep", "calibrate"):
        gammas = lists.get("gamma_list") or [o.get("gamma") or 4]
        temps = lists.get("temp_list") or [o.get("temperature") or 0.0]
        top_ps = lists.get("top_p_list") or [o["top_p"] if o.get("top_p") is not None else 1.0]
        lengths = lists.get("max_new_list") or [o.get("max_new_tokens") or 32]
        alphas = lists.get("alpha_list") or [None]
        for t, tp in itertools.product(temps, top_ps):
            SamplingParams(t, tp, o.get("top_k") or 0)
        for g, n, p, d, c, a in itertools.product(gammas, lengths, policies, drafters,
                                                 lists.get("concurrency_list") or [1], alphas):
            GenerationSettings(gamma=g, max_new_tokens=n, draft_policy=p, drafter=d, concurrency=c,
                               forced=None if a is None else (a,))
        for k in ("repeats", "warmup"):
            if o.get(k) is not None:
                assert o[k] >= (1 if k == "repeats" else 0), f"--{k} {o[k]}"
    if path[0] == "bench":
        from spec_harness.harness.bench import BenchSettings

        BenchSettings(figures=o["figures"]).wanted()


def parse(argv: list[str]) -> dict:
    """`harness ARGV` parsed as the command line parses it, and the command's cheap checks, with
    nothing invoked. Returns the options; raises click's error or a HarnessError when rejected."""
    from spec_harness.harness.cli import main

    cmd, path, rest = main, [], list(argv)
    while isinstance(cmd, click.Group):
        if not rest or rest[0].startswith("-"):  # the group's own options (--help, --version)
            cmd.make_context(" ".join(["harness", *path]), rest)
            return {}
        name = rest.pop(0)
        sub = cmd.get_command(click.Context(cmd), name)
        if sub is None:
            raise click.UsageError(f"no such command {' '.join(['harness', *path, name])!r}")
        cmd, path = sub, [*path, name]
    with _paths_need_not_exist(cmd):
        try:
            ctx = cmd.make_context(" ".join(["harness", *path]), rest)
        except click.exceptions.Exit as e:  # --help: printed, exit 0
            if e.exit_code == 0:
                return {}
            raise
    _cheap_checks(path, ctx.params)
    return ctx.params


def rejected(argv: list[str]) -> bool:
    try:
        parse(argv)
    except (click.ClickException, HarnessError, AssertionError):
        return True
    return False


# ---------------------------------------------------------------- the tests

ALL = [c for page in PAGES for c in commands(page)]


def test_the_pages_hold_commands():
    """The extraction finds what it should (an empty list would pass every test below)."""
    readme = [argv for _, _, argv in commands(README)]
    assert len(readme) >= 12
    assert ["run", "--runtime", "all"] in readme and ["tune", "--runtime", "all"] in readme


@pytest.mark.parametrize("where,line,argv", ALL, ids=[w for w, _, _ in ALL])
def test_command_is_accepted(where, line, argv):
    try:
        parse(argv)
    except (click.ClickException, HarnessError) as e:
        msg = e.format_message() if isinstance(e, click.ClickException) else str(e)
        pytest.fail(f"{where}: `{line}` is refused: {msg}")


@pytest.mark.parametrize("line", [
    "harness run --no-such-flag",
    "harness nosuchcommand",
    "harness models nosuchcommand",
    "harness run --runtime torch,nosuchruntime",
    "harness run --draft-policy confidence:2",
    "harness run --drafter ngram:0",
    "harness sweep --gamma 1,two",
    "harness run --gamma 2,0",
    "harness sweep --temperature 0,-1",
    "harness run --top-p 1.5",
    "harness run --prompts nosuchset",
    "harness run --torch-forward fast",
    "harness run --pair nosuchpair",
    "harness run --pair synthetic:qwen2.5-3b,qwen2.5-0.5b",
    "harness run --resume",
    "harness bench --figures 99",
    "harness models download tiny",
    "harness calibrate --alpha 0.5,1.5",
    "harness run --runtime llamacpp --target-quant Q8_0,Q9",
    "harness models quantize --type F16,q3",
])
def test_a_bad_line_is_rejected(line):
    argv = harness_argv(line)
    assert argv is not None
    assert rejected(argv), f"`{line}` was accepted"


def test_good_lines_of_each_kind_are_accepted():
    for line in ("harness sweep --gamma 2,4,6 --drafter model,ngram:3,5", "harness run --help",
                 "harness run --gamma 2,4,6 --temperature 0,0.7 --pair tiny,tiny-hd32",
                 "$ HARNESS_VLLM_ARGS='--tensor-parallel-size 4' harness run --runtime vllm  # a comment",
                 "harness calibrate --run runs/does-not-exist --concurrency 1,4",
                 "harness sweep --runtime llamacpp,torch --target-quant f16,Q8_0", "harness models quantize --type Q4_K_M"):
        assert not rejected(harness_argv(line)), line


def test_continuations_and_prompts_are_read():
    text = "```bash\n$ harness run --runtime torch \\\n    --gamma 3   # three\nnot harness\n```\nharness run --x\n"
    lines = code_lines(text)
    assert lines[0] == (2, "$ harness run --runtime torch --gamma 3   # three")
    assert harness_argv(lines[0][1]) == ["run", "--runtime", "torch", "--gamma", "3"]
    assert harness_argv(lines[1][1]) is None and len(lines) == 2  # prose outside a block is not read


# ---------------------------------------------------------------- the page itself

HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
DATE = re.compile(rf"\b(?:19|20)\d\d-\d\d(?:-\d\d)?\b|\b{MONTHS} \d{{1,2}},? (?:19|20)\d\d\b|"
                  rf"\b\d{{1,2}} {MONTHS} (?:19|20)\d\d\b|\b{MONTHS} (?:19|20)\d\d\b")
MEASURED_ON = re.compile(r"^\W*measured on\b", re.IGNORECASE)


def test_readme_is_short():
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines; at most {MAX_LINES} (depth goes to docs/)"


def test_readme_has_no_commit_hash_and_dates_only_where_measured():
    bad = []
    for n, line in enumerate(README.read_text(encoding="utf-8").splitlines(), 1):
        if HASH.search(line):
            bad.append(f"README.md:{n}: commit hash {HASH.search(line).group()!r}")
        if DATE.search(line) and not MEASURED_ON.match(line):
            bad.append(f"README.md:{n}: date {DATE.search(line).group()!r} outside a 'Measured on' line")
    assert not bad, "dated figures and commits live in docs/findings.md:\n" + "\n".join(bad)


def test_the_checks_of_the_page_can_fail():
    assert HASH.search("at commit 31405ca") and not HASH.search("1234567 tokens, a decade")
    assert DATE.search("on 2026-12-04") and DATE.search("December 4, 2026") and not DATE.search("gamma 2,4,6")
    assert MEASURED_ON.match("Measured on a 2-core VM, 2026-12-04") and not MEASURED_ON.match("It was measured on")


def test_readme_keeps_the_commands_ci_runs():
    lines = [line.strip() for _, line in code_lines(README.read_text(encoding="utf-8"))]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "scripts/setup.sh && . .venv/bin/activate" in lines
    assert "harness run --runtime all" in lines
    tests = "python -m pytest -q"
    assert tests in lines and f"&& {tests}" in ci, "the README's test command is what .ci/run runs"
