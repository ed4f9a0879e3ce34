// cmd_synth.cpp: `troupe synth`: writes a random-weight Llama model (arch/synth.hpp).
#include <CLI/CLI.hpp>

#include "arch/synth.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace troupe::cli {

void add_synth(CLI::App& app, std::function<int()>& run) {
  struct opts {
    std::string preset = "tiny", type = "f32", format = "gguf", out;
    uint64_t seed = 1;
  };
  auto o = std::make_shared<opts>();
  auto* cmd =
      app.add_subcommand("synth", "write a random-weight Llama model for benchmarks and tests");
  cmd->add_option("--preset", o->preset,
                  "bench-134m, llama-1b (TinyLlama's shape), tiny, tiny-k / tiny-k256 (sizes in "
                  "256s, for K-quants), moe-1b, tiny-moe or tiny-mla-moe")
      ->check(CLI::IsMember(synth_presets()));
  cmd->add_option("--dtype", o->type,
                  "f32, f16, bf16, q8_0, q4_0, mxfp4, or a K-quant (q2_k ... q6_k, or the q4_k_m / "
                  "q5_k_m mix: random blocks)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0", "q4_0", "q2_k", "q3_k", "q4_k", "q5_k",
                             "q6_k", "q4_k_m", "q5_k_m", "mxfp4"}));
  cmd->add_option("--format", o->format, "gguf (a file) or hf (a directory)")
      ->check(CLI::IsMember({"gguf", "hf"}));
  cmd->add_option("--out,-o", o->out, "output path")->required();
  cmd->add_option("--seed", o->seed, "weights seed");
  cmd->callback([&run, o] {
    run = [o]() -> int {
      synth_options s;
      s.preset = o->preset;
      s.k_m = o->type == "q4_k_m" || o->type == "q5_k_m";
      s.type = *parse_dtype(s.k_m ? o->type.substr(0, 4) : o->type);
      s.format = o->format;
      s.out = o->out;
      s.seed = o->seed;
      s.vocab_gguf = bundled_path(synth_preset_vocab(o->preset) == 512
                                      ? "stories260K/stories260K.gguf"
                                      : "llama2-tiny-random/llama-2-tiny-random.gguf");
      progress_line bar("synth " + o->preset + " " + o->type, true);
      auto st = synthesize(s, [&bar](int done, int total) { bar.update(done, total); });
      if (!st) return fail(st.error());
      bar.finish("-> " + o->out);
      return 0;
    };
  });
}

} // namespace troupe::cli
