"""The click options several `harness` commands share, each written once: the model, machine,
repeat and output groups, the axes of `run` and `sweep` (every one a comma list), the one setting
of `tune`, and the flags whose help names runtimes, read from the registry (runtimes/__init__.py)
when --help is shown, so a runtime registered later is named too.

Every default is read from the dataclass or the named constant that defines it
(core.config.default_of). One flag name per concept across every command: --threads,
--max-new-tokens, --target, --prompts; --top-k is sampling, --teacher-top-k the teacher's
log-probs kept for training. What it does not do: parse a value or run a command (harness/cli.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Union

import click

from spec_harness.core.config import (PROMPT_FILE_MAX_NEW_TOKENS, GenerationSettings, RuntimeSettings, SamplingParams,
                                      default_of)
from spec_harness.harness.open_load import DEFAULT_SLOTS, OpenLoad
from spec_harness.harness.prompts import DEFAULT_PROMPTS
from spec_harness.harness.run_config import RunConfig

SWEEP_GAMMAS = "1,2,4,6,8"  # sweep's --gamma
DEFAULT_DRAFTERS = "model,eagle3"  # --drafter when every pair has an EAGLE-3 head of its own (the default pair)


class RegistryHelp(click.Option):
    """An option whose help may be a function, called when --help is shown: text that names
    runtimes reads the registry as it is then, and importing the command line imports no runtime."""

    def __init__(self, *args, help: Union[str, Callable[[], str], None] = None, **kwargs):
        self.help_of = help if callable(help) else None
        super().__init__(*args, help=None if callable(help) else help, **kwargs)

    def get_help_record(self, ctx):
        if self.help_of is not None:
            self.help = self.help_of()
        return super().get_help_record(ctx)


def _runtimes_help() -> str:
    from spec_harness import runtimes

    left_out = runtimes.not_in_all()
    but = f" but {runtimes.listed(list(left_out))} on this machine" if left_out else ""
    return f"Comma list of runtimes ({', '.join(runtimes.names())}), or 'all' (every one{but})."


def _forcing_help() -> str:
    from spec_harness import runtimes

    return f"Comma list of runtimes that can force acceptance ({runtimes.listed(runtimes.able('forces'))}), or 'all'."


def _quant_help() -> str:
    from spec_harness import runtimes

    return ("Comma list of llama.cpp quantization types of the target (an axis: F16, Q8_0, Q4_K_M, ...; `harness models "
            "quantize` makes and lists them): the runtimes that run the target's GGUF "
            f"({runtimes.listed(runtimes.able('reads_target_gguf'))}) run each pair once per type, the others once "
            "as given. [default: the pair as given]")


def runtime_option(default: str, forcing: bool = False):
    """--runtime: a comma list of registered runtimes (those that force acceptance, for calibrate)."""
    return click.option("--runtime", "runtime_spec", default=default, show_default=True, cls=RegistryHelp,
                        help=_forcing_help if forcing else _runtimes_help)


def options(*groups):
    """A decorator applying click options in the order given (click applies them bottom-up)."""
    def apply(f):
        for o in reversed([o for g in groups for o in g]):
            f = o(f)
        return f
    return apply


def _rs(name: str):
    return default_of(RuntimeSettings, name)


VERBOSE = click.option("--verbose", is_flag=True, help="Also show what the libraries print (warnings, load logs, progress "
                                                      "bars) and a progress line per generation.")
MODEL_OPTIONS = [
    click.option("--target", default=None, help="Target model: local folder, .gguf file or Hugging Face id."),
    click.option("--draft", default=None, help="Draft model (path or id), or 'self' to draft with the target."),
    click.option("--target-gguf", default=None, help="Target GGUF file for the llama.cpp runtimes."),
    click.option("--draft-gguf", default=None, help="Draft GGUF file for the llama.cpp runtimes, or 'self'."),
]
REPEAT_OPTIONS = [
    click.option("--concurrency", "concurrency_list", default=str(default_of(GenerationSettings, "concurrency")),
                 show_default=True,
                 help="Comma list of client streams at once (an axis): 1 is one request at a time; N above 1 loads "
                      "the server runtimes with N closed-loop streams (the others are one skipped row)."),
    click.option("--repeats", default=default_of(RunConfig, "repeats"), show_default=True, type=int),
    click.option("--warmup", default=default_of(RunConfig, "warmup"), show_default=True, type=int,
                 help="Warm-up generations per runtime and pair (not recorded)."),
    click.option("--seed", default=default_of(RunConfig, "seed"), show_default=True, type=int,
                 help="Seed of repeat 0; repeat r uses seed + r."),
]
OPEN_LOAD_OPTIONS = [  # harness/open_load.py
    click.option("--request-rate", "request_rate_list", default=None,
                 help="Comma list of request rates per second (an axis; inf = every request at once): the server "
                      "runtimes get an open-loop load, requests sent on a seeded schedule whatever the answers "
                      "before them are doing (the others are one skipped row)."),
    click.option("--burstiness", default=default_of(OpenLoad, "burstiness"), show_default=True, type=float,
                 help="Shape of the gaps between arrivals (gamma distributed, vLLM's meaning): 1 = Poisson, below 1 "
                      "burstier, above 1 more regular."),
    click.option("--num-requests", default=default_of(OpenLoad, "requests"), show_default=True, type=int,
                 help="Requests sent at each --request-rate (the prompts in a seeded order, repeated as needed)."),
    click.option("--duration", "duration_s", default=None, type=float,
                 help="Seconds of arrivals at each --request-rate instead of --num-requests (rate x duration requests)."),
    click.option("--max-concurrency", default=None, type=int,
                 help=f"At most this many requests in flight from the client, and the servers started with as many "
                      f"slots (default: no cap; {DEFAULT_SLOTS} slots, the server queues the rest)."),
    click.option("--slo", "slo_spec", default=None,
                 help="Latency targets for goodput, in ms: ttft=MS,tpot=MS,e2el=MS (vLLM's --goodput): the requests "
                      "per second that meet every one."),
]
THREADS = click.option("--threads", "n_threads", default=_rs("n_threads"), type=int,
                       help="CPU threads for torch and llama.cpp (default: torch's own; llama.cpp one per physical core; "
                            "use 1 on a busy machine).")
MACHINE_OPTIONS = [
    click.option("--device", default=_rs("device"), show_default=True, help="auto, cpu, cuda or mps."),
    click.option("--dtype", default=_rs("dtype"), show_default=True, help="auto, float32, float16 or bfloat16."),
    THREADS,
    click.option("--torch-forward", "torch_forward_list", default=_rs("torch_forward"), show_default=True,
                 help="Comma list (an axis) of what torch's forward runs: kernels (its C++ one-token step and "
                      "packed matrices, runtimes/llama_step.py), eager (PyTorch's own ops throughout), auto "
                      "(kernels on a CPU in float32 where they build, else eager)."),
    click.option("--n-gpu-layers", default=_rs("n_gpu_layers"), type=int,
                 help="llama.cpp layers to offload to the GPU (-1 = all; default: all where this llama.cpp build "
                      "offloads (CUDA, Metal), else 0)."),
    click.option("--n-ctx", default=_rs("n_ctx"), type=int,
                 help=f"llama.cpp context length (default: min(model's, {RuntimeSettings.N_CTX_CAP}))."),
]
OUT_OPTIONS = [
    click.option("--out", default=None, type=click.Path(path_type=Path), help="Output folder (default: a new one under runs/)."),
    click.option("--resume", is_flag=True, help="Continue the results in --out: measured rows are kept, not redone."),
    VERBOSE,
]

TOP_K = click.option("--top-k", default=default_of(SamplingParams, "top_k"), show_default=True, type=int, help="0 = off.")
POLICY = click.option("--draft-policy", "policy_list", default=str(default_of(GenerationSettings, "draft_policy")), show_default=True,
                      help="Comma list: fixed (gamma drafts per round), confidence:P (at most gamma, stopping before "
                           "the first draft whose top-1 probability is < P), heuristic (Hugging Face's schedule from "
                           "gamma: +2 after a round that accepted all, -1 otherwise), library-default (the runtime's "
                           "library as a user who sets nothing gets it). `harness runtimes` says which runtime runs which.")
PROMPTS = click.option("--prompts", "prompt_spec", default=DEFAULT_PROMPTS, show_default=True,
                       help="Built-in categories (comma list; 'spec-bench' = its six task categories; 'all'), a public "
                            "set fetched by `harness prompts fetch NAME`, or a prompt file (ours, MT-Bench, Spec-Bench, "
                            "SPEED-Bench, ShareGPT; .jsonl, .json, .parquet); NAME:N keeps N questions per category.")
INPUT_LEN = click.option("--input-len", "input_len", default=None,
                         help="Comma list of input lengths in tokens (an axis; 512,1k,2k,4k): each prompt built to "
                              "exactly that many of the pair's tokens, chat template included, from real text (cut, "
                              "or preceded by the set's other prompts).")
EOS = click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens.")
TARGET_QUANT = click.option("--target-quant", "target_quant_list", default=None, cls=RegistryHelp, help=_quant_help)
LENGTH_DEFAULT = (f"{default_of(GenerationSettings, 'max_new_tokens')}; {PROMPT_FILE_MAX_NEW_TOKENS} for a prompt file or "
                  "public set")
MAX_NEW_TOKENS = click.option("--max-new-tokens", default=None, type=int, help=f"Most tokens generated, fewer at EOS "
                              f"[default: {LENGTH_DEFAULT}].")
PAIR = click.option("--pair", default=None, help="Preset pair name (default: the embedded default pair).")
ONE_SAMPLING = [  # the sampling and length of tune's one setting
    click.option("--temperature", default=default_of(SamplingParams, "temperature"), show_default=True, type=float,
                 help="0 = greedy."),
    click.option("--top-p", default=default_of(SamplingParams, "top_p"), show_default=True, type=float),
    MAX_NEW_TOKENS,
]


def axes(gammas: str) -> list:
    """The axes of `run` and `sweep`, each a comma list; `gammas` is --gamma's default."""
    return [
        click.option("--pair", "pair_list", default=None,
                     help="Comma list of preset pairs (default: the embedded default pair)."),
        click.option("--gamma", "gamma_list", default=gammas, show_default=True,
                     help="Comma list of draft tokens per round."),
        click.option("--temperature", "temp_list", default=str(default_of(SamplingParams, "temperature")),
                     show_default=True, help="Comma list of temperatures (0 = greedy)."),
        click.option("--top-p", "top_p_list", default=str(default_of(SamplingParams, "top_p")), show_default=True,
                     help="Comma list of top-p values."),
        click.option("--max-new-tokens", "max_new_list", default=None,
                     help=f"Comma list of generation lengths, fewer at EOS [default: {LENGTH_DEFAULT}]."),
    ]
