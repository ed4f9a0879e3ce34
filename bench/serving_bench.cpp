// serving_bench.cpp: serving through the engine (in-process, no HTTP).
//  sweep:    bench-134m (q8_0, bf16) on one shard with every core; C = 1, 4, 16, 64 clients
//            each sending 64-token prompts for 64 tokens back to back for D seconds:
//            aggregate decode tokens/s, time to first token and inter-token latency p50/p99,
//            and decode FLOP/s against the same-run FMA peak.
//  batch:    steady-state batched decode: B = 1, 16, 64 requests start together (32-token
//            prompts, 128 tokens each); tokens/s over the window in which all B sequences are
//            decoding (after the last first token, before the first last token), so no
//            prefill is in it, and its FLOP/s against the same-run FMA peak.
//  prefix:   a 256-token shared prefix: time to first token of the second request with the
//            prefix cache, against the same request without it.
//  recovery: TP 2 x PP 2; one stream killed mid-way: the longest gap between tokens (kill
//            to next token) against the median gap; and throughput with a fault every few
//            seconds against the fault-free run.
//  stall:    16 decoding clients and a 1536-token prompt every 2 s, per step target
//            (stall-free batching) and token budget: inter-token latency and long-prompt TTFT.
//   build/bench/serving_bench [sweep|batch|prefix|stall|recovery|all] [--seconds D] [--models DIR]
//   [--kv-dtype f32|f16|bf16] [--dtype q8_0|bf16|f32 (sweep, batch: one weight dtype)]
//   [--step-target-ms MS (sweep: stall-free batching, 0 off)] [--json FILE]
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/host.hpp"
#include "bench_util.hpp"
#include "kernels/cpu/probe.hpp"

using namespace troupe;
using namespace troupe::bench;
using json = nlohmann::json;

namespace {

struct load_result {
  int64_t requests = 0, tokens = 0, errors = 0;
  std::vector<double> ttft, itl;
  double seconds = 0;
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int len, int V) {
  std::vector<int32_t> p = {1};
  while (static_cast<int>(p.size()) < len)
    p.push_back(3 + static_cast<int32_t>(rng() % static_cast<uint32_t>(V - 3)));
  return p;
}

load_result run_load(actors::host& h, int clients, double seconds, int prompt_len, int gen) {
  load_result out;
  std::mutex mu;
  const auto t0 = clock::now();
  std::vector<std::thread> ts;
  for (int c = 0; c < clients; ++c)
    ts.emplace_back([&, c] {
      std::mt19937 rng(1000 + c);
      while (seconds_since(t0) < seconds) {
        actors::gen_request r;
        r.prompt = random_prompt(rng, prompt_len, static_cast<int>(h.model().config.V));
        r.max_tokens = gen;
        r.ignore_eos = true;
        std::vector<clock::time_point> at;
        const auto sent = clock::now();
        auto res = h.generate(r, [&](const actors::gen_event& e) {
          if (!e.tokens.empty()) at.push_back(clock::now());
        });
        std::lock_guard<std::mutex> lk(mu);
        if (!res || (*res)[0].finish == finish_reason::error) {
          ++out.errors;
          continue;
        }
        ++out.requests;
        // count only tokens produced inside the window
        for (size_t i = 0; i < at.size(); ++i)
          if (std::chrono::duration<double>(at[i] - t0).count() <= seconds) ++out.tokens;
        if (!at.empty()) out.ttft.push_back(std::chrono::duration<double>(at[0] - sent).count());
        for (size_t i = 1; i < at.size(); ++i)
          out.itl.push_back(std::chrono::duration<double>(at[i] - at[i - 1]).count());
      }
    });
  for (auto& t : ts) t.join();
  out.seconds = seconds;
  return out;
}

std::unique_ptr<actors::host> start(std::shared_ptr<const model_source> m, actors::host_options o) {
  auto h = actors::host::start(m, o);
  if (!h) {
    std::fprintf(stderr, "%s\n", h.error().to_string().c_str());
    return nullptr;
  }
  if (!(*h)->wait_ready(300)) return nullptr;
  return std::move(*h);
}

// The machine's FMA peak: the best of `probes` probes (a low one is the VM's interference).
double best_fma_peak(int cores, int probes) {
  double peak = 0;
  for (int i = 0; i < probes; ++i) peak = std::max(peak, kernels::cpu::probe_fma_peak(cores));
  return peak;
}

json sweep(const std::string& models, double seconds, dtype kv, const std::string& only,
           double step_target_s) {
  json out = json::array();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  double peak = best_fma_peak(cores, 3);
  for (const char* dt : {"q8_0", "bf16"}) {
    if (!only.empty() && only != dt) continue;
    auto m = *open_model(bench_model(models, dt));
    const int64_t non_embd = m->config.parameters() - m->config.V * m->config.C;
    actors::host_options o;
    o.threads_per_shard = cores;
    o.sched.step_target_s = step_target_s;
    o.kv_blocks = 64 * 9 + 8; // 64 sequences of 128 tokens in blocks of 16
    o.kv_dtype = kv;
    o.sched.max_batch_tokens = 512;
    o.sched.max_seqs = 64;
    auto h = start(m, o);
    for (int c : {1, 4, 16, 64}) {
      peak = std::max(peak, best_fma_peak(cores, 1));
      const load_result r = run_load(*h, c, seconds, 64, 64);
      const double tok_s = r.tokens / r.seconds;
      const double gflops = tok_s * 2.0 * static_cast<double>(non_embd) / 1e9;
      json row = {{"dtype", dt},
                  {"kv_dtype", std::string(name(kv))},
                  {"step_target_ms", 1e3 * step_target_s},
                  {"clients", c},
                  {"requests", r.requests},
                  {"errors", r.errors},
                  {"decode_tok_s", tok_s},
                  {"ttft_p50_ms", 1e3 * percentile(r.ttft, 0.5)},
                  {"ttft_p99_ms", 1e3 * percentile(r.ttft, 0.99)},
                  {"itl_p50_ms", 1e3 * percentile(r.itl, 0.5)},
                  {"itl_p99_ms", 1e3 * percentile(r.itl, 0.99)},
                  {"decode_gflop_s", gflops},
                  {"fma_peak_gflop_s", peak / 1e9},
                  {"pct_of_fma_peak", 100.0 * gflops * 1e9 / peak}};
      std::printf("%-5s clients %2d: %7.1f tok/s  TTFT p50 %7.1f p99 %7.1f ms  ITL p50 %6.1f p99 "
                  "%6.1f ms  %5.1f%% of FMA peak\n",
                  dt, c, tok_s, row["ttft_p50_ms"].get<double>(), row["ttft_p99_ms"].get<double>(),
                  row["itl_p50_ms"].get<double>(), row["itl_p99_ms"].get<double>(),
                  row["pct_of_fma_peak"].get<double>());
      std::fflush(stdout);
      out.push_back(row);
    }
  }
  return out;
}

json batch_decode(const std::string& models, dtype kv, const std::string& only) {
  json out = json::array();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  double peak = best_fma_peak(cores, 3);
  for (const char* dt : {"q8_0", "bf16", "f32"}) {
    if (!only.empty() && only != dt) continue;
    auto m = *open_model(bench_model(models, dt));
    const int64_t non_embd = m->config.parameters() - m->config.V * m->config.C;
    actors::host_options o;
    o.threads_per_shard = cores;
    o.kv_blocks = 64 * 11 + 8; // 64 sequences of 160 tokens in blocks of 16
    o.kv_dtype = kv;
    o.sched.max_batch_tokens = 2048;
    o.sched.max_seqs = 64;
    auto h = start(m, o);
    for (int B : {1, 16, 64}) {
      peak = std::max(peak, best_fma_peak(cores, 1));
      std::vector<std::vector<clock::time_point>> at(B);
      std::vector<std::thread> ts;
      for (int c = 0; c < B; ++c)
        ts.emplace_back([&, c] {
          std::mt19937 rng(500 + c);
          actors::gen_request r;
          r.prompt = random_prompt(rng, 32, static_cast<int>(m->config.V));
          r.max_tokens = 128;
          r.ignore_eos = true;
          (void)h->generate(r, [&](const actors::gen_event& e) {
            if (!e.tokens.empty()) at[c].push_back(clock::now());
          });
        });
      for (auto& t : ts) t.join();
      clock::time_point from = clock::time_point::min(), to = clock::time_point::max();
      for (const auto& a : at) {
        if (a.empty()) continue;
        from = std::max(from, a.front());
        to = std::min(to, a.back());
      }
      int64_t tokens = 0;
      for (const auto& a : at)
        for (const auto& t : a) tokens += t > from && t <= to;
      const double secs = std::chrono::duration<double>(to - from).count();
      const double tok_s = secs > 0 ? tokens / secs : 0;
      const double gflops = tok_s * 2.0 * static_cast<double>(non_embd) / 1e9;
      json row = {{"dtype", dt},
                  {"kv_dtype", std::string(name(kv))},
                  {"sequences", B},
                  {"decode_tok_s", tok_s},
                  {"window_s", secs},
                  {"decode_gflop_s", gflops},
                  {"fma_peak_gflop_s", peak / 1e9},
                  {"pct_of_fma_peak", 100.0 * gflops * 1e9 / peak}};
      std::printf("%-5s KV %-4s %2d sequences decoding together: %7.1f tok/s  %6.1f GFLOP/s of "
                  "%6.1f = %5.1f%% of FMA peak\n",
                  dt, std::string(name(kv)).c_str(), B, tok_s, gflops, peak / 1e9,
                  row["pct_of_fma_peak"].get<double>());
      std::fflush(stdout);
      out.push_back(row);
    }
  }
  return out;
}

double ttft_of(actors::host& h, const std::vector<int32_t>& prompt) {
  actors::gen_request r;
  r.prompt = prompt;
  r.max_tokens = 1;
  r.ignore_eos = true;
  const auto t0 = clock::now();
  double first = 0;
  (void)h.generate(r, [&](const actors::gen_event& e) {
    if (!e.tokens.empty() && first == 0) first = seconds_since(t0);
  });
  return first;
}

// Stall-free batching: 16 clients decode (64-token prompts, 64 tokens, back to back) while one
// more sends a 1536-token prompt every 2 s; per step target (off, 25 ... 200 ms) and token
// budget: the decoders' inter-token latency p50 / p99 / max, their aggregate tokens/s, and the
// long prompts' time to first token.
json stall(const std::string& models, double seconds) {
  json out = json::array();
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  auto m = *open_model(bench_model(models, "q8_0"));
  const int long_len = std::min<int>(1536, static_cast<int>(m->config.ctx) - 80);
  struct setting {
    int budget;
    double target_s;
  };
  for (setting st : {setting{512, 0}, setting{2048, 0}, setting{2048, 0.025}, setting{2048, 0.05},
                     setting{2048, 0.1}, setting{2048, 0.2}}) {
    actors::host_options o;
    o.threads_per_shard = cores;
    o.kv_blocks = 16 * 9 + long_len / 16 + 16;
    o.sched.max_batch_tokens = st.budget;
    o.sched.max_seqs = 64;
    o.sched.step_target_s = st.target_s;
    auto h = start(m, o);
    if (!h) continue;
    std::vector<double> long_ttft;
    std::thread longs([&] {
      std::mt19937 rng(77);
      const auto t0 = clock::now();
      while (seconds_since(t0) + 2 < seconds) {
        const auto next = clock::now() + std::chrono::seconds(2);
        long_ttft.push_back(
            ttft_of(*h, random_prompt(rng, long_len, static_cast<int>(m->config.V))));
        std::this_thread::sleep_until(next);
      }
    });
    const load_result r = run_load(*h, 16, seconds, 64, 64);
    longs.join();
    std::vector<double> itl = r.itl;
    std::sort(itl.begin(), itl.end());
    json row = {{"max_batch_tokens", st.budget},
                {"step_target_ms", 1e3 * st.target_s},
                {"decode_tok_s", r.tokens / r.seconds},
                {"itl_p50_ms", 1e3 * percentile(r.itl, 0.5)},
                {"itl_p99_ms", 1e3 * percentile(r.itl, 0.99)},
                {"itl_max_ms", itl.empty() ? 0.0 : 1e3 * itl.back()},
                {"long_prompts", long_ttft.size()},
                {"long_ttft_p50_ms", 1e3 * percentile(long_ttft, 0.5)},
                {"long_ttft_max_ms", 1e3 * percentile(long_ttft, 1.0)}};
    std::printf("budget %4d target %5.0f ms: %6.1f tok/s  ITL p50 %6.1f p99 %7.1f max %7.1f ms"
                "  long-prompt TTFT p50 %7.1f max %7.1f ms (%zu)\n",
                st.budget, 1e3 * st.target_s, row["decode_tok_s"].get<double>(),
                row["itl_p50_ms"].get<double>(), row["itl_p99_ms"].get<double>(),
                row["itl_max_ms"].get<double>(), row["long_ttft_p50_ms"].get<double>(),
                row["long_ttft_max_ms"].get<double>(), long_ttft.size());
    std::fflush(stdout);
    out.push_back(row);
  }
  return out;
}

json prefix(const std::string& models) {
  auto m = *open_model(bench_model(models, "q8_0"));
  std::mt19937 rng(7);
  const auto shared = random_prompt(rng, 256, static_cast<int>(m->config.V));
  auto with_tail = [&](int seed) {
    std::mt19937 r2(seed);
    auto p = shared;
    for (int i = 0; i < 16; ++i) p.push_back(3 + static_cast<int32_t>(r2() % 30000));
    return p;
  };
  std::vector<double> cached, uncached;
  for (bool caching : {true, false}) {
    actors::host_options o;
    o.threads_per_shard = static_cast<int>(std::thread::hardware_concurrency());
    o.sched.prefix_caching = caching;
    auto h = start(m, o);
    for (int rep = 0; rep < 5; ++rep) {
      (void)ttft_of(*h, with_tail(100 + rep)); // the first request fills the cache
      (caching ? cached : uncached).push_back(ttft_of(*h, with_tail(200 + rep)));
    }
  }
  const double c = median(cached), u = median(uncached);
  std::printf("shared 256-token prefix: TTFT %.1f ms with the prefix cache, %.1f ms without: %.1fx "
              "faster\n",
              c * 1e3, u * 1e3, u / c);
  return {{"prefix_tokens", 256},
          {"ttft_cached_ms", c * 1e3},
          {"ttft_uncached_ms", u * 1e3},
          {"speedup", u / c}};
}

json recovery(const std::string& models, double seconds) {
  auto m = *open_model(bench_model(models, "q8_0"));
  json out;
  {
    actors::host_options o;
    o.place = *even_placement(m->config, 2, 2);
    (void)o.faults.add("kill-shard:stage=1,rank=0,step=60");
    auto h = start(m, o);
    actors::gen_request r;
    std::mt19937 rng(3);
    r.prompt = random_prompt(rng, 32, static_cast<int>(m->config.V));
    r.max_tokens = 120;
    r.ignore_eos = true;
    std::vector<clock::time_point> at;
    (void)h->generate(r, [&](const actors::gen_event& e) {
      if (!e.tokens.empty()) at.push_back(clock::now());
    });
    std::vector<double> gaps;
    for (size_t i = 1; i < at.size(); ++i)
      gaps.push_back(std::chrono::duration<double>(at[i] - at[i - 1]).count());
    const double worst = gaps.empty() ? 0 : *std::max_element(gaps.begin(), gaps.end());
    out["recovery_ms"] = worst * 1e3;
    out["median_itl_ms"] = median(gaps) * 1e3;
    out["restarts"] = h->stats().shard_restarts;
    std::printf("recovery (TP2 x PP2, one shard killed): next token %.1f ms after the kill (median "
                "gap %.1f ms)\n",
                worst * 1e3, median(gaps) * 1e3);
  }
  for (bool faults : {false, true}) {
    actors::host_options o;
    o.place = *even_placement(m->config, 2, 2);
    o.kv_blocks = 16 * 9 + 8;
    if (faults) (void)o.faults.add("kill-shard:p=0.002,seed=5");
    auto h = start(m, o);
    const load_result r = run_load(*h, 16, seconds, 64, 64);
    const double tok_s = r.tokens / r.seconds;
    const int64_t restarts = h->stats().shard_restarts;
    out[faults ? "with_faults" : "fault_free"] = {
        {"tok_s", tok_s},
        {"errors", r.errors},
        {"restarts", restarts},
        {"seconds_between_faults", restarts ? seconds / restarts : 0.0}};
    std::printf("16 clients over TP2 x PP2 %s: %.1f tok/s, %lld errors, %lld restarts\n",
                faults ? "with random kills" : "fault-free", tok_s,
                static_cast<long long>(r.errors), static_cast<long long>(restarts));
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  std::string what = "all", models = "/tmp/troupe-bench", json_out, only;
  double seconds = 15;
  dtype kv = dtype::f32;
  double step_target_s = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc)
      seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--models") && i + 1 < argc)
      models = argv[++i];
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_out = argv[++i];
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc)
      only = argv[++i];
    else if (!std::strcmp(argv[i], "--step-target-ms") && i + 1 < argc)
      step_target_s = std::atof(argv[++i]) / 1e3;
    else if (!std::strcmp(argv[i], "--kv-dtype") && i + 1 < argc) {
      const auto d = parse_dtype(argv[++i]);
      if (!d || (*d != dtype::f32 && *d != dtype::f16 && *d != dtype::bf16)) {
        std::fprintf(stderr, "serving_bench: --kv-dtype takes f32, f16 or bf16\n");
        return 2;
      }
      kv = *d;
    } else
      what = argv[i];
  }
  json out = {{"command", command_line(argc, argv)}, {"cpu", kernels::cpu::cpu_features()}};
  if (what == "sweep" || what == "all")
    out["sweep"] = sweep(models, seconds, kv, only, step_target_s);
  if (what == "batch" || what == "all") out["batch"] = batch_decode(models, kv, only);
  if (what == "prefix" || what == "all") out["prefix"] = prefix(models);
  if (what == "stall" || what == "all") out["stall"] = stall(models, seconds);
  if (what == "recovery" || what == "all") out["recovery"] = recovery(models, seconds);
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  return 0;
}
