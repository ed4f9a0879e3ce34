#!/usr/bin/env python3
"""make_qwen35_bench.py - a random Qwen3.5-shaped checkpoint for `troupe bench` (not a fixture):
12 layers of 1024 (9 gated DeltaNet: 8 key heads, 16 value heads of 128 x 128; 3 gated full
attention: 8 heads, 2 KV heads of 128, a quarter of each rotated), FFN 3072, 32000 tokens, bf16,
tied embeddings: 233 M parameters. Needs torch and transformers (the fixtures' venv).
  /tmp/fixvenv/bin/python bench/make_qwen35_bench.py [OUT_DIR]   (default /tmp/q35big/model)
"""
import shutil
import sys

import torch
import transformers as T

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp/q35big/model"
cfg = T.Qwen3_5TextConfig(vocab_size=32000, hidden_size=1024, intermediate_size=3072, num_hidden_layers=12,
    num_attention_heads=8, num_key_value_heads=2, head_dim=128, linear_conv_kernel_dim=4,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=8, linear_num_value_heads=16,
    max_position_embeddings=4096, tie_word_embeddings=True, rms_norm_eps=1e-6,
    rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                     "mrope_section": [11, 11, 10], "mrope_interleaved": True})
torch.manual_seed(0)
m = T.Qwen3_5ForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(OUT, safe_serialization=True)
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copyfile(f"tests/fixtures/models/qwen3_5/{f}", f"{OUT}/{f}")
print(sum(p.numel() for p in m.parameters())/1e6, "M params")
