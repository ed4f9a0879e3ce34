// compose_pipeline.cpp: compose a pipeline by hand in C++. Two stages of the bundled
// stories260K model, the first with two tensor shards, the second with one; generate from
// a prompt, print the text, the per-shard resident weights and the engine's counters.
//   build/examples/compose_pipeline [model path]
#include <cstdio>

#include "actors/host.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : TROUPE_SOURCE_DIR "/models/stories260K/stories260K.gguf";
  auto model = open_model(path);
  if (!model) return std::fprintf(stderr, "%s\n", model.error().to_string().c_str()), 1;

  actors::host_options opt;
  opt.place.stages = {{0, 3, 2, {}},  // layers 0-2 on two tensor shards
                      {3, 5, 1, {}}}; // layers 3-4 on one shard
  auto h = actors::host::start(*model, opt);
  if (!h || !(*h)->wait_ready(60)) return std::fprintf(stderr, "pipeline did not start\n"), 1;

  actors::gen_request req;
  req.prompt = *(*model)->tok->encode("Once upon a time", true, false);
  req.max_tokens = 24;
  auto out = (*h)->generate(req);
  if (!out) return std::fprintf(stderr, "%s\n", out.error().to_string().c_str()), 1;
  std::printf("Once upon a time%s\n", (*out)[0].text.c_str());
  for (int64_t b : (*h)->resident_bytes())
    std::printf("shard resident weights: %lld bytes\n", static_cast<long long>(b));
  const auto s = (*h)->stats();
  std::printf("steps %lld, generated %lld tokens, KV blocks free %lld of %lld\n",
              static_cast<long long>(s.steps), static_cast<long long>(s.generated_tokens),
              static_cast<long long>(s.kv_blocks_free), static_cast<long long>(s.kv_blocks_total));
  return (*out)[0].finish == troupe::finish_reason::length ? 0 : 1;
}
