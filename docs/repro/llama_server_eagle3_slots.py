"""llama-server + EAGLE-3 head: per-request acceptance alone vs. with concurrent requests.

Standalone (no harness imports, standard library only). Starts one llama-server, measures, stops it:

    python docs/repro/llama_server_eagle3_slots.py --server .venv/bin/llama-server \
        --target TARGET.gguf --head HEAD.gguf [--np 4] [--concurrency 4] [--tokens 32] [--prompts 4]
        [--spec-type draft-eagle3] [--extra "-kvu"]

HEAD.gguf: the EAGLE-3 head as llama.cpp's convert_hf_to_gguf.py writes it (the harness caches it
under $HARNESS_CACHE/eagle3-gguf, ~/.cache/spec-harness/eagle3-gguf by default). --spec-type
draft-simple with --head DRAFT.gguf runs the same check on a plain draft model.

The server gets the harness's flags (runtimes/llama_server.py _argv): -c 4096 -np N -b/-ub 512,
-fa off, --cache-ram 0, --spec-draft-n-max 4 --spec-draft-n-min 0 --spec-draft-p-min 0. Each
request is greedy (temperature 0, top_k 1), 32 tokens, ignore_eos, cache_prompt false.

Phase 1: each prompt alone, one after the other. Phase 2: the same prompts, `--concurrency` at
once (all started together, in rounds). Printed per prompt: the slot, draft_n, draft_n_accepted,
acceptance, and whether the text equals phase 1's (greedy: it must).
"""

import argparse
import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROMPTS = [
    "Summarize how photosynthesis works in plants, step by step, covering light absorption, the "
    "light-dependent reactions, the Calvin cycle and the role of chlorophyll.",
    "Explain how a refrigerator keeps food cold. Describe the compressor, the condenser, the expansion "
    "valve and the evaporator in order.",
    "Give a structured overview of the human circulatory system: the heart's four chambers, arteries, "
    "veins, capillaries, and how oxygen reaches the cells.",
    "Describe how a bill becomes a law in the United States, from introduction to signature.",
    "Explain the water cycle: evaporation, condensation, precipitation and collection.",
    "Explain how vaccines train the immune system, from antigen to memory cells.",
    "Describe the structure of an atom: protons, neutrons, electrons and orbitals.",
    "Explain how a bicycle's gears change the effort needed to pedal uphill.",
]


def chat(text: str) -> str:  # SmolLM2's ChatML template
    return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, path: str, body=None, timeout=600):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    if body is None:
        c.request("GET", path)
    else:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def complete(port: int, prompt: str, tokens: int) -> dict:
    body = {"prompt": chat(prompt), "n_predict": tokens, "temperature": 0.0, "top_k": 1, "top_p": 1.0, "min_p": 0.0,
            "samplers": ["top_k", "top_p", "temperature"], "seed": 0, "ignore_eos": True, "cache_prompt": False,
            "stream": False, "repeat_penalty": 1.0}
    status, data = request(port, "/completion", body)
    if status != 200:
        raise RuntimeError(f"HTTP {status}: {data[:200]!r}")
    return json.loads(data)


def summary(r: dict) -> tuple:
    t = r["timings"]
    n, a = t.get("draft_n", 0), t.get("draft_n_accepted", 0)
    return r.get("id_slot"), n, a, (a / n if n else float("nan")), r["content"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--spec-type", default="draft-eagle3")
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gamma", type=int, default=4)
    ap.add_argument("--extra", default="", help="more server flags, e.g. '-kvu' or '-cd 4096'")
    ap.add_argument("--log", default=None, help="the server's log file (default: a temporary file)")
    a = ap.parse_args()

    port = free_port()
    t = str(a.threads)
    argv = [a.server, "-m", a.target, "-c", str(a.ctx), "-np", str(a.np), "-t", t, "-tb", t, "-b", "512", "-ub", "512",
            "-fa", "off", "-ngl", "0", "--metrics", "--no-webui", "--cache-ram", "0", "-lv", "4",
            "-md", a.head, "--spec-type", a.spec_type, "-td", t, "-tbd", t, "-ngld", "0",
            "--spec-draft-n-max", str(a.gamma), "--spec-draft-n-min", "0", "--spec-draft-p-min", "0",
            *shlex.split(a.extra), "--host", "127.0.0.1", "--port", str(port)]
    log_path = a.log or tempfile.mktemp(prefix="llama-server-eagle3-", suffix=".log")
    log = open(log_path, "w")
    print("$", " ".join(argv), f"\n  log: {log_path}", flush=True)
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "LLAMA_TRACE": "1"})
    try:
        deadline = time.time() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited ({proc.returncode}); see {log_path}")
            try:
                if request(port, "/health", timeout=5)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("llama-server did not become healthy")
            time.sleep(0.3)
        complete(port, "Hello", 8)  # warm-up

        prompts = PROMPTS[:a.prompts]
        alone = [summary(complete(port, p, a.tokens)) for p in prompts]

        together = [None] * len(prompts)

        def one(i):
            together[i] = summary(complete(port, prompts[i], a.tokens))

        for start in range(0, len(prompts), a.concurrency):
            threads = [threading.Thread(target=one, args=(i,)) for i in range(start, min(start + a.concurrency, len(prompts)))]
            for th in threads:
                th.start()
            for th in threads:
                th.join()

        print(f"\n-np {a.np}, {a.spec_type}, greedy, {a.tokens} tokens; alone vs {a.concurrency} at once")
        print(f"{'prompt':>6} | {'slot':>4} {'drafted':>7} {'acc':>4} {'rate':>5} | {'slot':>4} {'drafted':>7} {'acc':>4} {'rate':>5} | same text")
        tot = [0, 0, 0, 0]
        for i, (x, y) in enumerate(zip(alone, together)):
            print(f"{i:>6} | {x[0]:>4} {x[1]:>7} {x[2]:>4} {x[3]:>5.2f} | {y[0]:>4} {y[1]:>7} {y[2]:>4} {y[3]:>5.2f} | {x[4] == y[4]}")
            tot = [tot[0] + x[1], tot[1] + x[2], tot[2] + y[1], tot[3] + y[2]]
        print(f"{'all':>6} | {'':>4} {tot[0]:>7} {tot[1]:>4} {tot[1] / max(tot[0], 1):>5.2f} | {'':>4} {tot[2]:>7} {tot[3]:>4} "
              f"{tot[3] / max(tot[2], 1):>5.2f} |")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


if __name__ == "__main__":
    sys.exit(main())
