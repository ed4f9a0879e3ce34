#!/usr/bin/env python3
"""make_bitnet_bench.py - random BitNet b1.58 checkpoints for `troupe bench` (not fixtures): the
published 2B4T's layers (30 of 2560, 20 heads and 5 KV heads of 128, FFN 6912, relu^2, subln)
over a 512-token vocabulary (the head's cost left out). bitnet_2b: as published, ternary weights
packed four a byte with a weight_scale each (quantization_config "bitnet", BitLinear); loaded as
t2_32. bitnet_2b_bf16: the same shapes with bf16 weights and no quantization_config (transformers
then runs plain linear maps: the cost of these layers as bf16 floats). Needs torch and
safetensors (the fixtures' venv).
  /tmp/fixvenv/bin/python bench/make_bitnet_bench.py [OUT_DIR]   (default /tmp)
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
C, F, L, H, HKV, D, V = 2560, 6912, 30, 20, 5, 128, 512
CONFIG = {"architectures": ["BitNetForCausalLM"], "model_type": "bitnet", "hidden_act": "relu2",
          "hidden_size": C, "intermediate_size": F, "num_hidden_layers": L,
          "num_attention_heads": H, "num_key_value_heads": HKV, "max_position_embeddings": 4096,
          "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": False,
          "vocab_size": V, "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
SHAPES = {"self_attn.q_proj": (H * D, C), "self_attn.k_proj": (HKV * D, C),
          "self_attn.v_proj": (HKV * D, C), "self_attn.o_proj": (C, H * D),
          "mlp.gate_proj": (F, C), "mlp.up_proj": (F, C), "mlp.down_proj": (C, F)}


def write(name, packed):
    d = f"{OUT}/{name}"
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    t = {"model.embed_tokens.weight": (torch.randn(V, C, generator=g) * 0.5).bfloat16(),
         "lm_head.weight": (torch.randn(V, C, generator=g) * 0.02).bfloat16(),
         "model.norm.weight": torch.ones(C, dtype=torch.bfloat16)}
    for l in range(L):
        p = f"model.layers.{l}."
        for norm, n in (("input_layernorm", C), ("post_attention_layernorm", C),
                        ("self_attn.attn_sub_norm", H * D), ("mlp.ffn_sub_norm", F)):
            t[f"{p}{norm}.weight"] = torch.ones(n, dtype=torch.bfloat16)
        for proj, (n, k) in SHAPES.items():
            codes = torch.randint(0, 3, (4, n // 4, k), generator=g, dtype=torch.uint8)
            scale = 1.0 / (0.02 * (k ** -0.5) * 40)  # (the weights' 1 / mean |W|)
            if packed:  # row i * n / 4 + r in bits 2 i of byte row r, as w + 1
                t[f"{p}{proj}.weight"] = codes[0] | codes[1] << 2 | codes[2] << 4 | codes[3] << 6
                t[f"{p}{proj}.weight_scale"] = torch.tensor([scale], dtype=torch.bfloat16)
            else:
                t[f"{p}{proj}.weight"] = ((codes.reshape(n, k).float() - 1) / scale).bfloat16()
    save_file(t, f"{d}/model.safetensors", metadata={"format": "pt"})
    cfg = dict(CONFIG)
    if packed:
        cfg["quantization_config"] = {"quant_method": "bitnet", "linear_class": "bitlinear",
                                      "quantization_mode": "offline"}
    with open(f"{d}/config.json", "w") as f:
        json.dump(cfg, f, indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(f"tests/fixtures/models/bitnet/{f}", f"{d}/{f}")
    print("wrote", d)


write("bitnet_2b", True)
write("bitnet_2b_bf16", False)
