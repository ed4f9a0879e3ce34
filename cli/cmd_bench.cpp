// cmd_bench.cpp: `troupe bench`: prefill and decode speed of one model on one shard, against
// the machine's ceilings measured in the same run (DRAM read bandwidth, FP32 FMA and int8 peaks
// with the same thread count). Decode is bound by bandwidth / (weight bytes read per token);
// prefill by the peak of its matmuls' path (int8 or FMA) / (2 x non-embedding parameters per
// token). It prints which kernel path each class of weight matmul took. Medians of repeats.
//   troupe bench --model PATH [--threads N] [--prompt-tokens 64] [--gen-tokens 64] [--json]
// --profile splits the decode step into the weight matmuls and everything else, per kernel.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/host.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "exec/generator.hpp"
#include "kernels/cpu/probe.hpp"
#include "kernels/cpu/report.hpp"
#include "kernels/device.hpp"

namespace troupe::cli {
namespace {

struct bench_opts {
  std::string model, placement, kv_dtype = "f32", device = "cpu", quantize;
  int threads = 1, prompt_tokens = 64, gen_tokens = 64, repeats = 5, tp = 1, ep = 1, pp = 1;
  bool json = false, actors = false, no_fuse = false, profile = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Prefill and decode speed through the actor pipeline: time to the first streamed token
// (the prefill) and the time per token after it, from one greedy request.
struct actor_speed {
  double prefill_tok_s = 0, decode_tok_s = 0;
  int64_t resident_max = 0;
};

expected<actor_speed> bench_actors(const bench_opts& o, std::shared_ptr<const model_source> m,
                                   const std::vector<int32_t>& prompt, dtype kv_dtype) {
  actors::host_options ho;
  ho.threads_per_shard = o.threads;
  ho.kv_dtype = kv_dtype;
  TROUPE_TRY_ASSIGN(q, parse_quantize(o.quantize));
  ho.quantize = q;
  auto place = o.placement.empty() ? even_placement(m->config, o.tp, o.pp)
                                   : parse_placement(m->config, o.placement);
  if (!place) return place.error();
  if (auto st = set_expert_parallel(m->config, *place, o.ep); !st) return st.error();
  ho.place = *place;
  ho.kv_blocks = (o.prompt_tokens + o.gen_tokens + 32) / 16 + 4;
  ho.sched.max_batch_tokens = std::max(512, o.prompt_tokens);
  TROUPE_TRY_ASSIGN(h, actors::host::start(m, ho));
  if (!h->wait_ready(300))
    return make_error(errc::unavailable, "shards did not start: {}", h->stats().not_ready_reason);
  actors::gen_request r;
  r.max_tokens = o.gen_tokens + 1;
  r.ignore_eos = true;
  std::vector<double> pre, dec;
  for (int rep = 0; rep < o.repeats + 1; ++rep) {
    // a different second token each run: the engine's prefix cache must not serve the prompt
    r.prompt = prompt;
    if (r.prompt.size() > 1)
      r.prompt[1] = static_cast<int32_t>(3 + (r.prompt[1] + rep) % (m->config.V - 3));
    using clock = std::chrono::steady_clock;
    std::vector<clock::time_point> at;
    const auto t0 = clock::now();
    TROUPE_TRY(h->generate(r, [&](const actors::gen_event& e) {
      if (!e.tokens.empty()) at.push_back(clock::now());
    }));
    if (rep == 0 || at.size() < 2) continue; // the first run pages the weights in
    pre.push_back(prompt.size() / std::chrono::duration<double>(at.front() - t0).count());
    dec.push_back((at.size() - 1) / std::chrono::duration<double>(at.back() - at.front()).count());
  }
  actor_speed out;
  out.prefill_tok_s = median(pre);
  out.decode_tok_s = median(dec);
  for (int64_t b : h->resident_bytes()) out.resident_max = std::max(out.resident_max, b);
  return out;
}

// Decode bytes of the whole model (one shard holding everything, its matrices quantized to
// `quantize` where they are at load), whatever path runs it.
int64_t decode_bytes_of(std::shared_ptr<const model_source> m, dtype quantize);

int run_bench(const bench_opts& o) {
  auto m = open_model_verbose(o.model.empty() ? default_model_path() : o.model, o.json);
  if (!m) return fail(m.error());
  const model_config& c = (*m)->config;
  exec::exec_options ro;
  ro.threads = o.threads;
  ro.fuse = !o.no_fuse;
  ro.profile = o.profile;
  const auto kvd = parse_kv_dtype(o.kv_dtype);
  if (!kvd) return fail(kvd.error());
  ro.kv_dtype = *kvd;
  const auto q = parse_quantize(o.quantize);
  if (!q) return fail(q.error());
  ro.quantize = *q;
  const auto dev = parse_device(o.device);
  if (!dev) return fail(dev.error());
  if (dev->cuda) {
    ro.where = kernels::backend::cuda;
    ro.device = dev->index;
    ro.max_rows = std::max(512, o.prompt_tokens);
  }
  ro.cpus = dev->cpus;
  ro.kv_blocks = (o.prompt_tokens + o.gen_tokens + 2 * ro.block_size) / ro.block_size + 2;
  auto gen = exec::generator::create(*m, ro);
  if (!gen) return fail(gen.error());
  std::unique_ptr<exec::generator> g = std::move(*gen);
  if (o.prompt_tokens + o.gen_tokens >= c.ctx)
    return fail(make_error(errc::invalid_argument,
                           "prompt + generated tokens must stay below the context {}", c.ctx));
  std::mt19937 rng(1);
  std::vector<int32_t> prompt = {static_cast<int32_t>(std::max<int64_t>(c.bos_id, 1))};
  while (static_cast<int>(prompt.size()) < o.prompt_tokens)
    prompt.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(c.V - 3)));
  exec::generate_options go;
  go.max_tokens = o.gen_tokens + 1;
  go.stop_at_eos = false;
  std::vector<double> prefill, decode, steps;
  const bool through_actors = o.actors || o.tp > 1 || o.pp > 1 || !o.placement.empty();
  int64_t resident = 0;
  if (through_actors) {
    g.reset(); // the shards hold the model
    auto sp = bench_actors(o, *m, prompt, *kvd);
    if (!sp) return fail(sp.error());
    prefill.push_back(sp->prefill_tok_s);
    decode.push_back(sp->decode_tok_s);
    resident = sp->resident_max;
  } else {
    (void)g->run(prompt, go); // warm-up: page in the weights
    g->runner().reset_profile();
    kernels::cpu::reset_matmul_uses();
    for (int r = 0; r < o.repeats; ++r) {
      auto out = g->run(prompt, go);
      if (!out) return fail(out.error());
      prefill.push_back(prompt.size() / out->prefill_seconds);
      decode.push_back(o.gen_tokens / out->decode_seconds);
      steps.insert(steps.end(), out->step_seconds.begin(), out->step_seconds.end());
    }
  }
  // the ceilings of the threads that work at once: a stage's TP shards x threads each; on a
  // GPU its copy bandwidth (its tensor-core peak is the part's figure: bench/gpu/check.sh)
  const int used = through_actors && o.placement.empty() ? o.threads * o.tp : o.threads;
  double bw = 0, peak = 0, int8_peak = 0;
  std::string device_name = "cpu";
  if (dev->cuda) {
    kernels::device* gpu = kernels::get_device(kernels::backend::cuda, dev->index);
    if (!gpu) return fail(make_error(errc::unavailable, "no {}", o.device));
    device_name = gpu->describe();
    auto probed = kernels::probe_copy_bandwidth(*gpu);
    if (!probed) return fail(probed.error());
    bw = *probed;
  } else {
    bw = kernels::cpu::probe_read_bandwidth(used);
    peak = kernels::cpu::probe_fma_peak(used);
    int8_peak = kernels::cpu::probe_int8_peak(used);
  }
  // which kernel path each class of weight matmul took (decode: < 8 tokens, prefill: 8+);
  // prefill's "% of peak" is against the int8 peak where its matmuls were int8
  const auto uses = kernels::cpu::matmul_uses();
  uint64_t pre_calls = 0, pre_int8 = 0;
  for (const auto& u : uses)
    if (u.prefill) {
      pre_calls += u.calls;
      if (u.int8) pre_int8 += u.calls;
    }
  const bool int8_prefill = pre_calls && 2 * pre_int8 > pre_calls && int8_peak > 0;
  const double pre_peak = int8_prefill ? int8_peak : peak;
  // from the benchmark's own shard where it still holds the model (a second one would
  // quantize and lay out everything again)
  const int64_t bytes = g ? g->runner().decode_weight_bytes() : decode_bytes_of(*m, ro.quantize);
  const double dec = median(decode), pre = median(prefill);
  const double bound_tok = bw / static_cast<double>(bytes);
  // the per-token tail: a descheduled vCPU shows up here, not in the median
  std::sort(steps.begin(), steps.end());
  // null where no step was timed (through the actors, which time whole requests)
  auto step_us = [&](double q) -> nlohmann::json {
    if (steps.empty()) return nullptr;
    return 1e6 * steps[static_cast<size_t>(q * (steps.size() - 1))];
  };
  const double P = static_cast<double>(prompt.size());
  const double flops_per_token = c.prefill_flops_per_token(static_cast<int64_t>(prompt.size()));
  nlohmann::json j = {
      {"model", (*m)->path},
      {"threads", o.threads},
      {"probe_threads", used},
      {"prompt_tokens", o.prompt_tokens},
      {"gen_tokens", o.gen_tokens},
      {"repeats", o.repeats},
      {"placement", through_actors
                        ? (o.placement.empty() ? fmt::format("tp{}xpp{}", o.tp, o.pp) : o.placement)
                        : "direct"},
      {"max_shard_resident_bytes", resident},
      {"cpu", kernels::cpu::cpu_features()},
      {"device", device_name},
      {"flops_per_token", flops_per_token},
      {"ttft_ms", pre > 0 ? 1e3 * P / pre : 0.0},
      {"weight_bytes_per_token", bytes},
      {"decode_tok_s", dec},
      {"decode_us_per_token", 1e6 / dec},
      {"decode_gb_s", dec * bytes / 1e9},
      {"read_bandwidth_gb_s", bw / 1e9},
      {"decode_bound_tok_s", bound_tok},
      {"decode_pct_of_bound", 100.0 * dec / bound_tok},
      {"decode_step_us_p50", step_us(0.5)},
      {"decode_step_us_p99", step_us(0.99)},
      {"decode_step_us_max", step_us(1.0)},
      {"prefill_tok_s", pre},
      {"prefill_gflop_s", pre * flops_per_token / 1e9},
      {"fma_peak_gflop_s", peak / 1e9},
      {"int8_peak_gop_s", int8_peak / 1e9},
      {"prefill_peak", int8_prefill ? "int8" : "fma"},
      {"prefill_pct_of_peak", pre_peak > 0 ? 100.0 * pre * flops_per_token / pre_peak : 0.0}};
  nlohmann::json paths = nlohmann::json::array();
  for (const auto& u : uses)
    paths.push_back({{"weights", u.weights},
                     {"path", u.path},
                     {"phase", u.prefill ? "prefill" : "decode"},
                     {"calls", u.calls}});
  j["matmul_paths"] = paths;
  // the decode step split into the weight matmuls (bandwidth-bound on the weights) and the
  // rest (norms, rope, attention over the cache, activations, adds, copies ...)
  nlohmann::json prof = nlohmann::json::array();
  double mm_us = 0, rest_us = 0;
  if (o.profile && !through_actors && !steps.empty()) {
    const double n_steps = static_cast<double>(steps.size());
    for (const exec::op_time& t : g->runner().profile()) {
      if (!t.decode) continue;
      const double us = 1e6 * t.seconds / n_steps;
      (t.weight_matmul ? mm_us : rest_us) += us;
      prof.push_back({{"kernel", t.kernel},
                      {"weight_matmul", t.weight_matmul},
                      {"us_per_step", us},
                      {"calls_per_step", static_cast<double>(t.calls) / n_steps}});
    }
    j["decode_profile"] = prof;
    j["decode_weight_matmul_us"] = mm_us;
    j["decode_rest_us"] = rest_us;
  }
  if (o.json) {
    std::puts(j.dump().c_str());
    return 0;
  }
  if (dev->cuda)
    std::printf("device %s: copy bandwidth %.0f GB/s\n", device_name.c_str(), bw / 1e9);
  std::printf(
      "model %s, %d thread(s)%s, cpu [%s]\n", (*m)->path.c_str(), o.threads,
      through_actors
          ? fmt::format(" per shard, actor pipeline {}",
                        o.placement.empty() ? fmt::format("tp{} x pp{}", o.tp, o.pp) : o.placement)
                .c_str()
          : "",
      kernels::cpu::cpu_features());
  std::printf("decode : %8.1f tok/s  (%7.1f us/token)  %6.2f GB/s of %6.2f GB/s read bandwidth = "
              "%5.1f%% of the bound (%.1f tok/s)\n",
              dec, 1e6 / dec, dec * bytes / 1e9, bw / 1e9, 100.0 * dec / bound_tok, bound_tok);
  if (!steps.empty())
    std::printf("decode steps: p50 %.1f us, p99 %.1f us, max %.1f us (%zu steps)\n",
                step_us(0.5).get<double>(), step_us(0.99).get<double>(), step_us(1.0).get<double>(),
                steps.size());
  if (dev->cuda) {
    std::printf("prefill: %8.1f tok/s  %7.1f TFLOP/s (TTFT %.1f ms for %d tokens)\n", pre,
                pre * flops_per_token / 1e12, pre > 0 ? 1e3 * P / pre : 0.0, o.prompt_tokens);
  } else {
    std::printf("prefill: %8.1f tok/s  %7.1f GFLOP/s of %6.1f %s peak = %5.1f%%\n", pre,
                pre * flops_per_token / 1e9, pre_peak / 1e9,
                int8_prefill ? "GOP/s int8" : "GFLOP/s FMA",
                100.0 * pre * flops_per_token / pre_peak);
    std::printf("peaks (%d thread(s)): FMA %.1f GFLOP/s, int8 %.1f GOP/s\n", used, peak / 1e9,
                int8_peak / 1e9);
  }
  for (const auto& u : uses)
    std::printf("matmul %-7s %-5s %-34s %10llu calls\n", u.prefill ? "prefill" : "decode",
                u.weights.c_str(), u.path.c_str(), static_cast<unsigned long long>(u.calls));
  std::printf(
      "weights read per token: %.2f MB; medians of %d runs (%d prompt, %d generated tokens)\n",
      bytes / 1e6, o.repeats, o.prompt_tokens, o.gen_tokens);
  if (!prof.empty()) {
    std::printf("decode step profile (us per step, mean over %zu steps):\n", steps.size());
    for (const auto& t : prof)
      std::printf("  %-44s %9.1f us  %5.1f calls%s\n", t["kernel"].get<std::string>().c_str(),
                  t["us_per_step"].get<double>(), t["calls_per_step"].get<double>(),
                  t["weight_matmul"].get<bool>() ? "  (weight matmul)" : "");
    std::printf("  weight matmuls %.1f us, everything else %.1f us\n", mm_us, rest_us);
  }
  return 0;
}

int64_t decode_bytes_of(std::shared_ptr<const model_source> m, dtype quantize) {
  shard_spec spec;
  spec.layer_end = static_cast<int>(m->config.n_layer);
  exec::exec_options o;
  o.kv_blocks = 2;
  o.state_slots = 1; // a model with linear attention layers: one sequence's states
  o.quantize = quantize;
  auto e = exec::executor::create(m, spec, o, nullptr);
  return e ? (*e)->decode_weight_bytes() : 0;
}

} // namespace

void add_bench(CLI::App& app, std::function<int()>& run) {
  auto o = std::make_shared<bench_opts>();
  auto* cmd = app.add_subcommand("bench",
                                 "measure prefill and decode speed against the machine's ceilings");
  cmd->add_option("--model,-m", o->model,
                  "a .gguf file or a Hugging Face directory (default: bundled stories260K)");
  cmd->add_option("--threads", o->threads, "compute threads")->check(CLI::Range(1, 256));
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prefill length")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--gen-tokens", o->gen_tokens, "tokens to decode")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--repeats", o->repeats, "runs (the median is reported)")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", o->json, "one JSON object");
  cmd->add_flag("--no-fuse", o->no_fuse, "run the unfused op sequence (for comparison)");
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV cache element type: f32, f16 or bf16");
  cmd->add_option("--quantize", o->quantize,
                  "quantize matrices stored in f32 / f16 / bf16 to q8_0 or q4_0 as they load "
                  "(none: as published)");
  cmd->add_option("--device", o->device,
                  "where the single shard runs: cpu, cpu:A-B (pinned), cuda or cuda:N");
  cmd->add_flag("--profile", o->profile,
                "time every node of the decode steps: weight matmuls against the rest");
  cmd->add_option("--tp", o->tp, "run through the actor pipeline with this TP")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--ep", o->ep, "expert parallelism: 1, or --tp (each shard holds whole experts)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pp", o->pp, "run through the actor pipeline with this PP")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--placement", o->placement,
                  "run through the actor pipeline with this placement");
  cmd->add_flag("--actors", o->actors, "run through the actor pipeline even at TP 1 x PP 1");
  cmd->callback([&run, o] { run = [o] { return run_bench(*o); }; });
}

} // namespace troupe::cli
