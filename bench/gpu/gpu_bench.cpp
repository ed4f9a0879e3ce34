// gpu_bench.cpp: decode and prefill of one model on one GPU, as one JSON line: the single
// shard of exec::generator on cuda:N (CUDA graphs for decode), the weight bytes a decode step
// streams, the device's measured copy bandwidth, and the FLOPs of a prefill token. It needs
// only the executor (no actors), so the GPU check builds it on a machine without Troupe's
// packages (TROUPE_GPU_ONLY). bench/gpu/check.sh runs it; bench/gpu/table.py turns its lines
// into the table of bench/README.md against the part's HBM bandwidth and bf16 peak.
//   gpu_bench MODEL [--device N|cpu] [--prompt-tokens P] [--gen-tokens G] [--repeats R]
//             [--kv-dtype f32|f16|bf16] [--profile 1]
// MODEL may be synth:PRESET:DTYPE (synth:llama-1b:bf16): the synthetic model is written to
// /tmp/troupe-gpu first (once), with the vocabulary its preset needs from models/. --profile 1
// runs once more with every node timed (synchronised, graphs off), a JSON line per kernel.
//   gpu_bench kernels [--device N]
// times the weight matmul kernels alone on 8192 x 8192 weights (the decode GEMV: GB/s; the
// prefill GEMM: TFLOP/s, with rounded and with exact activations) and decode attention over
// a 4096-token bf16 cache, one JSON line each.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../bench_util.hpp"
#include "arch/synth.hpp"
#include "core/convert.hpp"
#include "exec/generator.hpp"
#include "kernels/device.hpp"
#include "kernels/precision.hpp"
#include "kernels/registry.hpp"

using namespace troupe;

namespace {

int usage() {
  std::fprintf(stderr, "usage: gpu_bench MODEL [--device N] [--prompt-tokens P] [--gen-tokens G] "
                       "[--repeats R] [--kv-dtype f32|f16|bf16] [--profile 1]\n");
  return 2;
}

using bench::median;

// Mean seconds of `reps` calls of kernel k over a, after one warm-up, on `stream`.
expected<double> time_kernel(kernels::device& dev, void* stream, const kernels::kernel& k,
                             const kernels::op_args& a, int reps, kernels::bump_arena& scratch) {
  kernels::exec_ctx ctx;
  ctx.stream = stream;
  ctx.scratch = &scratch;
  scratch.rewind();
  TROUPE_TRY(k(a, ctx));
  TROUPE_TRY(dev.stream_synchronize(stream));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) {
    scratch.rewind();
    TROUPE_TRY(k(a, ctx));
  }
  TROUPE_TRY(dev.stream_synchronize(stream));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

int kernel_bench(int device) {
  kernels::device* gpu = kernels::get_device(kernels::backend::cuda, device);
  if (!gpu) {
    std::fprintf(stderr, "gpu_bench: no cuda:%d (%s)\n", device, kernels::cuda_summary().c_str());
    return 77;
  }
  auto fail = [](const error& e) {
    std::fprintf(stderr, "gpu_bench kernels: %s\n", e.to_string().c_str());
    return 1;
  };
  if (auto st = gpu->make_current(); !st) return fail(st.error());
  auto stream = gpu->stream_create();
  if (!stream) return fail(stream.error());
  const auto& reg = kernels::registry::global();
  const int64_t N = 8192, K = 8192, Tmax = 4096;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  auto upload = [&](dtype t, int64_t rows, int64_t cols) -> expected<kernels::device_buffer> {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (auto& x : v) x = nd(rng);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes(t, cols) * rows));
    from_f32(t, v.data(), bytes.data(), static_cast<int64_t>(v.size()));
    TROUPE_TRY_ASSIGN(b, kernels::device_buffer::allocate(*gpu, bytes.size()));
    TROUPE_TRY(gpu->upload(b.data(), bytes.data(), bytes.size()));
    return b;
  };
  auto x = upload(dtype::f32, Tmax, K);
  if (!x) return fail(x.error());
  auto y = kernels::device_buffer::allocate(*gpu, static_cast<size_t>(Tmax * N) * 4);
  if (!y) return fail(y.error());
  // the GEMM's rounded activations: two bf16 halves of x
  auto sb = kernels::device_buffer::allocate(*gpu, static_cast<size_t>(Tmax * K) * 4 + 4096);
  if (!sb) return fail(sb.error());
  kernels::bump_arena scratch(256); // temporaries from one device buffer: no call allocates
  scratch.reset(sb->data(), sb->size());
  // y [T, n] = x [T, k] W^T on `reps` calls of the registry's kernel, one JSON line (nothing
  // where the GPU has no kernel for it)
  auto time_matmul = [&](const kernels::device_buffer& w, dtype wt, int64_t T, int64_t n, int64_t k,
                         bool exact, int reps) -> status {
    kernels::set_exact_activations(exact);
    kernels::op_args a;
    a.kind = kernels::op::matmul;
    a.src[0] = tensor_view(x->data(), dtype::f32, shape{T, k});
    a.src[1] = tensor_view(w.data(), wt, shape{n, k});
    a.dst = tensor_view(y->data(), dtype::f32, shape{T, n});
    auto kern = reg.find(kernels::backend::cuda, a, kernels::lookup::native_only);
    if (!kern) return {};
    TROUPE_TRY_ASSIGN(s, time_kernel(*gpu, *stream, *kern, a, reps, scratch));
    const double moved = static_cast<double>(row_bytes(wt, k) * n) + 4.0 * T * (k + n);
    nlohmann::json j = {{"kernel", "matmul"},
                        {"weights", name(wt)},
                        {"T", T},
                        {"N", n},
                        {"K", k},
                        {"exact_activations", exact},
                        {"us", s * 1e6},
                        {"gb_s", moved / s / 1e9},
                        {"tflop_s", 2.0 * T * n * k / s / 1e12}};
    std::puts(j.dump().c_str());
    return {};
  };
  for (dtype wt : {dtype::bf16, dtype::f16, dtype::q8_0, dtype::q4_0}) {
    auto w = upload(wt, N, K);
    if (!w) return fail(w.error());
    for (int64_t T : {int64_t{1}, int64_t{8}, Tmax}) {
      if (T == Tmax && (wt == dtype::q8_0 || wt == dtype::q4_0)) continue; // the tiled kernel
      for (bool exact : {false, true}) {
        if (T != Tmax && exact) continue; // the GEMV keeps f32 activations either way
        if (auto st = time_matmul(*w, wt, T, N, K, exact, T == Tmax ? 10 : 50); !st)
          return fail(st.error());
      }
    }
  }
  kernels::set_exact_activations(false);
  // the decode GEMV on the 1.1 B model's own shapes (bf16): q / k / v, o, gate / up, down, head
  for (auto [n, k] : {std::pair<int64_t, int64_t>{2048, 2048},
                      {256, 2048},
                      {5632, 2048},
                      {2048, 5632},
                      {32000, 2048}}) {
    auto w = upload(dtype::bf16, n, k);
    if (!w) return fail(w.error());
    if (auto st = time_matmul(*w, dtype::bf16, 1, n, k, false, 200); !st) return fail(st.error());
  }
  // decode attention: 32 query heads over 8 KV heads of 128, one sequence of 4096 positions
  {
    const int64_t H = 32, Hkv = 8, D = 128, S = 4096, P = 16, NB = S / P + 1;
    auto q = upload(dtype::f32, H, D);
    auto kc = upload(dtype::bf16, NB * P * Hkv, D);
    auto vc = upload(dtype::bf16, NB * P * Hkv, D);
    if (!q || !kc || !vc) return fail(!q ? q.error() : !kc ? kc.error() : vc.error());
    std::vector<int32_t> seq = {0, 1, static_cast<int32_t>(S - 1)};
    for (int32_t b = 1; b < NB; ++b) seq.push_back(b);
    auto sb = kernels::device_buffer::allocate(*gpu, seq.size() * 4);
    if (!sb) return fail(sb.error());
    if (auto st = gpu->upload(sb->data(), seq.data(), seq.size() * 4); !st) return fail(st.error());
    kernels::op_args a;
    a.kind = kernels::op::paged_attention;
    a.src[0] = tensor_view(q->data(), dtype::f32, shape{1, H, D});
    a.src[1] = tensor_view(kc->data(), dtype::bf16, shape{NB, P, Hkv, D});
    a.src[2] = tensor_view(vc->data(), dtype::bf16, shape{NB, P, Hkv, D});
    a.src[3] = tensor_view(sb->data(), dtype::i32, shape{1, static_cast<int64_t>(seq.size())});
    a.dst = tensor_view(y->data(), dtype::f32, shape{1, H, D});
    a.p.scale = 0.088f;
    a.p.block_size = static_cast<int>(P);
    auto k = reg.find(kernels::backend::cuda, a, kernels::lookup::native_only);
    if (k) {
      auto s = time_kernel(*gpu, *stream, *k, a, 50, scratch);
      if (!s) return fail(s.error());
      const double kv = 2.0 * S * Hkv * D * 2;
      nlohmann::json j = {{"kernel", "paged_attention"},
                          {"cache", "bf16"},
                          {"S", S},
                          {"H", H},
                          {"Hkv", Hkv},
                          {"D", D},
                          {"us", *s * 1e6},
                          {"gb_s", kv / *s / 1e9}};
      std::puts(j.dump().c_str());
    }
  }
  gpu->stream_destroy(*stream);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  if (std::string(argv[1]) == "kernels")
    return kernel_bench(argc > 3 && std::string(argv[2]) == "--device" ? std::stoi(argv[3]) : 0);
  std::string model = argv[1], kv = "bf16";
  int device = 0, prompt_tokens = 512, gen_tokens = 128, repeats = 3;
  bool profile = false; // --profile 1: one more run timing every node (graphs off), per kernel
  bool on_cpu = false;  // --device cpu: the same run on the CPU (to try the bench without a GPU)
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--device" && v == "cpu")
      on_cpu = true;
    else if (k == "--device")
      device = std::stoi(v);
    else if (k == "--prompt-tokens")
      prompt_tokens = std::stoi(v);
    else if (k == "--gen-tokens")
      gen_tokens = std::stoi(v);
    else if (k == "--repeats")
      repeats = std::stoi(v);
    else if (k == "--kv-dtype")
      kv = v;
    else if (k == "--profile")
      profile = v == "1";
    else
      return usage();
  }
  const kernels::backend where = on_cpu ? kernels::backend::cpu : kernels::backend::cuda;
  kernels::device* gpu = kernels::get_device(where, on_cpu ? 0 : device);
  if (!gpu) {
    std::fprintf(stderr, "gpu_bench: no cuda:%d (%s)\n", device, kernels::cuda_summary().c_str());
    return 77;
  }
  if (model.rfind("synth:", 0) == 0) { // synth:PRESET:DTYPE
    const auto a = model.find(':', 6);
    synth_options so;
    so.preset = model.substr(6, a - 6);
    const auto t = parse_dtype(a == std::string::npos ? "bf16" : model.substr(a + 1));
    if (!t) return usage();
    so.type = *t;
    const int64_t V = synth_preset_vocab(so.preset);
    so.vocab_gguf = std::string(TROUPE_SOURCE_DIR) +
                    (V == 32000 ? "/models/llama2-tiny-random/llama-2-tiny-random.gguf"
                                : "/models/stories260K/stories260K.gguf");
    so.out = "/tmp/troupe-gpu/" + so.preset + "-" + std::string(name(so.type)) + ".gguf";
    std::filesystem::create_directories("/tmp/troupe-gpu");
    if (!std::filesystem::exists(so.out))
      if (auto st = synthesize(so); !st) {
        std::fprintf(stderr, "gpu_bench: %s\n", st.error().to_string().c_str());
        return 1;
      }
    model = so.out;
  }
  auto m = open_model(model);
  if (!m) {
    std::fprintf(stderr, "gpu_bench: %s\n", m.error().to_string().c_str());
    return 1;
  }
  const model_config& c = (*m)->config;
  exec::exec_options opt;
  opt.where = where;
  opt.device = device;
  opt.kv_dtype = parse_dtype(kv).value_or(dtype::bf16);
  opt.max_rows = std::max(512, prompt_tokens);
  opt.kv_blocks = (prompt_tokens + gen_tokens + 2 * opt.block_size) / opt.block_size + 2;
  const auto t_load = std::chrono::steady_clock::now();
  auto g = exec::generator::create(*m, opt);
  if (!g) {
    std::fprintf(stderr, "gpu_bench: %s\n", g.error().to_string().c_str());
    return 1;
  }
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  std::mt19937 rng(1);
  std::vector<int32_t> prompt = {static_cast<int32_t>(std::max<int64_t>(c.bos_id, 1))};
  while (static_cast<int>(prompt.size()) < prompt_tokens)
    prompt.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(c.V - 3)));
  exec::generate_options go;
  go.max_tokens = gen_tokens + 1;
  go.stop_at_eos = false;
  std::vector<double> prefill, decode, steps;
  for (int r = 0; r < repeats + 1; ++r) { // the first run records the graphs, warms the clocks
    auto out = (*g)->run(prompt, go);
    if (!out) {
      std::fprintf(stderr, "gpu_bench: %s\n", out.error().to_string().c_str());
      return 1;
    }
    if (r == 0) continue;
    prefill.push_back(prompt.size() / out->prefill_seconds);
    decode.push_back(gen_tokens / out->decode_seconds);
    steps.insert(steps.end(), out->step_seconds.begin(), out->step_seconds.end());
  }
  const auto bw = kernels::probe_copy_bandwidth(*gpu, size_t{64} << 20, on_cpu ? 4 : 20);
  const int64_t bytes = (*g)->runner().decode_weight_bytes();
  const double P = static_cast<double>(prompt.size());
  const double flops_per_token = c.prefill_flops_per_token(static_cast<int64_t>(prompt.size()));
  const double dec = median(decode), pre = median(prefill);
  const auto mem = (*g)->runner().device_memory();
  nlohmann::json j = {{"model", model},
                      {"device", gpu->describe()},
                      {"parameters", c.parameters()},
                      {"kv_dtype", kv},
                      {"prompt_tokens", prompt_tokens},
                      {"gen_tokens", gen_tokens},
                      {"repeats", repeats},
                      {"load_s", load_s},
                      {"weight_bytes_per_token", bytes},
                      {"decode_tok_s", dec},
                      {"decode_gb_s", dec * static_cast<double>(bytes) / 1e9},
                      {"decode_step_us_p50", 1e6 * median(steps)},
                      {"copy_gb_s", bw ? *bw / 1e9 : 0.0},
                      {"prefill_tok_s", pre},
                      {"prefill_tflop_s", pre * flops_per_token / 1e12},
                      {"ttft_ms", pre > 0 ? 1e3 * P / pre : 0.0},
                      {"device_memory_used", mem.total - mem.free},
                      {"device_memory_total", mem.total}};
  std::puts(j.dump().c_str());
  if (profile) { // each node synchronised: launch latency included, so small kernels read high
    g->reset();
    opt.profile = true;
    auto pg = exec::generator::create(*m, opt);
    if (!pg) {
      std::fprintf(stderr, "gpu_bench: %s\n", pg.error().to_string().c_str());
      return 1;
    }
    for (int r = 0; r < 2; ++r) { // the first warms up
      (*pg)->runner().reset_profile();
      auto out = (*pg)->run(prompt, go);
      if (!out) {
        std::fprintf(stderr, "gpu_bench: %s\n", out.error().to_string().c_str());
        return 1;
      }
    }
    for (const exec::op_time& t : (*pg)->runner().profile()) {
      const double per = t.decode ? static_cast<double>(gen_tokens) : 1.0;
      nlohmann::json p = {{"profile", t.kernel},
                          {"decode", t.decode},
                          {"weight_matmul", t.weight_matmul},
                          {"us_per_step", 1e6 * t.seconds / per},
                          {"calls_per_step", static_cast<double>(t.calls) / per}};
      std::puts(p.dump().c_str());
    }
  }
  return 0;
}
