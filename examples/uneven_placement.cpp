// uneven_placement.cpp: stages of different widths, from the same text the command line
// takes (`troupe generate --placement ...`): layer 0 on four tensor shards, layers 1-3 on
// one, layer 4 on two. Checks the greedy text equals a one-shard run.
//   build/examples/uneven_placement [placement]
#include <cstdio>

#include "actors/host.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  auto model = open_model(TROUPE_SOURCE_DIR "/models/stories260K/stories260K.gguf");
  if (!model) return 1;
  const std::string spec = argc > 1 ? argv[1] : "0:tp4,1-3:tp1,4:tp2";
  auto run = [&](const std::string& text) -> std::string {
    actors::host_options opt;
    opt.place = *parse_placement((*model)->config, text);
    auto h = actors::host::start(*model, opt);
    if (!h || !(*h)->wait_ready(60)) return "(did not start)";
    actors::gen_request req;
    req.prompt = *(*model)->tok->encode("Lily and Ben", true, false);
    req.max_tokens = 24;
    auto out = (*h)->generate(req);
    return out ? (*out)[0].text : "(failed)";
  };
  const std::string uneven = run(spec), single = run("0-4:tp1");
  std::printf("%s: Lily and Ben%s\n", spec.c_str(), uneven.c_str());
  std::printf("0-4:tp1: Lily and Ben%s\n", single.c_str());
  return uneven == single ? 0 : 1;
}
