// text_bench.cpp: the cost of the output side per generated token, as a completion grows:
// the windowed stream decoder (and the output processor with a stop string) must cost the
// same per token at 10,000 tokens as at 100, where decoding the whole sequence again (what
// the engine did before December 2026) grows with the length. Google Benchmark, JSON with
// --benchmark_format=json. Results in bench/README.md.
#include <benchmark/benchmark.h>

#include <random>

#include "text/output_processor.hpp"

using namespace troupe;

namespace {

const tokenizer& stories() {
  static auto tok = *tokenizer::from_hf_dir(TROUPE_SOURCE_DIR "/models/stories260K-hf");
  return *tok;
}

std::vector<int32_t> ids(size_t n) {
  std::mt19937 rng(1);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = 3 + static_cast<int32_t>(rng() % (stories().vocab_size() - 3));
  return v;
}

// One more token after `state.range(0)` already decoded.
void BM_StreamDecoderPush(benchmark::State& state) {
  const auto seq = ids(static_cast<size_t>(state.range(0)) + 1024);
  stream_decoder d(stories());
  d.prime(std::span<const int32_t>(seq).first(16));
  size_t i = 16;
  for (; i < static_cast<size_t>(state.range(0)); ++i) d.push(seq[i]);
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.push(seq[i]));
    if (++i == seq.size()) i = seq.size() - 1024; // stays within a few tokens of the range
  }
}

void BM_WholeDecodePerToken(benchmark::State& state) {
  const auto seq = ids(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(stories().decode_bytes(seq, true));
}

void BM_OutputProcessorPush(benchmark::State& state) {
  const auto seq = ids(static_cast<size_t>(state.range(0)) + 1024);
  output_processor p(stories(), std::span<const int32_t>(seq).first(16), {"\n\nUser:"});
  size_t i = 16;
  for (; i < static_cast<size_t>(state.range(0)); ++i) p.push(std::span<const int32_t>(&seq[i], 1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(p.push(std::span<const int32_t>(&seq[i], 1)));
    if (++i == seq.size()) i = seq.size() - 1024;
  }
}

} // namespace

BENCHMARK(BM_StreamDecoderPush)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK(BM_WholeDecodePerToken)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK(BM_OutputProcessorPush)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK_MAIN();
