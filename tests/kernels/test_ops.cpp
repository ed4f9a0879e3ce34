// test_ops.cpp: the op harness (`test-ops`), after ggml's test-backend-ops. Every case of
// op_cases.cpp runs on the reference backend and on every other backend present; outputs are
// compared with a per-dtype tolerance (normalised squared error and max abs), and 64 guard
// bytes after each output must come back untouched. Unsupported cases are listed as skipped,
// never failed.
//   test-ops [test|perf|support] [--op NAME] [--backend ref|cpu|cuda] [--composed]
//            [--threads N]
// test: exit 1 on any failure. perf: µs per call, GB/s and GFLOP/s from the case's counts.
// support: which kernel (native or composed) each backend would run. --composed forces the
// composite fallback (registry.hpp) so its results are checked against the reference.
// Exit 77 (ctest's skip) when --backend names a backend absent here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "core/convert.hpp"
#include "core/thread_pool.hpp"
#include "kernels/device.hpp"
#include "kernels/precision.hpp"
#include "kernels/registry.hpp"
#include "op_cases.hpp"

using namespace troupe;
using namespace troupe::kernels;
using namespace troupe::kernels::harness;

namespace {

constexpr size_t guard_bytes = 64;
constexpr uint8_t guard_value = 0xA5;

struct options {
  std::string mode = "test";
  std::string op_filter;
  std::vector<backend> backends;
  bool composed = false;
  int threads = 1;
};

struct run_result {
  bool ran = false;
  std::string kernel_name;
  std::string failure; // empty when fine
  std::vector<uint8_t> dst, dst2, dst3;
  double seconds_per_call = 0;
};

// The case's tolerance on backend b. The GPU's tensor-core GEMMs (bf16 weights, 16+
// tokens) round each activation to the weights' type unless exact activations were asked for
// (TROUPE_EXACT_ACTIVATIONS=1: ops.cuda_exact checks that path at the case's own tolerance):
// the error of one bf16 rounding per activation, nmse about 1.3e-6. Prefill attention from a
// 16-bit cache likewise rounds q and the probabilities on the tensor cores.
tolerance tolerance_on(backend b, const op_case& c) {
  tolerance t = c.tol;
  const bool gemm_op =
      c.kind == op::matmul || c.kind == op::matmul_swiglu || c.kind == op::matmul_qkv;
  if (b == backend::cuda && gemm_op && !exact_activations() && c.src.size() > 1 &&
      c.src[1].type == dtype::bf16 && c.src[0].present && c.src[0].dims[0] >= 16) {
    t.nmse = std::max(t.nmse, 1e-5);
    t.max_abs = std::max(t.max_abs, 5e-2);
  }
  // prefill attention from a 16-bit cache on the tensor cores rounds q and the probabilities
  // to the cache's type: an error of a few bf16 roundings per output
  const bool attention_op = c.kind == op::attention || c.kind == op::paged_attention;
  if (b == backend::cuda && attention_op && !exact_activations() && c.src.size() > 1 &&
      (c.src[1].type == dtype::bf16 || c.src[1].type == dtype::f16) && c.src[0].dims[0] >= 16) {
    t.nmse = std::max(t.nmse, 1e-4);
    t.max_abs = std::max(t.max_abs, 5e-2);
  }
  return t;
}

// Runs one case on one backend: uploads inputs, runs (repeatedly for perf), downloads outputs
// and checks the guards.
run_result run_case(const op_case& c, backend b, const options& opt, thread_pool& pool, bool perf) {
  run_result r;
  device* dev = get_device(b);
  if (!dev) {
    r.failure = "device absent";
    return r;
  }
  std::vector<device_buffer> keep;
  auto upload = [&](const host_tensor& h, size_t extra) -> expected<tensor_view> {
    const size_t n = h.bytes.size();
    TROUPE_TRY_ASSIGN(buf, device_buffer::allocate(*dev, n + extra));
    std::vector<uint8_t> staged(h.bytes);
    staged.resize(n + extra, guard_value);
    TROUPE_TRY(dev->upload(buf.data(), staged.data(), staged.size()));
    tensor_view v(buf.data(), h.type, h.dims);
    keep.push_back(std::move(buf));
    return v;
  };
  op_args a;
  a.kind = c.kind;
  a.p = c.p;
  for (size_t i = 0; i < c.src.size() && i < a.src.size(); ++i) {
    if (!c.src[i].present) continue;
    auto v = upload(c.src[i], 0);
    if (!v) return r.failure = v.error().to_string(), r;
    a.src[i] = *v;
  }
  auto d = upload(c.dst, guard_bytes);
  if (!d) return r.failure = d.error().to_string(), r;
  a.dst = *d;
  if (c.dst2.present) {
    auto d2 = upload(c.dst2, guard_bytes);
    if (!d2) return r.failure = d2.error().to_string(), r;
    a.dst2 = *d2;
  }
  if (c.dst3.present) {
    auto d3 = upload(c.dst3, guard_bytes);
    if (!d3) return r.failure = d3.error().to_string(), r;
    a.dst3 = *d3;
  }
  if (auto st = check_args(a); !st) return r.failure = st.error().to_string(), r;
  const lookup mode = opt.composed && b != backend::ref ? lookup::composed_only : lookup::any;
  auto k = registry::global().find(b, a, mode);
  if (!k) return r; // unsupported: not run
  r.kernel_name = k->name;
  exec_ctx ctx;
  ctx.pool = &pool;
  if (auto st = (*k)(a, ctx); !st) return r.failure = "kernel failed: " + st.error().to_string(), r;
  if (auto st = dev->synchronize(); !st) return r.failure = st.error().to_string(), r;
  r.ran = true;
  if (perf) {
    using clock = std::chrono::steady_clock;
    int calls = 0;
    auto t0 = clock::now();
    double elapsed = 0;
    while (calls < 3 || elapsed < 0.25) {
      (void)(*k)(a, ctx);
      (void)dev->synchronize();
      ++calls;
      elapsed = std::chrono::duration<double>(clock::now() - t0).count();
    }
    r.seconds_per_call = elapsed / calls;
  }
  auto fetch = [&](const tensor_view& v, const host_tensor& h, std::vector<uint8_t>& outb) {
    std::vector<uint8_t> all(h.bytes.size() + guard_bytes);
    if (auto st = dev->download(all.data(), v.data, all.size()); !st) {
      r.failure = st.error().to_string();
      return;
    }
    for (size_t i = h.bytes.size(); i < all.size(); ++i) {
      if (all[i] != guard_value) {
        r.failure =
            fmt::format("guard byte {} past the output was overwritten", i - h.bytes.size());
        break;
      }
    }
    all.resize(h.bytes.size());
    outb = std::move(all);
  };
  fetch(a.dst, c.dst, r.dst);
  if (c.dst2.present) fetch(a.dst2, c.dst2, r.dst2);
  if (c.dst3.present) fetch(a.dst3, c.dst3, r.dst3);
  return r;
}

std::vector<float> as_f32(const host_tensor& like, const std::vector<uint8_t>& bytes) {
  std::vector<float> v(like.dims.numel());
  if (like.type == dtype::i32) {
    for (size_t i = 0; i < v.size(); ++i) {
      int32_t x;
      std::memcpy(&x, bytes.data() + 4 * i, 4);
      v[i] = static_cast<float>(x);
    }
  } else {
    to_f32(like.type, bytes.data(), v.data(), static_cast<int64_t>(v.size()));
  }
  return v;
}

// Empty string when `got` is within tolerance of `want`; else what is wrong.
std::string compare(const host_tensor& like, const std::vector<uint8_t>& got,
                    const std::vector<uint8_t>& want, const tolerance& tol, std::string& stats) {
  const auto g = as_f32(like, got), w = as_f32(like, want);
  double err = 0, ref = 0, max_abs = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) != std::isnan(w[i])) return fmt::format("NaN mismatch at {}", i);
    const double diff = static_cast<double>(g[i]) - w[i];
    err += diff * diff;
    ref += static_cast<double>(w[i]) * w[i];
    max_abs = std::max(max_abs, std::fabs(diff));
  }
  const double nmse = ref > 0 ? err / ref : err;
  stats = fmt::format("nmse={:.2e} max_abs={:.2e}", nmse, max_abs);
  if (nmse > tol.nmse || max_abs > tol.max_abs) {
    std::string where; // the first value that differs, and for block formats its block's bytes
    for (size_t i = 0; i < g.size() && where.empty(); ++i)
      if (std::fabs(static_cast<double>(g[i]) - w[i]) > tol.max_abs) {
        where = fmt::format("; first at {}: {} (want {})", i, g[i], w[i]);
        const int64_t vals = block_elems(like.type);
        if (vals > 1) {
          const size_t bb = static_cast<size_t>(row_bytes(like.type, vals)),
                       at = i / static_cast<size_t>(vals) * bb;
          where += fmt::format(", block bytes got {:02x} want {:02x}",
                               fmt::join(got.begin() + at, got.begin() + at + bb, " "),
                               fmt::join(want.begin() + at, want.begin() + at + bb, " "));
        }
      }
    return fmt::format("{} exceeds nmse<={:.0e} max_abs<={:.0e}{}", stats, tol.nmse, tol.max_abs,
                       where);
  }
  return {};
}

bool parse(int argc, char** argv, options& opt) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "test" || a == "perf" || a == "support")
      opt.mode = a;
    else if (a == "--op")
      opt.op_filter = next();
    else if (a == "--composed")
      opt.composed = true;
    else if (a == "--threads")
      opt.threads = std::max(1, std::atoi(next().c_str()));
    else if (a == "--backend") {
      std::string n = next();
      backend b = n == "ref"    ? backend::ref
                  : n == "cpu"  ? backend::cpu
                  : n == "cuda" ? backend::cuda
                                : backend::ref;
      if (n != "ref" && n != "cpu" && n != "cuda") {
        fmt::print(stderr, "unknown backend '{}'\n", n);
        return false;
      }
      opt.backends.push_back(b);
    } else {
      fmt::print(stderr, "usage: test-ops [test|perf|support] [--op NAME] [--backend B] "
                         "[--composed] [--threads N]\n");
      return false;
    }
  }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  options opt;
  if (!parse(argc, argv, opt)) return 2;
  std::vector<backend> present;
  for (backend b : {backend::ref, backend::cpu, backend::cuda})
    if (get_device(b)) present.push_back(b);
  if (opt.backends.empty()) {
    for (backend b : present)
      if (b != backend::ref || opt.mode != "test") opt.backends.push_back(b);
  }
  for (backend b : opt.backends) {
    if (!get_device(b)) {
      fmt::print("backend {} is not present here (no GPU or built without it): skipped\n",
                 to_string(b));
      return 77;
    }
  }
  thread_pool pool(opt.threads);
  int ok = 0, failed = 0, skipped = 0;
  for (const auto& c : all_cases()) {
    if (!opt.op_filter.empty() && c.name.find(opt.op_filter) == std::string::npos) continue;
    run_result want;
    if (opt.mode == "test") {
      want = run_case(c, backend::ref, opt, pool, false);
      if (!want.ran || !want.failure.empty()) {
        fmt::print("FAIL ref  {}: {}\n", c.name, want.ran ? want.failure : "reference missing");
        ++failed;
        continue;
      }
    }
    for (backend b : opt.backends) {
      if (opt.mode == "support") {
        run_result r = run_case(c, b, opt, pool, false);
        fmt::print("{:<5} {:<58} {}\n", to_string(b), c.name, r.ran ? r.kernel_name : "-");
        continue;
      }
      run_result r = run_case(c, b, opt, pool, opt.mode == "perf");
      if (!r.ran && r.failure.empty()) {
        fmt::print("SKIP {:<5} {} (unsupported)\n", to_string(b), c.name);
        ++skipped;
        continue;
      }
      if (!r.failure.empty()) {
        fmt::print("FAIL {:<5} {}: {}\n", to_string(b), c.name, r.failure);
        ++failed;
        continue;
      }
      if (opt.mode == "perf") {
        const double us = r.seconds_per_call * 1e6;
        fmt::print("{:<5} {:<58} {:>10.2f} us  {:>8.2f} GB/s  {:>8.2f} GFLOP/s  [{}]\n",
                   to_string(b), c.name, us, c.bytes / r.seconds_per_call / 1e9,
                   c.flops / r.seconds_per_call / 1e9, r.kernel_name);
        continue;
      }
      std::string stats;
      const tolerance tol = tolerance_on(b, c);
      std::string why = compare(c.dst, r.dst, want.dst, tol, stats);
      if (why.empty() && c.dst2.present) why = compare(c.dst2, r.dst2, want.dst2, tol, stats);
      if (why.empty() && c.dst3.present) why = compare(c.dst3, r.dst3, want.dst3, tol, stats);
      if (!why.empty()) {
        fmt::print("FAIL {:<5} {} [{}]: {}\n", to_string(b), c.name, r.kernel_name, why);
        ++failed;
      } else {
        fmt::print("OK   {:<5} {:<58} {} [{}]\n", to_string(b), c.name, stats, r.kernel_name);
        ++ok;
      }
    }
  }
  if (opt.mode == "test")
    fmt::print("\n{} passed, {} failed, {} skipped (unsupported)\n", ok, failed, skipped);
  return failed ? 1 : 0;
}
