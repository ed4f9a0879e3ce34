// synth.hpp: random-weight Llama checkpoints for benchmarks and tests (`troupe synth`).
// Presets: "bench-134m" (C 768, 12 layers, 12 heads, 12 KV heads, F 2048, V 32000, untied,
// context 2048; ../shared/notes/MACHINE.md's benchmark shape) and "tiny" (C 64, 2 layers,
// 4 heads, 2 KV heads, F 128, V 512) and "tiny-k" (C 512, 2 layers, 8 heads, 4 KV heads, F 1024,
// V 512: every matmul's inner size a multiple of 256, the K-quants' block; "tiny-k256" the same
// at C 256, F 512), "llama-1b" (TinyLlama's shape: C 2048, 22 layers, 32 heads, 4 KV heads, F
// 5632, V 32000); mixtures of experts in
// Mixtral's layout (llama with expert_count, GGUF only): "moe-1b" (C 1024, 16 layers, 16 heads, 8
// KV heads, 32 experts of F 512, 4 chosen: 0.94 B parameters, 0.2 B active per token) and
// "tiny-moe" (C 64, 2 layers, 8 experts of F 64, 2 chosen); "tiny-mla-moe" is DeepSeek-V3's layout
// (latent attention, sigmoid group-limited routing, a shared expert; HF only). The router weights
// stay f32. Weights are normal(0, 0.02), norms ones; each tensor's values depend only on (seed,
// tensor name), so formats and dtypes of one seed hold the same model up to rounding. The
// vocabulary comes from a GGUF SPM file (`vocab_gguf`); the HF format gets an equivalent
// tokenizer.json. Formats: gguf (any dtype) or hf (f32/f16/bf16). A K-quant dtype (q2_k ... q6_k)
// writes random blocks (nothing quantizes to K-quants here); `values` = that K-quant with another
// dtype writes the same values expanded (f32: the same model exactly). Tests:
// tests/formats/checkpoint_test.cpp
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/expected.hpp"

namespace troupe {

struct synth_options {
  std::string preset = "tiny";
  dtype type = dtype::f32;
  std::string format = "gguf"; // gguf | hf
  std::string out;             // file (gguf) or directory (hf)
  uint64_t seed = 1;
  std::string vocab_gguf;      // GGUF file whose tokenizer is copied
  std::optional<dtype> values; // a K-quant: its random blocks' values, stored as `type`
  bool k_m = false;            // with q4_k / q5_k: the _K_M mix (Q6_K where llama-quantize puts it)
};

/// The presets' names, and a preset's vocabulary size (0 when unknown): 512 fits the bundled
/// stories260K tokenizer, 32000 llama2-tiny-random's.
std::vector<std::string> synth_presets();
int64_t synth_preset_vocab(const std::string& name);

/// Writes the model; `progress(done, total)` is called per tensor when set.
status synthesize(const synth_options& o, const std::function<void(int, int)>& progress = {});

} // namespace troupe
