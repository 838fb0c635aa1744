"""The `llamacpp` runtime: the shared speculative loop (runtimes/loop.py) over two llama.cpp
contexts (GGUF files), through llama-cpp-python's low-level API.

Each context is a LlamaKV, the loop's Model: forward(ids, n_logits) is one llama_decode of a
reused llama_batch (prompts in batch-sized chunks), with logits only for the last n_logits
positions, read as a torch view of llama.cpp's logits buffer (no copy of the vocabulary);
crop(length) is llama_memory_seq_rm(pos >= length). Sampling is core/sampling.py, on one torch
thread, so torch's pool does not fight llama.cpp's threads for the cores.

llama.cpp's own counters (llama_perf_context of each context, reset per generation) go to
Generation.extra["llama_perf"], and extra["decode_ms"] puts each context's decode time by our
clock (its prefill plus its draft or verify phase) beside llama.cpp's (prompt eval + eval ms): a
cross-check of our booking. llama.cpp books every multi-token decode (each verify batch) as
"prompt eval".

`--draft self` (or the same GGUF twice) loads the model once and gives it two contexts: every
draft decode is real work, which is what the calibration run measures.
What it does not do: batching (one sequence), tree drafting, llama.cpp's own samplers.
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import numpy as np
import torch

from spec_harness.core.config import PairSpec
from spec_harness.core.errors import HarnessError
from spec_harness.models import llama_files
from spec_harness.runtimes import llama_common as lc
from spec_harness.runtimes.base import LoopRuntime
from spec_harness.runtimes.loop import Model


class LlamaKV(Model):
    """One llama.cpp context with its KV cache and one reusable llama_batch. [one sequence, id 0]"""

    def __init__(self, model, cparams, vocab: int):
        self.ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not self.ctx:
            raise HarnessError(f"llama.cpp could not create a context of {cparams.n_ctx} tokens (out of memory? lower --n-ctx)")
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.vocab = vocab  # compare over the tokenizer's ids only (padded rows are dropped)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        self.cap = cparams.n_batch
        self.batch = llama_cpp.llama_batch_init(self.cap, 0, 1)
        # numpy views on the batch's arrays: filling them is a slice assignment, not a ctypes loop
        self.tok = np.ctypeslib.as_array(self.batch.token, shape=(self.cap,))  # [cap] int32
        self.pos = np.ctypeslib.as_array(self.batch.pos, shape=(self.cap,))  # [cap] int32
        self.out = np.ctypeslib.as_array(self.batch.logits, shape=(self.cap,))  # [cap] int8
        np.ctypeslib.as_array(self.batch.n_seq_id, shape=(self.cap,))[:] = 1
        for i in range(self.cap):
            self.batch.seq_id[i][0] = 0
        self.ids: list[int] = []  # the tokens in the KV cache, in order (what we believe it holds)
        self.n_embd = llama_cpp.llama_model_n_embd(model)
        self.n_layer = llama_cpp.llama_model_n_layer(model)
        self.aux: list[int] = []  # layers whose inputs each decode keeps (keep_features)
        self.feats = np.zeros((0, 0, self.n_embd), dtype=np.float32)  # [capacity, n_aux, n_embd]

    def keep_features(self, layer_ids) -> None:
        """llama.cpp's own layer-input outputs (lc.layer_inputs, bound with ctypes) for these layers."""
        want = sorted(layer_ids) if layer_ids else []
        if want == self.aux:
            return
        set_inp, _ = lc.layer_inputs()
        if want and max(want) >= self.n_layer:
            raise ValueError(f"the target has {self.n_layer} layers; the head reads {want}")
        for lid in self.aux:
            set_inp(self.ctx, lid, False)
        for lid in want:
            set_inp(self.ctx, lid, True)
        self.aux = want
        self.feats = np.zeros((max(256, len(self.ids)), len(want), self.n_embd), dtype=np.float32)

    def features(self, start: int, end: int) -> torch.Tensor:
        if not self.aux or end > len(self.ids):
            raise ValueError(f"no features for positions {start}..{end - 1} (cache holds {len(self.ids)})")
        return torch.from_numpy(self.feats[start:end].reshape(end - start, -1))

    def __len__(self) -> int:
        return len(self.ids)

    def reset(self) -> None:
        llama_cpp.llama_memory_clear(self.mem, True)
        self.ids = []

    def forward(self, ids: list[int], n_logits: int) -> torch.Tensor:
        """Feed ids after the cache -> logits of the last n_logits positions [n_logits, V]: a view of
        llama.cpp's logits buffer, valid until this context's next decode. Longer than a batch
        (a prompt): fed in chunks, logits of the last chunk."""
        while len(ids) > self.cap:
            self._decode(ids[: self.cap], 1)
            ids = ids[self.cap:]
        return torch.from_numpy(self._decode(ids, n_logits))

    def _decode(self, ids: list[int], n_logits: int) -> np.ndarray:
        s, n0 = len(ids), len(self.ids)
        assert 0 < s <= self.cap and 0 < n_logits <= s
        self.tok[:s] = ids
        self.pos[:s] = np.arange(n0, n0 + s, dtype=np.int32)
        self.out[:s] = 0
        self.out[s - n_logits : s] = 1
        self.batch.n_tokens = s
        rc = llama_cpp.llama_decode(self.ctx, self.batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc} at position {n0} ({s} tokens)"
                               + (": the context is full, raise --n-ctx" if rc == 1 else ""))
        self.ids += ids
        if self.aux:
            self._keep_features(n0, s)
        ptr = llama_cpp.llama_get_logits(self.ctx)  # the output rows, contiguous, in batch order; synchronizes
        return np.ctypeslib.as_array(ptr, shape=(n_logits, self.n_vocab))[:, : self.vocab]  # [n_logits, V]

    def _keep_features(self, n0: int, s: int) -> None:
        """This decode's layer inputs into feats at positions n0 .. n0 + s - 1."""
        _, get_inp = lc.layer_inputs()
        if n0 + s > self.feats.shape[0]:
            grown = np.zeros((max(2 * self.feats.shape[0], n0 + s), *self.feats.shape[1:]), dtype=np.float32)
            grown[:n0] = self.feats[:n0]
            self.feats = grown
        for a, lid in enumerate(self.aux):
            self.feats[n0 : n0 + s, a] = np.ctypeslib.as_array(get_inp(self.ctx, lid), shape=(s, self.n_embd))

    def crop(self, length: int) -> None:
        if length < len(self.ids):
            if not llama_cpp.llama_memory_seq_rm(self.mem, 0, length, -1):
                raise RuntimeError(f"llama_memory_seq_rm could not crop the KV cache to {length} tokens")
            del self.ids[length:]

    def reset_counters(self) -> None:
        lc.reset_perf(self.ctx)

    def counters(self, ours_ns: int) -> dict:
        c = lc.PerfCounters.read(self.ctx)
        return {"llama_perf": c.to_dict(), "decode_ms": {"ours_ms": ours_ns * 1e-6, "llama_ms": c.p_eval_ms + c.eval_ms}}

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_batch_free(self.batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


class LlamaCppRuntime(lc.LlamaText, LoopRuntime):
    name = "llamacpp"
    reads_target_gguf = True  # --target-quant: one measurement per variant

    def load(self, pair: PairSpec) -> None:
        llama_files.quiet_logs()
        self.models, self._kvs = [], []
        try:
            self._load(pair)
        except BaseException:
            self.close()  # the runner closes only runtimes that loaded
            raise

    def _load(self, pair: PairSpec) -> None:
        self.pair = pair
        t_path = llama_files.check_gguf(pair.target_gguf, "target")
        d_path = llama_files.check_gguf(pair.draft_gguf, "draft")
        self.models = [llama_files.load_model(t_path, "target", lc.gpu_layers(self.settings))]
        if d_path != t_path:
            self.models.append(llama_files.load_model(d_path, "draft", lc.gpu_layers(self.settings)))
        t_model, d_model = self.models[0], self.models[-1]
        self.vocab = llama_cpp.llama_model_get_vocab(t_model)
        v = llama_files.check_vocabularies(self.vocab, llama_cpp.llama_model_get_vocab(d_model))
        self.n_ctx = self.settings.resolve_n_ctx(llama_cpp.llama_model_n_ctx_train(t_model))
        cparams = lc.context_params(self.settings, self.n_ctx)
        # with --draft self the two contexts share weights but not caches: every draft decode is real
        for m in (t_model, d_model):
            self._kvs.append(LlamaKV(m, cparams, v))
        self.target, self.draft = self._kvs
        self.paths = (t_path, d_path)

    def is_eos(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def head_embedding(self):
        """The target's embedding from its Hugging Face folder (a GGUF target's float32 conversion)."""
        from safetensors import safe_open

        from spec_harness.models.loading import model_folder

        folder = Path(model_folder(self.pair.target, "target"))
        for f in sorted(folder.glob("*.safetensors")):
            with safe_open(str(f), "pt") as st:
                name = next((k for k in st.keys() if k.endswith("embed_tokens.weight")), None)
                if name:
                    return st.get_tensor(name).float()
        raise ValueError(f"no embed_tokens.weight in {folder}: the EAGLE-3 head has no embedding to read its tokens through")

    def target_config(self):
        from spec_harness.models.loading import model_folder
        from spec_harness.models.shape import load_config

        return load_config(model_folder(self.pair.target, "target"), "target")

    def generating(self):
        return lc.single_threaded_torch()

    @property
    def head_threads(self) -> int:
        """An EAGLE-3 head's passes in PyTorch on the run's threads, as llama.cpp's own draft model's
        (sampling stays on one torch thread): on one, the head's drafting takes longer
        (docs/findings.md)."""
        return lc.n_threads(self.settings)[0]

    @property
    def text_model(self):
        return self.models[0]

    def describe(self) -> dict:
        return lc.describe(self.settings, self.paths, self.n_ctx)

    def close(self) -> None:
        for kv in getattr(self, "_kvs", []):
            kv.close()
        self._kvs = []
        for m in getattr(self, "models", []):
            llama_cpp.llama_model_free(m)
        self.models = []
