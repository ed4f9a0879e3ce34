// pipeline_bench.cpp: the actor pipeline's costs (issue: actor pipeline).
//  1. actor overhead: stories260K greedy decoding directly (exec::generator) and through the
//     actors at TP 1 x PP 1, alternated round by round; median microseconds per token.
//  2. tensor parallelism: bench-134m f32 decode with TP 2 (two shards, one thread each)
//     against one shard with two threads, alternated; median tokens per second.
//  3. resident weights per shard at TP 2 x PP 2 against a quarter of the model.
//  4. worker processes: bench-134m q8_0 decode at TP 2 (one thread each) with both shards in
//     this process against each in its own worker process (the all-reduce over UCX),
//     alternated; median tokens per second.
//   build/bench/pipeline_bench [--rounds N] [--models DIR] [--json FILE]
//                              [--only overhead|tp|workers]
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actors/host.hpp"
#include "bench_util.hpp"
#include "exec/generator.hpp"

using namespace troupe;
using namespace troupe::bench;

namespace {

// Microseconds per decoded token (first token excluded) for one greedy request.
double direct_us(exec::generator& g, const std::vector<int32_t>& prompt, int n) {
  exec::generate_options o;
  o.max_tokens = n + 1;
  o.stop_at_eos = false;
  auto r = g.run(prompt, o);
  return r ? r->decode_seconds / n * 1e6 : 0;
}

double actor_us(actors::host& h, const std::vector<int32_t>& prompt, int n) {
  actors::gen_request r;
  r.prompt = prompt;
  r.max_tokens = n + 1;
  r.ignore_eos = true;
  std::vector<clock::time_point> at;
  auto out = h.generate(r, [&](const actors::gen_event& e) {
    if (!e.tokens.empty()) at.push_back(clock::now());
  });
  if (!out || at.size() < 2) return 0;
  return std::chrono::duration<double>(at.back() - at.front()).count() / (at.size() - 1) * 1e6;
}

std::unique_ptr<actors::host> start(std::shared_ptr<const model_source> m, int tp, int pp,
                                    int threads, int workers = 0) {
  actors::host_options o;
  o.place = *even_placement(m->config, tp, pp);
  o.threads_per_shard = threads;
  o.kv_blocks = 64;
  o.workers = workers;
  if (workers > 0) o.worker_exe = TROUPE_EXE;
  auto h = actors::host::start(m, o);
  if (!h || !(*h)->wait_ready(300)) return nullptr;
  return std::move(*h);
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 15;
  std::string models = "/tmp/troupe-bench", json_out, only;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--models") && i + 1 < argc)
      models = argv[++i];
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_out = argv[++i];
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc)
      only = argv[++i];
  }
  nlohmann::json out = {{"command", command_line(argc, argv)}};

  // 1. actor overhead on stories260K
  if (only.empty() || only == "overhead") {
    auto m = *open_model(std::string(TROUPE_SOURCE_DIR) + "/models/stories260K/stories260K.gguf");
    auto g = *exec::generator::create(m, {});
    auto h = start(m, 1, 1, 1);
    const auto prompt = *m->tok->encode("Once upon a time", true, false);
    std::vector<double> d, a;
    direct_us(*g, prompt, 96), actor_us(*h, prompt, 96); // warm-up
    for (int r = 0; r < rounds; ++r) {
      d.push_back(direct_us(*g, prompt, 96));
      a.push_back(actor_us(*h, prompt, 96));
    }
    const double dm = median(d), am = median(a);
    out["actor_overhead"] = {{"model", "stories260K"},
                             {"direct_us_per_token", dm},
                             {"actor_us_per_token", am},
                             {"overhead_pct", 100.0 * (am / dm - 1.0)},
                             {"rounds", rounds}};
    std::printf("actor overhead (stories260K, TP1 x PP1): direct %.1f us/token, actors %.1f "
                "us/token: +%.1f%%\n",
                dm, am, 100.0 * (am / dm - 1.0));
  }
  // 2. TP 2 (1 thread each) against one shard with 2 threads, bench-134m f32
  if (only.empty() || only == "tp") {
    auto m = *open_model(bench_model(models, "f32"));
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < 31; ++i) prompt.push_back(100 + i * 7);
    auto one = start(m, 1, 1, 2);
    auto two = start(m, 2, 1, 1);
    std::vector<double> a, b;
    actor_us(*one, prompt, 32), actor_us(*two, prompt, 32);
    for (int r = 0; r < std::max(3, rounds / 3); ++r) {
      a.push_back(1e6 / actor_us(*one, prompt, 32));
      b.push_back(1e6 / actor_us(*two, prompt, 32));
    }
    const double am = median(a), bm = median(b);
    out["tensor_parallel"] = {{"model", "bench-134m f32"},
                              {"one_shard_two_threads_tok_s", am},
                              {"tp2_one_thread_each_tok_s", bm},
                              {"ratio_pct", 100.0 * bm / am}};
    std::printf("TP 2 x 1 thread: %.1f tok/s; 1 shard x 2 threads: %.1f tok/s: %.1f%%\n", bm, am,
                100.0 * bm / am);
    // 3. resident weights at TP 2 x PP 2
    auto four = start(m, 2, 2, 1);
    const auto whole = one->resident_bytes().at(0);
    std::vector<int64_t> parts = four->resident_bytes();
    double worst = 0;
    for (int64_t p : parts)
      worst = std::max(worst, std::abs(static_cast<double>(p) / (whole / 4.0) - 1.0));
    out["resident"] = {{"whole_bytes", whole},
                       {"tp2xpp2_bytes", parts},
                       {"max_deviation_from_quarter_pct", 100.0 * worst}};
    std::printf("resident weights TP2 x PP2 (MB):");
    for (int64_t p : parts) std::printf(" %.1f", p / 1e6);
    std::printf(" vs a quarter of %.1f MB: max deviation %.1f%%\n", whole / 1e6, 100.0 * worst);
  }
  // 4. TP 2 in one process against TP 2 over two worker processes
  if (only.empty() || only == "workers") {
    auto m = *open_model(bench_model(models, "q8_0"));
    std::vector<int32_t> prompt = {1};
    for (int i = 0; i < 31; ++i) prompt.push_back(100 + i * 7);
    auto here = start(m, 2, 1, 1);
    auto apart = start(m, 2, 1, 1, 2);
    if (!here || !apart) {
      std::fprintf(stderr, "pipeline_bench: the TP 2 pipelines did not start\n");
      return 1;
    }
    std::vector<double> a, b;
    actor_us(*here, prompt, 32), actor_us(*apart, prompt, 32);
    for (int r = 0; r < std::max(3, rounds / 3); ++r) {
      a.push_back(1e6 / actor_us(*here, prompt, 64));
      b.push_back(1e6 / actor_us(*apart, prompt, 64));
    }
    const double am = median(a), bm = median(b);
    out["worker_processes"] = {{"model", "bench-134m q8_0"},
                               {"tp2_one_process_tok_s", am},
                               {"tp2_two_worker_processes_tok_s", bm},
                               {"ratio_pct", 100.0 * bm / am}};
    std::printf("TP 2 in one process: %.1f tok/s; over two worker processes: %.1f tok/s: %.1f%%\n",
                am, bm, 100.0 * bm / am);
  }
  if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  return 0;
}
