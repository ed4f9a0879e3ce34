// bitnet.cpp (arch/families): BitNet b1.58 (BitNetForCausalLM: Microsoft's bitnet-b1.58-2B-4T).
// Llama's layout with subln (an RMS norm on the attention's output before o_proj, and on the
// FFN's gated product relu(gate)^2 * up before down_proj) and, as published (quantization_config
// "bitnet", read by config_io), ternary linear maps whose inputs are rounded per token to 8 bits
// (model_config::act_quant: the decoder's act_quant nodes). Here the weights are made ready at
// load: the packed ones (uint8 [N / 4, K], row i * N / 4 + r in bits 2i..2i+1 of byte row r,
// stored as w + 1) unpacked, each matrix's factor its weight_scale (or one over it, as
// transformers' BitLinear divides by it); or, online, the master weights rounded to ternary
// values, the factor their mean magnitude. Stored as t2_32 (2-bit codes and the factor in f32
// per 32 values: the int8 kernels of gemv_t2.hpp, exact on the rounded activations) where the
// rows are whole blocks, else as floats in the scale's (or master weights') type. GGUF: not read
// (llama.cpp's bitnet files carry their own ternary types and no activation rounding).
#include <cmath>
#include <cstring>

#include "arch/families/decoder.hpp"
#include "core/convert.hpp"

namespace troupe::arch {

namespace {

constexpr const char* projections[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                       "mlp.down_proj"};

// Floats v [N, K] stored as `type` under `name` in place of the checkpoint's tensor
status put_floats(tensor_index& t, const std::string& name, int64_t N, int64_t K,
                  const std::vector<float>& v, dtype type, const std::string& where) {
  std::vector<uint8_t> bytes(static_cast<size_t>(N * K) * row_bytes(type, 1));
  from_f32(type, v.data(), bytes.data(), N * K);
  return add_derived_tensor(t, name, type, shape{N, K}, std::string(troupe::name(type)),
                            std::move(bytes), where, true);
}

// Ternary weights w [N, K] times f stored under `name` in place of the checkpoint's tensor: as
// t2_32 blocks (2-bit codes, f as each block's f32 scale) where the rows are whole blocks, else
// as floats of `type`
status put(tensor_index& t, const std::string& name, int64_t N, int64_t K,
           const std::vector<int8_t>& w, float f, dtype type, const std::string& where) {
  if (K % 32 == 0) {
    const int64_t nb = N * K / 32;
    std::vector<uint8_t> bytes(static_cast<size_t>(nb * 12), 0);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* o = bytes.data() + b * 12;
      std::memcpy(o, &f, 4);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 8; ++j)
          o[4 + j] |=
              static_cast<uint8_t>((w[static_cast<size_t>(b * 32 + 8 * i + j)] + 1) << (2 * i));
    }
    return add_derived_tensor(t, name, dtype::t2_32, shape{N, K}, "t2_32", std::move(bytes), where,
                              true);
  }
  std::vector<float> v(w.size());
  for (size_t i = 0; i < w.size(); ++i) v[i] = static_cast<float>(w[i]) * f;
  return put_floats(t, name, N, K, v, type, where);
}

// AutoBitLinear's online weights: round(W s).clamp(-1, 1) / s, s = 1 / max(mean |W|, 1e-5), in
// f32 (as transformers' WeightQuant)
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
  std::vector<int8_t> q(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    q[i] = static_cast<int8_t>(std::min(std::max(std::nearbyint(v[i] * s), -1.0f), 1.0f));
  return put(t, name, N, K, q, 1.0f / s, w->type,
             where + " (" + name + " rounded to ternary values)");
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
  std::vector<int8_t> q;
  if (w->raw_type == "U8") { // four rows a byte
    const int64_t R = N;
    N = 4 * R;
    if (w->nbytes != static_cast<uint64_t>(R * K))
      return make_error(errc::corrupt_file, "{}: '{}' holds {} bytes for [{}, {}]", where, name,
                        w->nbytes, R, K);
    q.resize(static_cast<size_t>(N * K));
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const int code = (w->data[r * K + k] >> (2 * i)) & 3;
          if (code == 3)
            return make_error(errc::corrupt_file,
                              "{}: '{}' holds the code 3 (not a ternary value) at row {}", where,
                              name, r);
          q[static_cast<size_t>((i * R + r) * K + k)] = static_cast<int8_t>(code - 1);
        }
  } else if (!divides && w->supported && !is_quantized(w->type) && w->type != dtype::i8 &&
             w->type != dtype::i32) { // AutoBitLinear's unpacked ternary weights
    std::vector<float> v(static_cast<size_t>(N * K));
    to_f32(w->type, w->data, v.data(), N * K);
    q.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != -1.0f && v[i] != 0.0f && v[i] != 1.0f) { // (not ternary: times f as they are)
        for (float& x : v) x *= f;
        t.mark_consumed(sname);
        return put_floats(t, name, N, K, v, s->type, where + " (" + name + " times its scale)");
      }
      q[i] = static_cast<int8_t>(v[i]);
    }
  } else {
    return make_error(errc::unsupported,
                      "{}: '{}' must be packed ternary weights (U8) for "
                      "BitNet's {} (is {} {})",
                      where, name, divides ? "BitLinear" : "AutoBitLinear", w->raw_type,
                      w->dims.to_string());
  }
  t.mark_consumed(sname); // (in the weights now)
  return put(t, name, N, K, q, f, s->type, where + " (" + name + " unpacked, times its scale)");
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
