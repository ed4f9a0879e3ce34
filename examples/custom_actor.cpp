// custom_actor.cpp: insert your own actor between two pipeline stages. This one watches the
// activations flowing from stage 0 to stage 1 (it prints their RMS per step) and forwards
// them unchanged; an actor could as well edit them (steering, quantizing, tapping features).
//   build/examples/custom_actor [model path]
#include <cmath>
#include <cstdio>

#include "actors/pipeline.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

// The developer actor: receives every step message, looks, forwards to the next hop.
caf::behavior rms_tap(caf::event_based_actor* self, hop_context ctx, std::shared_ptr<int> seen) {
  return {
      [=](step_atom, const step_msg& m) {
        double ss = 0;
        for (float v : *m.x) ss += static_cast<double>(v) * v;
        std::printf("step %llu: %lld tokens, activation rms %.4f\n",
                    static_cast<unsigned long long>(m.step_id),
                    static_cast<long long>(m.plan->n_tokens()), std::sqrt(ss / m.x->size()));
        ++*seen;
        ctx.forward(self, m);
      },
      ctx.route_handler(), // a restarted shard of the next stage: its new handle
  };
}

} // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : TROUPE_SOURCE_DIR "/models/stories260K/stories260K.gguf";
  auto model = open_model(path);
  if (!model) return std::fprintf(stderr, "%s\n", model.error().to_string().c_str()), 1;
  auto seen = std::make_shared<int>(0);
  host_options opt;
  opt.place = *even_placement((*model)->config, 1, 2);
  opt.custom.push_back({0, "rms-tap", [seen](caf::actor_system& sys, const hop_context& ctx) {
                          return sys.spawn(rms_tap, ctx, seen);
                        }});
  auto h = host::start(*model, opt);
  if (!h || !(*h)->wait_ready(60)) return std::fprintf(stderr, "pipeline did not start\n"), 1;
  gen_request req;
  req.prompt = *(*model)->tok->encode("Once upon a time", true, false);
  req.max_tokens = 8;
  auto out = (*h)->generate(req);
  if (!out) return 1;
  std::printf("Once upon a time%s\n", (*out)[0].text.c_str());
  std::printf("the tap saw %d steps\n", *seen);
  return *seen == 8 ? 0 : 1; // one prefill step + 7 decode steps
}
