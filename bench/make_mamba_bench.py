#!/usr/bin/env python3
"""make_mamba_bench.py - random Mamba-shaped checkpoints for `troupe bench` (not fixtures), the
shapes of the published 130M models: Mamba-2 (24 layers of 768, 24 heads of 64 in one group,
state 128, 4 taps) and Mamba-1 (24 layers of 768, 1536 channels, state 16, dt rank 48), 512
tokens, f32, tied embeddings. Needs torch and transformers (the fixtures' venv).
  /tmp/fixvenv/bin/python bench/make_mamba_bench.py [OUT_DIR]   (default /tmp; writes
  OUT_DIR/mamba2_130m and OUT_DIR/mamba1_130m)
"""
import shutil
import sys

import torch
import transformers as T

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
torch.manual_seed(0)
models = {
    "mamba2_130m": T.Mamba2ForCausalLM(T.Mamba2Config(
        vocab_size=512, hidden_size=768, num_hidden_layers=24, num_heads=24, head_dim=64, expand=2,
        state_size=128, n_groups=1, conv_kernel=4, tie_word_embeddings=True)),
    "mamba1_130m": T.MambaForCausalLM(T.MambaConfig(
        vocab_size=512, hidden_size=768, num_hidden_layers=24, state_size=16, expand=2, conv_kernel=4)),
}
for name, m in models.items():
    d = f"{OUT}/{name}"
    m.save_pretrained(d, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(f"tests/fixtures/models/mamba2/{f}", f"{d}/{f}")
    print(name, sum(p.numel() for p in m.parameters()) / 1e6, "M params")
