// quantize_weights.cpp: a shard's matrices stored in f32 / f16 / bf16 quantized to q8_0 or
// q4_0 as it loads (`--quantize`, exec_options::quantize; weights.hpp). Only matrices that
// matmuls, embedding lookups and mixtures of experts (the stacked experts) alone read are
// quantized (their kernels take every block
// format; a weight another op reads stays as published), and only where each row is whole
// 32-value blocks. Blocks follow GGUF's reference quantizer (core/convert.hpp), so a matrix
// quantized here holds the bytes llama-quantize writes for it. The published rows mapped from
// the checkpoint are released afterwards (they fault back in from the file if read again),
// and a copy the loader made (a column slice) is freed.
// Tests: tests/exec/quantize_weights_test.cpp
#include <algorithm>
#include <map>
#include <system_error>
#include <thread>
#include <vector>

#include "core/convert.hpp"
#include "core/log.hpp"
#include "exec/weights.hpp"

namespace troupe::exec {
namespace {

using graph::vid;

// Whether `v` can be quantized to `to` as it lies: a float matrix of whole blocks, of more
// than one row (a [1, C] gate, Qwen2-MoE's shared-expert one, stays as llama-quantize keeps
// its 1-D form).
bool quantizable(const tensor_view& v, dtype to) {
  return v.data && v.dims.rank == 2 && v.contiguous() && v.rows() > 1 &&
         (v.type == dtype::f32 || v.type == dtype::f16 || v.type == dtype::bf16) &&
         v.cols() % block_elems(to) == 0;
}

bool quantizable_reader(const graph::node& n) {
  return n.kind == graph::node_kind::op &&
         (n.op == kernels::op::matmul || n.op == kernels::op::matmul_swiglu ||
          n.op == kernels::op::matmul_qkv || n.op == kernels::op::embedding ||
          n.op == kernels::op::moe); // a moe's stacked experts: its matmuls over their rows
}

} // namespace

std::vector<char> block_format_readers(const graph::graph& g,
                                       const std::function<bool(graph::vid)>& can) {
  // A mixture's router (the matmul the builder names "ffn_router") stays as published, as
  // llama-quantize keeps ffn_gate_inp: the experts a token goes to must not move with it. A
  // moe's experts (gate, up, down) go together or not at all: its kernels may take one
  // format for the three.
  std::vector<char> ok(g.values.size(), 0), read(g.values.size(), 0);
  for (const auto& n : g.nodes) {
    bool router = false;
    for (vid o : n.out)
      router = router || g.values[static_cast<size_t>(o)].name.ends_with("ffn_router");
    // a moe: every expert matrix (src3..5) can be quantized; its other inputs (biases, scales,
    // Ergo's per-expert norms [E, C]) stay as they are
    const bool moe = n.kind == graph::node_kind::op && n.op == kernels::op::moe;
    auto expert_matrix = [&](size_t k) { return !moe || (k >= 3 && k <= 5); };
    bool all = true;
    if (moe)
      for (size_t k = 3; k < std::min<size_t>(n.in.size(), 6); ++k) {
        const vid v = n.in[k];
        if (v != graph::none && g[v].kind == graph::value_kind::weight && !g[v].empty &&
            g[v].dims.size() == 2 && !can(v))
          all = false;
      }
    const bool fine = quantizable_reader(n) && !router && all;
    for (size_t k = 0; k < n.in.size(); ++k) {
      const vid v = n.in[k];
      if (v == graph::none) continue;
      const auto i = static_cast<size_t>(v);
      const bool here = fine && expert_matrix(k);
      ok[i] = read[i] ? ok[i] && here : here;
      read[i] = 1;
    }
  }
  return ok;
}

expected<quantized_weights> quantize_weights(const model_source& m, graph::graph& g,
                                             loaded_weights& w, dtype to) {
  if (to != dtype::q8_0 && to != dtype::q4_0)
    return make_error(errc::unsupported, "--quantize {}: weights quantize at load to q8_0 or q4_0",
                      name(to));
  // each weight's bytes: whether every node that reads them may take a block format
  const std::vector<char> ok = block_format_readers(
      g, [&](vid v) { return quantizable(w.views[static_cast<size_t>(v)], to); });
  std::map<const void*, bool> only_matmuls;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const tensor_view& t = w.views[v];
    if (!t.data) continue;
    auto [it, fresh] = only_matmuls.emplace(t.data, ok[v] != 0);
    if (!fresh) it->second = it->second && ok[v];
  }
  auto file_of = [&](const void* p) { return m.tensors ? m.tensors->file_of(p) : nullptr; };
  quantized_weights out;
  std::map<std::pair<const void*, int64_t>, tensor_view> done; // (data, bytes) -> quantized
  for (size_t i = 0; i < w.views.size(); ++i) {
    tensor_view& v = w.views[i];
    if (!quantizable(v, to)) continue;
    const auto r = only_matmuls.find(v.data);
    if (r == only_matmuls.end() || !r->second) continue;
    const auto key = std::pair{static_cast<const void*>(v.data), v.nbytes()};
    if (auto d = done.find(key); d != done.end()) { // bytes two values read, counted once
      v = d->second;
      g.values[i].type = to;
      continue;
    }
    const int64_t rows = v.rows(), cols = v.cols();
    const int64_t rb_in = row_bytes(v.type, cols), rb_out = row_bytes(to, cols);
    TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(rows * rb_out), false));
    const auto* src = static_cast<const uint8_t*>(v.data);
    auto* dst = buf.as<uint8_t>();
    // rows split over the machine's cores (a load runs before any step: nothing else waits)
    const int64_t n_threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1,
                                                  std::max<int64_t>(1, rows / 64));
    auto part = [&](int64_t r0, int64_t r1) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t i = r0; i < r1; ++i) {
        to_f32(v.type, src + i * rb_in, row.data(), cols);
        from_f32(to, row.data(), dst + i * rb_out, cols);
      }
    };
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < n_threads; ++t) {
      try {
        pool.emplace_back(part, rows * t / n_threads, rows * (t + 1) / n_threads);
      } catch (const std::system_error&) { // no thread to be had: the rest here
        part(rows * t / n_threads, rows);
        break;
      }
    }
    part(0, rows / n_threads);
    for (auto& th : pool) th.join();
    tensor_view q(buf.data(), to, shape{rows, cols});
    ++out.matrices;
    out.published_bytes += v.nbytes();
    out.quantized_bytes += q.nbytes();
    w.resident_bytes += q.nbytes() - v.nbytes();
    // the published bytes: released from the file's mapping, or the loader's copy freed
    if (const mapped_file* f = file_of(v.data)) {
      f->release(v.data, static_cast<size_t>(v.nbytes()));
    } else {
      for (auto& b : w.owned)
        if (b.data() == v.data) b = buffer{};
    }
    w.owned.push_back(std::move(buf));
    done.emplace(key, q);
    v = q;
    g.values[i].type = to; // the kernels are chosen for what the shard now holds
  }
  if (out.matrices > 0)
    TROUPE_LOG_INFO("exec", "quantized {} matrices to {} at load: {:.3f} -> {:.3f} GB",
                    out.matrices, name(to), out.published_bytes / 1e9, out.quantized_bytes / 1e9);
  return out;
}

} // namespace troupe::exec
