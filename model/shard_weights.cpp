// shard_weights.cpp: slicing a checkpoint for one shard (shard_weights.hpp).
#include "model/shard_weights.hpp"

#include "core/convert.hpp"

namespace troupe::model {
namespace {

class loader {
 public:
  loader(const model_source& m, shard_weights& w)
      : m_(m)
      , w_(w) {}

  // Rows [a, b) zero-copy.
  expected<tensor_view> rows(const std::string& name, int64_t a, int64_t b) {
    TROUPE_TRY_ASSIGN(v, m_.tensors->rows(name, a, b));
    v = tensor_view(v.data, v.type, shape{v.dims[0], v.dims.rank > 1 ? v.dims[1] : 1});
    w_.resident_bytes += v.nbytes();
    return v;
  }
  // Columns [a, b), copied (whole tensor when the slice is the whole width).
  expected<tensor_view> cols(const std::string& name, int64_t a, int64_t b) {
    const tensor_info* t = m_.tensors->find(name);
    if (t && a == 0 && b == t->dims[1]) return rows(name, 0, t->dims[0]);
    tensor_view v;
    TROUPE_TRY_ASSIGN(buf, m_.tensors->cols(name, a, b, &v));
    w_.resident_bytes += v.nbytes();
    w_.owned.push_back(std::move(buf));
    return v;
  }
  // A 1-D vector [a, b) as f32 (converted when stored in 16 bits). Empty view when absent
  // and not required.
  expected<tensor_view> vec(const std::string& name, int64_t a, int64_t b, bool required) {
    if (!required && !m_.tensors->contains(name)) return tensor_view{};
    TROUPE_TRY_ASSIGN(full, m_.tensors->view(name));
    if (full.numel() < b)
      return make_error(errc::shape_mismatch, "tensor '{}' is shorter than {}", name, b);
    const auto* base = static_cast<const uint8_t*>(full.data) + row_bytes(full.type, a);
    if (full.type == dtype::f32) {
      w_.resident_bytes += (b - a) * 4;
      return tensor_view(const_cast<uint8_t*>(base), dtype::f32, shape{b - a});
    }
    if (is_quantized(full.type))
      return make_error(errc::unsupported,
                        "tensor '{}' is quantized; norms and biases must be f32/f16/bf16", name);
    TROUPE_TRY_ASSIGN(buf, buffer::allocate((b - a) * 4));
    to_f32(full.type, base, buf.as<float>(), b - a);
    tensor_view v(buf.data(), dtype::f32, shape{b - a});
    w_.resident_bytes += (b - a) * 4;
    w_.owned.push_back(std::move(buf));
    return v;
  }

 private:
  const model_source& m_;
  shard_weights& w_;
};

} // namespace

expected<std::unique_ptr<shard_weights>> load_shard_weights(std::shared_ptr<const model_source> m,
                                                            const shard_spec& spec_in) {
  const model_config& c = m->config;
  auto w = std::make_unique<shard_weights>();
  w->source = m;
  w->spec = spec_in;
  if (spec_in.layer_begin < 0 || spec_in.layer_end > c.n_layer ||
      spec_in.layer_begin >= spec_in.layer_end)
    return make_error(errc::invalid_argument, "layers [{}, {}) outside the model's {}",
                      spec_in.layer_begin, spec_in.layer_end, c.n_layer);
  // FFN boundaries must not split a quantization block of the down projection
  if (const tensor_info* down =
          m->tensors->find(weight_names::layer(c.names.w_down, spec_in.layer_begin)))
    w->spec.ffn_block = block_elems(down->type);
  TROUPE_TRY_ASSIGN(d, plan_shard(c, w->spec));
  w->dims = d;
  loader ld(*m, *w);
  const auto& n = c.names;
  const int64_t D = c.D;
  for (int i = spec_in.layer_begin; i < spec_in.layer_end; ++i) {
    auto L = [i](const std::string& p) { return weight_names::layer(p, i); };
    layer_weights lw;
    TROUPE_TRY_ASSIGN(an, ld.vec(L(n.attn_norm), 0, c.C, true));
    TROUPE_TRY_ASSIGN(wq, ld.rows(L(n.wq), d.h0 * D, (d.h0 + d.Hs) * D));
    TROUPE_TRY_ASSIGN(wk, ld.rows(L(n.wk), d.kv0 * D, (d.kv0 + d.Hkv_s) * D));
    TROUPE_TRY_ASSIGN(wv, ld.rows(L(n.wv), d.kv0 * D, (d.kv0 + d.Hkv_s) * D));
    TROUPE_TRY_ASSIGN(wo, ld.cols(L(n.wo), d.h0 * D, (d.h0 + d.Hs) * D));
    TROUPE_TRY_ASSIGN(bq, ld.vec(L(n.bq), d.h0 * D, (d.h0 + d.Hs) * D, c.qkv_bias));
    TROUPE_TRY_ASSIGN(bk, ld.vec(L(n.bk), d.kv0 * D, (d.kv0 + d.Hkv_s) * D, c.qkv_bias));
    TROUPE_TRY_ASSIGN(bv, ld.vec(L(n.bv), d.kv0 * D, (d.kv0 + d.Hkv_s) * D, c.qkv_bias));
    TROUPE_TRY_ASSIGN(fn, ld.vec(L(n.ffn_norm), 0, c.C, true));
    TROUPE_TRY_ASSIGN(wg, ld.rows(L(n.w_gate), d.f0, d.f0 + d.Fs));
    TROUPE_TRY_ASSIGN(wu, ld.rows(L(n.w_up), d.f0, d.f0 + d.Fs));
    TROUPE_TRY_ASSIGN(wd, ld.cols(L(n.w_down), d.f0, d.f0 + d.Fs));
    lw.attn_norm = an, lw.wq = wq, lw.wk = wk, lw.wv = wv, lw.wo = wo;
    lw.bq = bq, lw.bk = bk, lw.bv = bv;
    lw.ffn_norm = fn, lw.w_gate = wg, lw.w_up = wu, lw.w_down = wd;
    if (c.o_bias && spec_in.tp_rank == 0) {
      TROUPE_TRY_ASSIGN(bo, ld.vec(L(n.bo), 0, c.C, true));
      lw.bo = bo;
    }
    w->layers.push_back(lw);
  }
  if (spec_in.first_stage) {
    TROUPE_TRY_ASSIGN(e, ld.rows(n.tok_embd, d.v0, d.v0 + d.Vs));
    w->tok_embd = e;
  }
  if (spec_in.last_stage) {
    TROUPE_TRY_ASSIGN(on, ld.vec(n.output_norm, 0, c.C, true));
    w->output_norm = on;
    const std::string& out_name = c.tie_embeddings ? n.tok_embd : n.output;
    if (c.tie_embeddings && spec_in.first_stage) {
      w->output = w->tok_embd; // same bytes: counted once
    } else {
      TROUPE_TRY_ASSIGN(o, ld.rows(out_name, d.v0, d.v0 + d.Vs));
      w->output = o;
    }
  }
  return w;
}

} // namespace troupe::model
