#!/usr/bin/env python3
"""llama_cpp_decode.py: llama.cpp's decode and prefill speed on a GGUF file, measured the way
`troupe bench` measures Troupe (a prompt of P tokens evaluated as one batch, then G tokens
decoded one at a time, greedy; median of R runs), through llama-cpp-python (its CPU backend,
built natively by pip). One JSON object per line on stdout.

  python bench/llama_cpp_decode.py MODEL.gguf [--threads 1 2] [--prompt-tokens 64]
                                   [--gen-tokens 64] [--repeats 3]

Needs `pip install llama-cpp-python` (a benchmark tool; the product never uses it).
"""
import argparse
import json
import statistics
import time

import numpy as np
from llama_cpp import Llama


def last_argmax(m, n_vocab):
    # the logits of the batch's last token (the only row llama.cpp computes without logits_all)
    return int(np.ctypeslib.as_array(m._ctx.get_logits(), shape=(n_vocab,)).argmax())


def run(path, threads, P, G, R):
    m = Llama(model_path=path, n_ctx=P + G + 8, n_batch=max(P, 8), n_threads=threads,
              n_threads_batch=threads, verbose=False)
    n_vocab = m.n_vocab()
    prompt = [1] + [(i * 7919) % (n_vocab - 3) + 3 for i in range(P - 1)]  # fixed, BOS first
    pre, dec = [], []
    for _ in range(R):
        m.reset()
        t0 = time.perf_counter()
        m.eval(prompt)
        t1 = time.perf_counter()
        tok = last_argmax(m, n_vocab)
        for _ in range(G):
            m.eval([tok])
            tok = last_argmax(m, n_vocab)
        t2 = time.perf_counter()
        pre.append(P / (t1 - t0))
        dec.append(G / (t2 - t1))
    return {"engine": "llama.cpp", "model": path, "threads": threads, "prompt_tokens": P,
            "gen_tokens": G, "decode_tok_s": statistics.median(dec),
            "prefill_tok_s": statistics.median(pre)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    for t in a.threads:
        print(json.dumps(run(a.model, t, a.prompt_tokens, a.gen_tokens, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
