// shard_runner.cpp: the forward pass of one shard (shard_runner.hpp).
#include "model/shard_runner.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/device.hpp"

namespace troupe::model {

using kernels::op;
using kernels::op_args;

expected<std::unique_ptr<shard_runner>> shard_runner::create(std::shared_ptr<const model_source> m,
                                                             const shard_spec& spec,
                                                             const runner_options& opt,
                                                             collective* comm) {
  if (opt.where != kernels::backend::cpu && opt.where != kernels::backend::ref)
    return make_error(errc::unsupported, "shard runner: backend {} is not wired yet",
                      kernels::to_string(opt.where));
  if (m->config.mlp_bias)
    return make_error(errc::unsupported, "{}: MLP biases are not supported", m->path);
  if (opt.block_size <= 0 || opt.kv_blocks < 2)
    return make_error(errc::invalid_argument,
                      "KV arena needs a positive block size and at least 2 blocks");
  std::unique_ptr<shard_runner> r(new shard_runner());
  r->opt_ = opt;
  r->comm_ = comm;
  r->reg_ = &kernels::registry::global();
  TROUPE_TRY_ASSIGN(w, load_shard_weights(std::move(m), spec));
  r->w_ = std::move(w);
  if (comm && comm->size() != spec.tp_size)
    return make_error(errc::invalid_argument, "collective of size {} for TP {}", comm->size(),
                      spec.tp_size);
  r->pool_ = std::make_unique<thread_pool>(opt.threads, opt.cpus);
  const auto& c = r->config();
  const int64_t layers = spec.layer_end - spec.layer_begin;
  r->kv_layer_bytes_ =
      row_bytes(opt.kv_dtype, opt.kv_blocks * opt.block_size * r->w_->dims.Hkv_s * c.D);
  // not zeroed: attention only reads positions a step has written, and untouched pages cost nothing
  TROUPE_TRY_ASSIGN(kv,
                    buffer::allocate(static_cast<size_t>(2 * layers * r->kv_layer_bytes_), false));
  r->kv_ = std::move(kv);
  // every matmul a norm feeds takes quantized weights: the norm may quantize for them
  bool quantized = !r->w_->layers.empty() && c.C % qk == 0;
  for (const auto& L : r->w_->layers)
    for (const tensor_view* t : {&L.wq, &L.wk, &L.wv, &L.w_up, &L.w_gate})
      if (t->data && !is_quantized(t->type)) quantized = false;
  r->norm_inputs_quantized_ = quantized;
  return r;
}

shard_runner::~shard_runner() = default;

tensor_view shard_runner::k_cache(int layer) const {
  const auto& d = w_->dims;
  return tensor_view(kv_.as<uint8_t>() + (2 * layer) * kv_layer_bytes_, opt_.kv_dtype,
                     shape{opt_.kv_blocks, opt_.block_size, d.Hkv_s, config().D});
}

tensor_view shard_runner::v_cache(int layer) const {
  const auto& d = w_->dims;
  return tensor_view(kv_.as<uint8_t>() + (2 * layer + 1) * kv_layer_bytes_, opt_.kv_dtype,
                     shape{opt_.kv_blocks, opt_.block_size, d.Hkv_s, config().D});
}

status shard_runner::exec(op_args& a) {
  const auto key = std::make_tuple(static_cast<int>(a.kind), static_cast<int>(a.src[0].type),
                                   static_cast<int>(a.src[1].type), static_cast<int>(a.dst.type));
  auto it = kernels_.find(key);
  if (it == kernels_.end()) {
    auto k = reg_->find(opt_.where, a);
    if (!k)
      return make_error(errc::unsupported, "no {} kernel for {} ({} x {})",
                        kernels::to_string(opt_.where), kernels::to_string(a.kind),
                        name(a.src[0].type), name(a.src[1].type));
    it = kernels_.emplace(key, std::move(*k)).first;
  }
  kernels::exec_ctx ctx;
  ctx.pool = pool_.get();
  return it->second(a, ctx);
}

bool shard_runner::q8_activations(int64_t T) {
  if (!norm_inputs_quantized_) return false;
  if (auto it = q8x_.find(T); it != q8x_.end()) return it->second;
  // ask the backend whether its matmuls take q8_0 activations for T tokens of these weights
  const layer_weights& L = w_->layers.front();
  static uint8_t probe[1];
  op_args a;
  a.kind = op::matmul;
  a.src[0] = tensor_view(probe, dtype::q8_0, shape{T, config().C});
  a.src[1] = L.wq;
  a.dst = tensor_view(probe, dtype::f32, shape{T, L.wq.rows()});
  bool ok = static_cast<bool>(reg_->find(opt_.where, a, kernels::lookup::native_only));
  a.kind = op::matmul_swiglu;
  a.src[1] = L.w_gate;
  a.src[2] = L.w_up;
  a.dst = tensor_view(probe, dtype::f32, shape{T, L.w_gate.rows()});
  ok = ok && (!config().gated_ffn ||
              static_cast<bool>(reg_->find(opt_.where, a, kernels::lookup::native_only)));
  q8x_.emplace(T, ok);
  return ok;
}

status shard_runner::check_batch(const batch& b) const {
  const int64_t T = b.n_tokens();
  const int64_t P = opt_.block_size;
  int64_t covered = 0;
  for (const auto& s : b.seqs) {
    if (s.count <= 0 || s.begin != covered || s.begin + s.count > T || s.pos0 < 0)
      return make_error(errc::invalid_argument, "batch: sequence {} covers tokens [{}, {}) of {}",
                        s.seq_id, s.begin, s.begin + s.count, T);
    if (s.score_rows < 0 || s.score_rows > s.count - (s.logits ? 1 : 0))
      return make_error(errc::invalid_argument, "sequence {}: {} scored rows of {} tokens",
                        s.seq_id, s.score_rows, s.count);
    if (s.pos0 + s.count > config().ctx)
      return make_error(errc::out_of_range, "sequence {} reaches position {} past the context {}",
                        s.seq_id, s.pos0 + s.count, config().ctx);
    const int64_t need = (s.pos0 + s.count + P - 1) / P;
    if (static_cast<int64_t>(s.blocks.size()) < need)
      return make_error(errc::invalid_argument, "sequence {} has {} blocks for {} positions",
                        s.seq_id, s.blocks.size(), s.pos0 + s.count);
    // with a sliding window on every layer, blocks wholly before the first query's window
    // are never read and may have been freed (block id 0)
    const int64_t W = config().kv_horizon();
    const int64_t seen = W > 0 ? std::max<int64_t>(0, s.pos0 - W + 1) / P : 0;
    for (int64_t i = 0; i < seen; ++i)
      if (s.blocks[i] < 0 || s.blocks[i] >= opt_.kv_blocks)
        return make_error(errc::out_of_range, "sequence {}: block id {} outside [0, {})", s.seq_id,
                          s.blocks[i], opt_.kv_blocks);
    for (int64_t i = seen; i < need; ++i)
      if (s.blocks[i] <= 0 || s.blocks[i] >= opt_.kv_blocks)
        return make_error(errc::out_of_range, "sequence {}: block id {} outside [1, {})", s.seq_id,
                          s.blocks[i], opt_.kv_blocks);
    covered += s.count;
  }
  if (covered != T)
    return make_error(errc::invalid_argument, "batch: sequences cover {} of {} tokens", covered, T);
  for (int32_t t : b.tokens)
    if (t < 0 || t >= config().V)
      return make_error(errc::out_of_range, "token id {} outside the vocabulary", t);
  return {};
}

status shard_runner::forward(const batch& b, std::vector<float>& x, std::vector<float>* logits) {
  TROUPE_TRY(check_batch(b));
  const model_config& c = config();
  const shard_spec& spec = w_->spec;
  const shard_dims& d = w_->dims;
  const int64_t T = b.n_tokens(), C = c.C, D = c.D, P = opt_.block_size;
  if (T == 0) return {};
  // copy-on-write: blocks that sequences stopped sharing get their own copy before writing
  const int64_t block_bytes = row_bytes(opt_.kv_dtype, P * d.Hkv_s * D);
  for (auto [src, dst] : b.copies) {
    if (src <= 0 || dst <= 0 || src >= opt_.kv_blocks || dst >= opt_.kv_blocks)
      return make_error(errc::out_of_range, "KV copy {} -> {} outside [1, {})", src, dst,
                        opt_.kv_blocks);
    for (size_t li = 0; li < w_->layers.size(); ++li) {
      for (const tensor_view& cache :
           {k_cache(static_cast<int>(li)), v_cache(static_cast<int>(li))}) {
        auto* base = static_cast<uint8_t*>(cache.data);
        std::memcpy(base + dst * block_bytes, base + src * block_bytes, block_bytes);
      }
    }
  }
  const int64_t qn = d.Hs * D, kn = d.Hkv_s * D;
  auto grow = [](auto& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) < n) v.resize(n);
  };
  grow(h_, T * C), grow(q_, T * qn), grow(k_, T * kn), grow(v_, T * kn), grow(attn_, T * qn);
  grow(o_, T * C), grow(g_, T * d.Fs), grow(u_, T * d.Fs);
  // positions, KV slots and the per-sequence table for paged attention
  pos_.resize(T);
  slots_.resize(T);
  size_t max_blocks = 0;
  for (const auto& s : b.seqs) max_blocks = std::max(max_blocks, s.blocks.size());
  const int64_t cols = 3 + static_cast<int64_t>(max_blocks);
  seqinfo_.assign(b.seqs.size() * cols, 0);
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const auto& s = b.seqs[si];
    for (int32_t i = 0; i < s.count; ++i) {
      const int32_t p = s.pos0 + i;
      pos_[s.begin + i] = p;
      slots_[s.begin + i] = s.blocks[p / P] * static_cast<int32_t>(P) + p % static_cast<int32_t>(P);
    }
    int32_t* row = seqinfo_.data() + si * cols;
    row[0] = s.begin, row[1] = s.count, row[2] = s.pos0;
    std::copy(s.blocks.begin(), s.blocks.end(), row + 3);
  }
  auto view = [](std::vector<float>& v, shape s) { return tensor_view(v.data(), dtype::f32, s); };
  auto ivec = [](std::vector<int32_t>& v, shape s) { return tensor_view(v.data(), dtype::i32, s); };
  auto run = [&](op kind, tensor_view dst, tensor_view s0, tensor_view s1 = {}, tensor_view s2 = {},
                 tensor_view s3 = {}) -> status {
    op_args a;
    a.kind = kind;
    a.dst = dst;
    a.src = {s0, s1, s2, s3};
    a.p.eps = static_cast<float>(c.norm_eps);
    a.p.rope = c.rope;
    a.p.scale = static_cast<float>(c.attention_scale());
    a.p.block_size = static_cast<int>(P);
    return exec(a);
  };
  auto all_reduce = [&](std::vector<float>& v, int64_t n) -> status {
    if (spec.tp_size == 1) return {};
    if (!comm_) return make_error(errc::internal, "TP {} shard without a collective", spec.tp_size);
    return comm_->all_reduce_sum(v.data(), n);
  };

  if (spec.first_stage) {
    x.resize(T * C);
    ids_.resize(T);
    for (int64_t t = 0; t < T; ++t) {
      const int32_t id = b.tokens[t];
      ids_[t] = id >= d.v0 && id < d.v0 + d.Vs ? static_cast<int32_t>(id - d.v0)
                                               : -1; // others: zero rows
    }
    TROUPE_TRY(run(op::embedding, view(x, {T, C}), w_->tok_embd, ivec(ids_, {T})));
    TROUPE_TRY(all_reduce(x, T * C));
  } else if (static_cast<int64_t>(x.size()) != T * C) {
    return make_error(errc::shape_mismatch, "stage input has {} values for [{}, {}]", x.size(), T,
                      C);
  }

  const bool fuse = opt_.fuse;
  // the norms feed the QKV and gate/up matmuls: in f32, or (fused) already quantized to
  // q8_0 when this backend's matmul takes int8 activations for a step of T tokens
  const bool q8x = fuse && q8_activations(T);
  if (q8x) grow(hq_, T * row_bytes(dtype::q8_0, C));
  const tensor_view X = view(x, {T, C});
  const tensor_view Hb = q8x ? tensor_view(hq_.data(), dtype::q8_0, shape{T, C}) : view(h_, {T, C});
  // residual add, then the norm the next sublayer wants (none after the last layer)
  auto add_norm = [&](const tensor_view& R, const tensor_view* w) -> status {
    if (!w) return run(op::add, X, X, R);
    if (!fuse) {
      TROUPE_TRY(run(op::add, X, X, R));
      return run(op::rmsnorm, Hb, X, *w);
    }
    op_args a;
    a.kind = op::add_rmsnorm;
    a.dst = Hb;
    a.dst2 = X;
    a.src = {X, R, *w, {}};
    a.p.eps = static_cast<float>(c.norm_eps);
    return exec(a);
  };
  if (!w_->layers.empty()) TROUPE_TRY(run(op::rmsnorm, Hb, X, w_->layers[0].attn_norm));
  for (size_t li = 0; li < w_->layers.size(); ++li) {
    const layer_weights& L = w_->layers[li];
    const int layer = static_cast<int>(li);
    const tensor_view Q = view(q_, {T, qn}), K = view(k_, {T, kn}), V = view(v_, {T, kn});
    TROUPE_TRY(run(op::matmul, Q, Hb, L.wq, L.bq));
    TROUPE_TRY(run(op::matmul, K, Hb, L.wk, L.bk));
    TROUPE_TRY(run(op::matmul, V, Hb, L.wv, L.bv));
    const tensor_view Q3 = view(q_, {T, d.Hs, D}), K3 = view(k_, {T, d.Hkv_s, D});
    TROUPE_TRY(run(op::rope, Q3, Q3, ivec(pos_, {T})));
    if (fuse) {
      TROUPE_TRY(run(op::rope_kv_store, k_cache(layer), K3, ivec(pos_, {T}), ivec(slots_, {T})));
    } else {
      TROUPE_TRY(run(op::rope, K3, K3, ivec(pos_, {T})));
      TROUPE_TRY(run(op::kv_store, k_cache(layer), K3, ivec(slots_, {T})));
    }
    TROUPE_TRY(run(op::kv_store, v_cache(layer), view(v_, {T, d.Hkv_s, D}), ivec(slots_, {T})));
    const tensor_view A3 = view(attn_, {T, d.Hs, D});
    {
      op_args a;
      a.kind = op::paged_attention;
      a.dst = A3;
      a.src = {Q3, k_cache(layer), v_cache(layer),
               ivec(seqinfo_, {static_cast<int64_t>(b.seqs.size()), cols})};
      a.p.scale = static_cast<float>(c.attention_scale());
      a.p.block_size = static_cast<int>(P);
      a.p.window = c.layer_window(spec.layer_begin + layer);
      TROUPE_TRY(exec(a));
    }
    const tensor_view O = view(o_, {T, C});
    TROUPE_TRY(run(op::matmul, O, view(attn_, {T, qn}), L.wo));
    TROUPE_TRY(all_reduce(o_, T * C));
    if (L.bo.data) TROUPE_TRY(run(op::add, O, O, tensor_view(L.bo.data, dtype::f32, shape{1, C})));
    TROUPE_TRY(add_norm(O, &L.ffn_norm));

    const tensor_view G = view(g_, {T, d.Fs}), U = view(u_, {T, d.Fs});
    if (c.gated_ffn && c.act == act_kind::silu && fuse) {
      TROUPE_TRY(run(op::matmul_swiglu, G, Hb, L.w_gate, L.w_up));
    } else if (c.gated_ffn) {
      TROUPE_TRY(run(op::matmul, U, Hb, L.w_up));
      TROUPE_TRY(run(op::matmul, G, Hb, L.w_gate));
      if (c.act == act_kind::silu) {
        TROUPE_TRY(run(op::swiglu, G, G, U));
      } else {
        TROUPE_TRY(run(c.act == act_kind::gelu_tanh ? op::gelu_tanh : op::gelu_erf, G, G));
        TROUPE_TRY(run(op::mul, G, G, U));
      }
    } else {
      TROUPE_TRY(run(op::matmul, U, Hb, L.w_up));
      TROUPE_TRY(run(c.act == act_kind::silu        ? op::silu
                     : c.act == act_kind::gelu_tanh ? op::gelu_tanh
                                                    : op::gelu_erf,
                     G, U));
    }
    TROUPE_TRY(run(op::matmul, O, G, L.w_down));
    TROUPE_TRY(all_reduce(o_, T * C));
    TROUPE_TRY(add_norm(O, li + 1 < w_->layers.size() ? &w_->layers[li + 1].attn_norm : nullptr));
  }

  if (spec.last_stage && logits) {
    const int64_t n = b.n_logits();
    logits->clear();
    if (n == 0) return {};
    grow(xs_, n * C);
    int64_t r = 0;
    for (const auto& s : b.seqs) {
      for (int32_t i = 0; i < s.score_rows; ++i, ++r) // prompt scoring: the chunk's first rows
        std::memcpy(xs_.data() + r * C, x.data() + (s.begin + i) * C, C * sizeof(float));
      if (!s.logits) continue;
      std::memcpy(xs_.data() + r * C, x.data() + (s.begin + s.count - 1) * C, C * sizeof(float));
      ++r;
    }
    const tensor_view XS = view(xs_, {n, C});
    TROUPE_TRY(run(op::rmsnorm, XS, XS, w_->output_norm));
    grow(lg_, n * d.Vs);
    TROUPE_TRY(run(op::matmul, view(lg_, {n, d.Vs}), XS, w_->output));
    logits->resize(n * c.V);
    if (spec.tp_size == 1) {
      std::memcpy(logits->data(), lg_.data(), n * c.V * sizeof(float));
    } else {
      // gather every rank's [n, Vs_r] block, then interleave into rows of V
      std::vector<int64_t> counts(spec.tp_size);
      for (int rr = 0; rr < spec.tp_size; ++rr) {
        shard_spec other = spec;
        other.tp_rank = rr;
        TROUPE_TRY_ASSIGN(od, plan_shard(c, other));
        counts[rr] = n * od.Vs;
      }
      grow(lg_all_, n * c.V);
      TROUPE_TRY(comm_->all_gather(lg_.data(), lg_all_.data(), counts));
      int64_t base = 0, v0 = 0;
      for (int rr = 0; rr < spec.tp_size; ++rr) {
        const int64_t vs = counts[rr] / n;
        for (int64_t i = 0; i < n; ++i)
          std::memcpy(logits->data() + i * c.V + v0, lg_all_.data() + base + i * vs,
                      vs * sizeof(float));
        base += counts[rr];
        v0 += vs;
      }
    }
  }
  return {};
}

} // namespace troupe::model
