// cmd_explain.cpp: `troupe explain`: what runs where. For one shard of a placement
// (--tp / --pp / --placement, --stage, --rank) it prints the model's whole graph as the
// family builds it (--whole), the shard's graph after the pipeline and tensor cuts, and the
// compiled plans for decode and prefill steps (all four row classes with --all-plans): every
// node with the kernel it runs, and what the passes fused, composed from primitives, or
// left to the reference kernels. Nothing runs; the weights are mapped, not read.
#include <CLI/CLI.hpp>

#include "arch/family.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "exec/executor.hpp"
#include "transport/inproc_group.hpp"

namespace troupe::cli {
namespace {

struct explain_opts {
  std::string model, placement;
  int tp = 1, ep = 1, pp = 1, stage = 0, rank = 0;
  bool whole = false, all_plans = false, no_fuse = false;
};

int run_explain(const explain_opts& o) {
  auto m = open_model_verbose(o.model.empty() ? default_model_path() : o.model, true);
  if (!m) return fail(m.error());
  const model_config& c = (*m)->config;
  auto place =
      o.placement.empty() ? even_placement(c, o.tp, o.pp) : parse_placement(c, o.placement);
  if (!place) return fail(place.error());
  if (auto st = set_expert_parallel(c, *place, o.ep); !st) return fail(st.error());
  if (o.stage < 0 || o.stage >= static_cast<int>(place->stages.size()))
    return fail(make_error(errc::invalid_argument, "--stage {}: the placement has {} stages",
                           o.stage, place->stages.size()));
  const auto& st = place->stages[static_cast<size_t>(o.stage)];
  if (o.rank < 0 || o.rank >= st.tp)
    return fail(make_error(errc::invalid_argument, "--rank {}: stage {} has TP {}", o.rank, o.stage,
                           st.tp));
  std::printf("# %s: %s (%s), placement %s, shard stage%d.rank%d: layers [%d, %d), TP %d\n",
              (*m)->path.c_str(), c.arch.c_str(), c.family.c_str(), place->to_string().c_str(),
              o.stage, o.rank, st.layer_begin, st.layer_end, st.tp);
  if (o.whole) {
    auto g = arch::build_graph(**m);
    if (!g) return fail(g.error());
    std::printf("\n# the whole model as the family builds it\n%s", g->to_string().c_str());
  }
  const shard_spec spec = place->shard(static_cast<size_t>(o.stage), o.rank);
  exec::exec_options eo;
  eo.kv_blocks = 2;
  eo.state_slots = 1; // a model with linear attention layers: one sequence's states
  eo.fuse = !o.no_fuse;
  solo_group solo;
  // a group of the right size that is never called: nothing runs here
  auto idle = transport::inproc_group::create(st.tp);
  auto e = exec::executor::create(*m, spec, eo,
                                  st.tp > 1 ? idle->member(0) : static_cast<collective*>(&solo));
  if (!e) return fail(e.error());
  std::printf("\n%s", (*e)->explain(o.all_plans).c_str());
  return 0;
}

} // namespace

void add_explain(CLI::App& app, std::function<int()>& run) {
  auto o = std::make_shared<explain_opts>();
  auto* cmd =
      app.add_subcommand("explain", "print a shard's graph, the passes' work and the kernels");
  cmd->add_option("--model,-m", o->model,
                  "a .gguf file or a Hugging Face directory (default: bundled stories260K)");
  cmd->add_option("--tp", o->tp, "tensor-parallel shards per stage")->check(CLI::Range(1, 64));
  cmd->add_option("--ep", o->ep, "expert parallelism: 1, or --tp (each shard holds whole experts)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--pp", o->pp, "pipeline stages")->check(CLI::Range(1, 1024));
  cmd->add_option("--placement", o->placement, "per-stage layers and TP, e.g. 0-2:tp2,3-4:tp1");
  cmd->add_option("--stage", o->stage, "which stage's shard (default 0)");
  cmd->add_option("--rank", o->rank, "which tensor rank of it (default 0)");
  cmd->add_flag("--whole", o->whole, "also print the whole model's graph before any pass");
  cmd->add_flag("--all-plans", o->all_plans, "print all four row-class plans");
  cmd->add_flag("--no-fuse", o->no_fuse, "compile without the fusion passes");
  cmd->callback([&run, o] { run = [o] { return run_explain(*o); }; });
}

} // namespace troupe::cli
