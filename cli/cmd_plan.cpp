// cmd_plan.cpp: `troupe plan`: how to cut a model for a set of devices, and what each device
// then holds, before anything is downloaded or loaded. The model is a checkpoint (a .gguf, an
// HF directory) or its config.json alone; the devices are machines of N devices of M bytes
// each. It prints the placements tried (TP x PP from the fewest devices up, exec/memory_plan.hpp),
// the one chosen, each stage's weights, KV bytes per token, step arena and room for KV
// tokens, and the command line that serves it; --json for tools. Exit 0: a placement fits; 3:
// none tried does; 2: bad input; 1: the model could not be read.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "common.hpp"
#include "exec/memory_plan.hpp"

namespace troupe::cli {
namespace {

struct plan_opts {
  std::string model, devices, kv_dtype = "f32", quantize, weights;
  int machines = 1, tp = 0, pp = 0;
  bool ep = false, json = false;
  int64_t context = 0, seqs = 1, step_rows = 512;
  double usable = 0.9;
};

std::string gib(int64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
}

// "8x141GiB" (devices per machine x memory of each) or "141GiB" (one)
expected<exec::device_pool> parse_devices(const std::string& text, int machines, double usable) {
  exec::device_pool pool;
  pool.machines = machines;
  pool.usable = usable;
  std::string mem = text;
  if (const size_t x = text.find('x'); x != std::string::npos) {
    try {
      size_t used = 0;
      pool.per_machine = std::stoi(text.substr(0, x), &used);
      if (used != x || pool.per_machine < 1 || pool.per_machine > 4096) throw std::out_of_range("");
    } catch (const std::exception&) {
      return make_error(errc::invalid_argument,
                        "--devices '{}': give COUNTxMEMORY (8x80GiB) or MEMORY (24GiB)", text);
    }
    mem = text.substr(x + 1);
  }
  auto bytes = parse_bytes(mem, "--devices");
  if (!bytes)
    return make_error(errc::invalid_argument,
                      "--devices '{}': give COUNTxMEMORY (8x80GiB) or MEMORY (24GiB)", text);
  pool.bytes = *bytes;
  return pool;
}

expected<std::shared_ptr<const model_source>> open_for_plan(const plan_opts& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::optional<dtype> weights;
  if (!o.weights.empty()) {
    auto t = parse_dtype(o.weights);
    if (!t || (*t != dtype::f32 && *t != dtype::f16 && *t != dtype::bf16))
      return make_error(errc::invalid_argument, "--weights-dtype '{}': give f32, f16 or bf16",
                        o.weights);
    weights = *t;
  }
  // a checkpoint (its tensors' real shapes and dtypes), or a config.json without weights
  const bool config_only =
      fs::path(o.model).filename() == "config.json" ||
      (fs::is_directory(o.model, ec) && !fs::exists(fs::path(o.model) / "model.safetensors", ec) &&
       !fs::exists(fs::path(o.model) / "model.safetensors.index.json", ec));
  if (config_only) return open_model_config(o.model, weights);
  if (weights)
    return make_error(errc::invalid_argument,
                      "--weights-dtype is for a config.json alone; {} has its weights", o.model);
  return open_model(o.model);
}

int run_plan(const plan_opts& o) {
  if (o.devices.empty())
    return fail(make_error(errc::invalid_argument, "--devices: say what the model runs on "
                                                   "(8x80GiB: devices per machine x memory)"));
  auto pool = parse_devices(o.devices, o.machines, o.usable);
  if (!pool) return fail(pool.error());
  exec::memory_options mo;
  auto kvd = parse_kv_dtype(o.kv_dtype);
  if (!kvd) return fail(kvd.error());
  mo.kv_dtype = *kvd;
  auto q = parse_quantize(o.quantize);
  if (!q) return fail(q.error());
  mo.quantize = *q;
  mo.step_rows = o.step_rows;
  auto m = open_for_plan(o);
  if (!m) return fail(m.error());
  const model_config& c = (*m)->config;
  auto params = exec::count_parameters(**m);
  if (!params) return fail(params.error());
  exec::plan_target target{o.context, o.seqs};
  auto plan =
      exec::plan_memory(**m, *pool, target, mo, o.tp > 0 ? std::optional<int>(o.tp) : std::nullopt,
                        o.pp > 0 ? std::optional<int>(o.pp) : std::nullopt, o.ep);
  if (!plan) return fail(plan.error());
  const auto& p = *plan;
  if (o.json) {
    nlohmann::json j;
    j["model"] = (*m)->path;
    j["arch"] = c.arch;
    j["sized_from"] = (*m)->shapes_only ? "config" : "checkpoint";
    j["parameters"] = *params;
    j["layers"] = c.n_layer;
    j["devices"] = {{"machines", pool->machines},
                    {"per_machine", pool->per_machine},
                    {"bytes", pool->bytes},
                    {"usable_bytes", pool->budget()}};
    j["target"] = {{"context", p.target.context}, {"seqs", p.target.seqs}};
    j["kv_dtype"] = name(mo.kv_dtype);
    j["candidates"] = nlohmann::json::array();
    for (const auto& k : p.tried) {
      nlohmann::json cj = {{"placement", k.place.to_string()},
                           {"devices", k.devices},
                           {"most_bytes", k.most_bytes},
                           {"kv_tokens", k.kv_tokens},
                           {"fits", k.fits},
                           {"partial", k.partial},
                           {"packed", k.packed},
                           {"shards", nlohmann::json::array()}};
      for (const auto& s : k.shards)
        cj["shards"].push_back({{"stage", s.stage},
                                {"rank", s.rank},
                                {"layers", {s.layer_begin, s.layer_end}},
                                {"weight_bytes", s.weight_bytes},
                                {"kv_bytes_per_token", s.kv_bytes_per_token},
                                {"state_bytes_per_seq", s.state_bytes_per_seq},
                                {"arena_bytes", s.arena_bytes}});
      j["candidates"].push_back(std::move(cj));
    }
    j["fewer_stages"] =
        p.fewer_stages >= 0
            ? nlohmann::json(p.tried[static_cast<size_t>(p.fewer_stages)].place.to_string())
            : nlohmann::json(nullptr);
    j["chosen"] = p.chosen >= 0
                      ? nlohmann::json(p.tried[static_cast<size_t>(p.chosen)].place.to_string())
                      : nlohmann::json(nullptr);
    if (!p.why_none.empty()) j["why_none"] = p.why_none;
    fmt::print("{}\n", j.dump(2));
    return p.chosen >= 0 ? 0 : 3;
  }
  const double n = static_cast<double>(*params);
  const std::string count = n >= 1e12  ? fmt::format("{:.2f} T", n / 1e12)
                            : n >= 1e9 ? fmt::format("{:.2f} B", n / 1e9)
                            : n >= 1e6 ? fmt::format("{:.2f} M", n / 1e6)
                                       : fmt::format("{:.0f}", n);
  fmt::print("# {}: {} ({}), {} layers, {} parameters, sized from its {}\n", (*m)->path, c.arch,
             c.family, c.n_layer, count,
             (*m)->shapes_only
                 ? fmt::format(
                       "config (matrices {}{})", name((*m)->assumed),
                       c.fp8_blocks
                           ? ", linear layers in E4M3 with a scale per 128 values, as loaded"
                       : c.act_quant ? ", the layers' ternary matrices in 2 bits (t2_32), as loaded"
                                     : "")
                 : std::string("tensors"));
  fmt::print("# devices: {} machine(s) x {} x {} ({} usable each); target: {} x {} tokens, KV "
             "{}{}\n\n",
             pool->machines, pool->per_machine, gib(pool->bytes), gib(pool->budget()),
             p.target.seqs, p.target.context, name(mo.kv_dtype),
             mo.quantize != dtype::f32
                 ? fmt::format(", matrices quantized to {}", name(mo.quantize))
                 : "");
  size_t width = 9;
  for (const auto& k : p.tried) width = std::max(width, k.place.to_string().size());
  if (!p.tried.empty())
    fmt::print("{:<{}} {:>7} {:>16} {:>14} {:>12}  {}\n", "placement", width, "devices",
               "fullest device", "KV room", "KV/token", "fits");
  for (size_t i = 0; i < p.tried.size(); ++i) {
    const auto& k = p.tried[i];
    int64_t kvt = 0;
    for (const auto& s : k.shards) kvt = std::max(kvt, s.kv_bytes_per_token);
    fmt::print("{:<{}} {:>7} {:>16} {:>14} {:>12}  {}{}\n", k.place.to_string(), width, k.devices,
               (k.partial ? ">= " : "") + gib(k.most_bytes),
               k.kv_tokens == std::numeric_limits<int64_t>::max()
                   ? std::string("-") // (no KV cache anywhere: nothing bounds it)
                   : fmt::format("{} tok", k.kv_tokens),
               fmt::format("{} B", kvt), k.fits ? "yes" : "no",
               static_cast<int>(i) == p.chosen         ? "  <- chosen"
               : static_cast<int>(i) == p.fewer_stages ? "  <- fewer stages"
                                                       : "");
  }
  if (p.chosen < 0) {
    if (!p.why_none.empty())
      fmt::print("no placement can hold it: {}\n", p.why_none);
    else
      fmt::print("\nno placement tried fits: {} x {} tokens of KV (and the sequences' recurrent "
                 "states) and the weights need more or larger devices (or --quantize, --kv-dtype "
                 "bf16, a shorter --context, fewer --seqs)\n",
                 p.target.seqs, p.target.context);
    return 3;
  }
  const auto& k = p.tried[static_cast<size_t>(p.chosen)];
  fmt::print("\n# chosen: {} on {} device(s)\n", k.place.to_string(), k.devices);
  for (const auto& s : k.shards) {
    // rank 0 of each stage, and any rank that holds other amounts (uneven vocabulary cuts)
    if (s.rank != 0) {
      const auto& first = k.shards[static_cast<size_t>(&s - k.shards.data() - s.rank)];
      if (first.weight_bytes == s.weight_bytes &&
          first.kv_bytes_per_token == s.kv_bytes_per_token && first.arena_bytes == s.arena_bytes)
        continue;
    }
    fmt::print("stage {} rank {}: layers {}-{}: weights {}, KV {} B a token, step arena {}, room "
               "for {} KV tokens\n",
               s.stage, s.rank, s.layer_begin, s.layer_end - 1, gib(s.weight_bytes),
               s.kv_bytes_per_token, gib(s.arena_bytes),
               s.kv_bytes_per_token > 0
                   ? std::max<int64_t>(0, pool->budget() - s.fixed_bytes() -
                                              s.state_bytes_per_seq * p.target.seqs) /
                         s.kv_bytes_per_token
                   : 0);
    if (s.state_bytes_per_seq > 0)
      fmt::print("  and {} of recurrent state for each sequence running (linear attention): {} "
                 "for {}\n",
                 gib(s.state_bytes_per_seq), gib(s.state_bytes_per_seq * p.target.seqs),
                 p.target.seqs);
  }
  if (p.fewer_stages >= 0) {
    const auto& f = p.tried[static_cast<size_t>(p.fewer_stages)];
    fmt::print("\n# fewer stages (each token passes {} instead of {}): {} on {} device(s)\n",
               f.place.stages.size(), k.place.stages.size(), f.place.to_string(), f.devices);
  }
  fmt::print("\nserve it: troupe serve -m {} --placement {} --kv-dtype {}{}\n", o.model,
             k.place.to_string(), name(mo.kv_dtype),
             mo.quantize != dtype::f32 ? " --quantize " + std::string(name(mo.quantize)) : "");
  return 0;
}

} // namespace

void add_plan(CLI::App& app, std::function<int()>& run) {
  auto o = std::make_shared<plan_opts>();
  auto* cmd = app.add_subcommand(
      "plan", "how to cut a model for a set of devices, and what each device then holds");
  cmd->add_option("-m,--model", o->model,
                  "a .gguf, an HF directory, or a config.json alone (weights not needed)")
      ->required();
  cmd->add_option("--devices", o->devices, "devices per machine x memory of each: 8x80GiB")
      ->required();
  cmd->add_option("--machines", o->machines, "machines (a stage's shards share one)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--usable", o->usable, "fraction of each device's memory a shard may fill (0.9)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--context", o->context, "tokens of one sequence (default: the model's maximum)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--seqs", o->seqs, "sequences at that context at once (1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--kv-dtype", o->kv_dtype, "KV cache element type: f32, f16 or bf16");
  cmd->add_option("--quantize", o->quantize, "matrices quantized at load: q8_0 or q4_0");
  cmd->add_option("--weights-dtype", o->weights,
                  "a config.json's matrices: f32, f16 or bf16 (default: its torch_dtype)");
  cmd->add_option("--tp", o->tp, "only this tensor-parallel size")->check(CLI::Range(1, 4096));
  cmd->add_option("--pp", o->pp, "only this many pipeline stages")->check(CLI::Range(1, 100000));
  cmd->add_flag("--ep", o->ep, "experts spread over each stage's shards (expert parallelism)");
  cmd->add_option("--step-rows", o->step_rows, "rows of the largest step (512)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_flag("--json", o->json, "one JSON object");
  cmd->callback([o, &run] { run = [o] { return run_plan(*o); }; });
}

} // namespace troupe::cli
