// text_bench.cpp: the cost of the output side per generated token, as a completion grows:
// the windowed stream decoder (and the output processor with a stop string) must cost the
// same per token at 10,000 tokens as at 100, where decoding the whole sequence again (what
// the engine did before December 2026) grows with the length. Google Benchmark, JSON with
// --benchmark_format=json. Also the tokens a response_format allows next (BM_JsonMask: the
// trie walk per sampled token, on Llama 2's 32,000 tokens and on 152,000 made from them).
// And a chat template's cost per request (BM_ChatTemplate: Qwen3's published template run by
// the Jinja interpreter over N messages of 500 characters, the parse done once at load).
// Results in bench/README.md.
#include <benchmark/benchmark.h>

#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "formats/gguf.hpp"
#include "text/jinja_template.hpp"
#include "text/json_constraint.hpp"
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

// The vocabulary of Llama 2 (32,000 tokens), or that and 120,000 more made of two of its
// tokens (a vocabulary the size of Qwen 2's, with BPE-like pieces).
std::shared_ptr<const token_vocab> vocab(bool big) {
  static std::shared_ptr<const token_vocab> v[2];
  if (v[big]) return v[big];
  auto g = *open_gguf(TROUPE_SOURCE_DIR "/models/llama2-tiny-random/llama-2-tiny-random.gguf");
  auto tok = *tokenizer::from_gguf(*g);
  auto base = token_vocab::from(*tok);
  std::vector<std::string> bytes;
  for (int32_t i = 0; i < base->size(); ++i) bytes.emplace_back(base->bytes(i));
  std::mt19937 rng(3);
  while (big && bytes.size() < 152000) {
    const auto a = base->bytes(static_cast<int32_t>(rng() % 32000));
    const auto b = base->bytes(static_cast<int32_t>(rng() % 32000));
    if (!a.empty() && !b.empty()) bytes.push_back(std::string(a) + std::string(b));
  }
  return v[big] = token_vocab::from_bytes(std::move(bytes));
}

// After a prefix of a document of a schema with a string, an integer and an enum: inside a
// string (0), at a key (1), where a value starts (2).
void BM_JsonMask(benchmark::State& state) {
  const bool big = state.range(0) != 0;
  auto rule = *response_format_constraint(
      R"({"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object",
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "kind": {"enum": ["cat", "dog"]}}, "required": ["name", "age", "kind"],
          "additionalProperties": false}}})",
      vocab(big), {2});
  auto c = rule->clone();
  const char* prefix[] = {R"({"name": "Tom Sm)", R"({"name": "Tom", )",
                          R"({"name": "Tom", "age":)"};
  // feed the prefix a byte at a time through single-byte tokens
  auto v = vocab(big);
  for (const char* p = prefix[state.range(1)]; *p; ++p) {
    int32_t id = 0;
    while (id < v->size() && v->bytes(id) != std::string_view(p, 1)) ++id;
    if (id == v->size() || !c->advance(id)) {
      state.SkipWithError("the prefix is not taken");
      return;
    }
  }
  std::vector<uint64_t> bits;
  for (auto _ : state) {
    c->allowed(bits);
    benchmark::DoNotOptimize(bits.data());
  }
}

// Union[Cat, Dog] (two objects that both start with '{'): inside the union's object while both
// readings are open, at a key (0) and inside a string value of one (1: "kind" tells them apart).
void BM_JsonMaskUnion(benchmark::State& state) {
  const bool big = state.range(0) != 0;
  auto rule = *response_format_constraint(
      R"({"type": "json_schema", "json_schema": {"name": "p", "schema": {"type": "object",
          "$defs": {"Cat": {"type": "object", "properties": {"kind": {"const": "cat"},
          "name": {"type": "string"}}, "required": ["kind", "name"], "additionalProperties": false},
          "Dog": {"type": "object", "properties": {"kind": {"const": "dog"},
          "name": {"type": "string"}}, "required": ["kind", "name"], "additionalProperties": false}},
          "properties": {"pet": {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}},
          "required": ["pet"], "additionalProperties": false}}})",
      vocab(big), {2});
  auto c = rule->clone();
  const char* prefix[] = {R"({"pet": {)", R"({"pet": {"name": "Tom Sm)"};
  auto v = vocab(big);
  for (const char* p = prefix[state.range(1)]; *p; ++p) {
    int32_t id = 0;
    while (id < v->size() && v->bytes(id) != std::string_view(p, 1)) ++id;
    if (id == v->size() || !c->advance(id)) {
      state.SkipWithError("the prefix is not taken");
      return;
    }
  }
  std::vector<uint64_t> bits;
  for (auto _ : state) {
    c->allowed(bits);
    benchmark::DoNotOptimize(bits.data());
  }
}

BENCHMARK(BM_StreamDecoderPush)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK(BM_WholeDecodePerToken)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK(BM_OutputProcessorPush)->Arg(100)->Arg(1000)->Arg(10000);
BENCHMARK(BM_JsonMask)->ArgsProduct({{0, 1}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JsonMaskUnion)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
void BM_ChatTemplate(benchmark::State& state) {
  std::ifstream in(TROUPE_SOURCE_DIR "/tests/fixtures/jinja_templates.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto fx = nlohmann::ordered_json::parse(ss.str());
  std::string source;
  for (const auto& t : fx["templates"])
    if (t["name"] == "Qwen-Qwen3-0.6B") source = t["template"];
  auto tpl = jinja_template::parse(source);
  if (!tpl) return state.SkipWithError("no template");
  nlohmann::ordered_json ctx = {{"messages", nlohmann::ordered_json::array()},
                                {"tools", nullptr},
                                {"add_generation_prompt", true}};
  for (int64_t i = 0; i < state.range(0); ++i)
    ctx["messages"].push_back({{"role", i % 2 ? "assistant" : "user"},
                               {"content", std::string(500, static_cast<char>('a' + i % 26))}});
  size_t bytes = 0;
  for (auto _ : state) {
    auto text = tpl->render(ctx);
    bytes = text ? text->size() : 0;
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["prompt_bytes"] = static_cast<double>(bytes);
}

BENCHMARK(BM_ChatTemplate)->Arg(10)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
