// bitnet.cpp (arch/families): BitNet b1.58 (BitNetForCausalLM: Microsoft's bitnet-b1.58-2B-4T).
// Llama's layout with subln (an RMS norm on the attention's output before o_proj, and on the
// FFN's gated product relu(gate)^2 * up before down_proj) and, as published (quantization_config
// "bitnet", read by config_io), ternary linear maps whose inputs are rounded per token to 8 bits
// (model_config::act_quant: the decoder's act_quant nodes). Here the weights are made ready at
// load: the packed ones (uint8 [N / 4, K], row i * N / 4 + r in bits 2i..2i+1 of byte row r,
// stored as w + 1) unpacked, each matrix times its weight_scale (or divided by it, as
// transformers' BitLinear does), in the scale's float type; or, online, the master weights
// rounded to ternary values times their mean magnitude. GGUF: not read (llama.cpp's bitnet
// files carry their own ternary types and no activation rounding).
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

namespace {

constexpr const char* projections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};

// `values` (N * K floats) stored as `type` under `name` in place of the checkpoint's tensor
status put(tensor_index& t, const std::string& name, dtype type, int64_t N, int64_t K,
           const std::vector<float>& values, const std::string& where) {
  std::vector<uint8_t> bytes(static_cast<size_t>(N * K) * row_bytes(type, 1));
  from_f32(type, values.data(), bytes.data(), N * K);
  return add_derived_tensor(t, name, type, shape{N, K}, std::string(troupe::name(type)),
                            std::move(bytes), where, true);
}

// AutoBitLinear's online weights: round(W s).clamp(-1, 1) / s, s = 1 / max(mean |W|, 1e-5), in
// f32 (as transformers' WeightQuant), kept in the master weights' type
status round_online(tensor_index& t, const std::string& name) {
  const tensor_info* w = t.find(name);
  if (!w) return make_error(errc::not_found, "missing tensor '{}'", name);
  const std::string where = w->file ? w->file->path() : name;
  if (!w->supported || is_quantized(w->type) || w->dims.rank != 2)
    return make_error(errc::unsupported,
                      "{}: '{}' must be a float matrix for online BitNet "
                      "rounding (is {} {})",
                      where, name, w->raw_type, w->dims.to_string());
  const int64_t N = w->dims[0], K = w->dims[1];
  std::vector<float> v(static_cast<size_t>(N * K));
  to_f32(w->type, w->data, v.data(), N * K);
  double sum = 0;
  for (float x : v) sum += std::fabs(x);
  const float s = 1.0f / std::max(static_cast<float>(sum / static_cast<double>(N * K)), 1e-5f);
  for (float& x : v) x = std::min(std::max(std::nearbyint(x * s), -1.0f), 1.0f) / s;
  return put(t, name, w->type, N, K, v, where + " (" + name + " rounded to ternary values)");
}

// the offline form: packed uint8 [N / 4, K] (or, for AutoBitLinear, ternary floats [N, K]) and
// weight_scale [1]
status unpack(tensor_index& t, const std::string& name, bool divides) {
  const tensor_info* w = t.find(name);
  const std::string sname = name + "_scale";
  const tensor_info* s = t.find(sname);
  if (!w) return make_error(errc::not_found, "missing tensor '{}'", name);
  const std::string where = w->file ? w->file->path() : name;
  if (!s)
    return make_error(errc::not_found, "{}: missing tensor '{}' (a BitNet matrix's scale)", where,
                      sname);
  if (!s->supported || is_quantized(s->type) || s->type == dtype::i8 || s->type == dtype::i32 ||
      s->dims.numel() != 1)
    return make_error(errc::shape_mismatch, "{}: '{}' must be one float (is {} {})", where, sname,
                      s->raw_type, s->dims.to_string());
  float scale = 0;
  to_f32(s->type, s->data, &scale, 1);
  if (!std::isfinite(scale) || scale == 0)
    return make_error(errc::corrupt_file, "{}: '{}' is {}", where, sname, scale);
  const float f = divides ? 1.0f / scale : scale;
  if (w->dims.rank != 2)
    return make_error(errc::shape_mismatch, "{}: '{}' must be a matrix (is {})", where, name,
                      w->dims.to_string());
  int64_t N = w->dims[0];
  const int64_t K = w->dims[1];
  std::vector<float> v;
  if (w->raw_type == "U8") { // four rows a byte
    const int64_t R = N;
    N = 4 * R;
    if (w->nbytes != static_cast<uint64_t>(R * K))
      return make_error(errc::corrupt_file, "{}: '{}' holds {} bytes for [{}, {}]", where, name,
                        w->nbytes, R, K);
    v.resize(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const int code = (w->data[r * K + k] >> (2 * i)) & 3;
          if (code == 3)
            return make_error(errc::corrupt_file,
                              "{}: '{}' holds the code 3 (not a ternary "
                              "value) at row {}",
                              where, name, r);
          v[static_cast<size_t>((i * R + r) * K + k)] = static_cast<float>(code - 1) * f;
        }
  } else if (!divides && w->supported && !is_quantized(w->type) && w->type != dtype::i8 &&
             w->type != dtype::i32) { // AutoBitLinear's unpacked ternary weights
    v.resize(static_cast<size_t>(N * K));
    to_f32(w->type, w->data, v.data(), N * K);
    for (float& x : v) x *= f;
  } else {
    return make_error(errc::unsupported,
                      "{}: '{}' must be packed ternary weights (U8) for "
                      "BitNet's {} (is {} {})",
                      where, name, divides ? "BitLinear" : "AutoBitLinear", w->raw_type,
                      w->dims.to_string());
  }
  t.mark_consumed(sname); // (in the weights now)
  return put(t, name, s->type, N, K, v, where + " (" + name + " unpacked, times its scale)");
}

} // namespace

status read_bitnet_hf(hf_cfg& j, model_config& c) {
  TROUPE_TRY(read_llama_hf(j, c));
  c.mlp_bias = false; // (BitNetMLP has no biases whatever mlp_bias says: Llama's key)
  if (!c.gated_ffn) return j.unsupported("an ungated MLP");
  c.sub_norms = true;
  return {};
}

status prepare_bitnet_hf(const model_config& c, tensor_index& t) {
  if (!c.act_quant) return {}; // (no quantization_config: transformers' plain linear maps)
  for (int64_t l = 0; l < c.n_layer; ++l)
    for (const char* p : projections) {
      const std::string name = fmt::format("model.layers.{}.{}.weight", l, p);
      TROUPE_TRY(c.bitnet_online ? round_online(t, name) : unpack(t, name, c.bitnet_scale_divides));
    }
  return {};
}

status build_bitnet(const model_source& m, graph::graph& g) {
  const model_config& c = m.config;
  if (m.format != "hf")
    return make_error(errc::unsupported, "{}: BitNet is read from Hugging Face checkpoints only",
                      m.path);
  decoder_names n = hf_llama_layout(c.qkv_bias, c.o_bias, false);
  n.attn_sub_norm = "model.layers.{}.self_attn.attn_sub_norm.weight";
  n.ffn_sub_norm = "model.layers.{}.mlp.ffn_sub_norm.weight";
  if (c.tie_embeddings) n.lm_head.clear();
  return build_decoder(m, n, g);
}

} // namespace troupe::arch
