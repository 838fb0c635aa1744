"""runtimes/server_common.py, what llama-server and vLLM share, on their own /metrics text: the
speculative counters of either server's page, their difference, forced acceptance as the
unconditional rates both servers take, and a command's version line. No server is started."""

from __future__ import annotations

import sys

from spec_harness.runtimes.server_common import metrics_delta, spec_metrics, synthetic_rates, version_of

LLAMA = """# HELP llamacpp:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 12
llamacpp:spec_decode_num_accepted_tokens_total 7
llamacpp:spec_decode_num_drafts_total 4
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 4
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 3
llamacpp:prompt_tokens_total 40
"""
VLLM = """vllm:spec_decode_num_drafts_total{engine="0",model_name="target"} 5.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="target"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="target"} 15.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="target"} 9.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="target",position="0"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="target",position="2"} 1.0
"""


def test_either_servers_page_gives_the_same_counters():
    assert spec_metrics(LLAMA, "llamacpp") == {"drafts": 4.0, "draft_tokens": 12.0, "accepted": 7.0,
                                               "accepted_per_pos": {0: 4.0, 1: 3.0}}
    assert spec_metrics(VLLM, "vllm") == {"drafts": 5.0, "draft_tokens": 15.0, "accepted": 9.0,
                                          "accepted_per_pos": {0: 5.0, 2: 1.0}}
    # another server's page, or one before any draft, counts nothing
    assert spec_metrics(VLLM, "llamacpp") == spec_metrics("", "vllm") == {
        "drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "accepted_per_pos": {}}


def test_the_delta_is_whole_counts_over_the_positions_after_has():
    before = spec_metrics(LLAMA, "llamacpp")
    after = spec_metrics(LLAMA.replace(" 12\n", " 20\n").replace('"0"} 4', '"0"} 6') +
                         'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 1\n', "llamacpp")
    assert metrics_delta(before, after) == {"drafts": 0, "draft_tokens": 8, "accepted": 0, "accepted_per_pos": [2, 0, 1]}
    assert metrics_delta(spec_metrics("", "vllm"), spec_metrics(VLLM, "vllm")) == {
        "drafts": 5, "draft_tokens": 15, "accepted": 9, "accepted_per_pos": [5, 1]}


def test_forced_rates_become_the_running_products_the_last_rate_repeated():
    assert synthetic_rates((0.5,), 3) == [0.5, 0.25, 0.125]
    assert [round(r, 9) for r in synthetic_rates((0.5, 0.8), 4)] == [0.5, 0.4, 0.32, 0.256]
    assert synthetic_rates((0.9, 0.1), 1) == [0.9]


def test_a_version_is_the_commands_output_or_why_it_could_not_run(tmp_path):
    assert version_of([sys.executable, "-c", "print(' lib  1.2 ')"], 60, lambda out, err: out.strip()) == "lib  1.2"
    missing = version_of([str(tmp_path / "no-such-binary"), "--version"], 60, lambda out, err: out)
    assert missing.startswith("unknown (") and "no-such-binary" in missing
