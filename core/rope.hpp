// rope.hpp: rotary position embedding as data. `rope_spec` says which dimensions rotate and
// at which frequencies (theta, partial rotary dim, and the context-extension scalings used by
// published checkpoints: linear, Llama 3's piecewise "llama3", and YaRN). `rope_inv_freq`
// turns a spec into the rot_dim/2 inverse frequencies and the attention factor that scales
// cos and sin (YaRN's mscale), in double precision, following the formulas the checkpoints'
// own reference code uses (LongRoPE: per-frequency factors, short or long set; `factors`: a
// table of per-frequency divisors, as GGUF stores Llama 3's scaling). Layout:
// `interleaved` rotates pairs (2i, 2i+1) (Meta / GGUF llama); `neox` rotates (i, i + rot_dim/2)
// (Hugging Face rotate_half, GGUF qwen2). Tests: tests/core/rope_test.cpp, and the rope cases of
// the op harness.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace troupe {

enum class rope_layout : uint8_t { interleaved, neox };
enum class rope_scaling : uint8_t { none, linear, llama3, yarn, longrope, factors };

struct rope_spec {
  rope_layout layout = rope_layout::neox;
  int rot_dim = 0;        // rotated dimensions per head (<= head dim, even)
  double theta = 10000.0; // base
  rope_scaling scaling = rope_scaling::none;
  double factor = 1.0;           // linear / llama3 / yarn scale factor
  double low_freq_factor = 1.0;  // llama3
  double high_freq_factor = 4.0; // llama3
  double orig_ctx = 8192;        // llama3 / yarn: original_max_position_embeddings
  double beta_fast = 32.0;       // yarn
  double beta_slow = 1.0;        // yarn
  double attn_factor = 0.0;      // yarn: explicit attention factor; 0 = derive from factor
  double mscale = 0.0;           // yarn (DeepSeek style): mscale / mscale_all_dim, 0 = unset
  double mscale_all_dim = 0.0;
  bool yarn_truncate = true; // yarn: the correction range rounded out to whole dimensions
                             // (HF's `truncate`, false for GPT-OSS)
  // longrope (Phi-3): each frequency's wavelength times a factor of the short set (contexts up
  // to orig_ctx) or of the long set; attn_factor as read (sqrt(1 + ln f / ln orig) by default)
  std::vector<double> short_factor, long_factor;
  bool use_long = false;
  // factors (GGUF rope_freqs.weight, Llama 3's scaling as the converter tabulates it): each
  // inverse frequency divided by short_factor[i]
  // proportional RoPE (transformers' "proportional": LFM3's, Gemma 4's): the pairs of the whole
  // head (rot_dim = head dim) at theta^(-2i / rot_dim), of which only the first `turning` turn
  // (the others' frequencies are 0); 0: every pair turns
  int turning = 0;
  // which dimensions of a head turn: rot_dim of them from rot_offset (DeepSeek-V4 rotates each
  // head's last rot_dim: offset head dim - rot_dim); inverse: by minus the angle (the conjugate
  // rotation, which undoes one: V4 turns its attention's output back)
  int rot_offset = 0;
  bool inverse = false;
  // LeRoPE (Mistral Large 4): each inverse frequency, after the scaling above, times learned[i]
  // (the exp of the checkpoint's alpha per frequency); empty: none
  std::vector<double> learned;

  // every field (not defaulted: .cu files include this as C++17); a field added above joins
  // it in rope.cpp
  bool operator==(const rope_spec& o) const;
};

struct rope_table {
  std::vector<double> inv_freq; // [rot_dim / 2]
  double attn_factor = 1.0;     // multiplies cos and sin
};

rope_table rope_inv_freq(const rope_spec& spec);
std::string_view to_string(rope_scaling s);

} // namespace troupe
