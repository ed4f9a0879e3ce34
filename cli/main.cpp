// main.cpp: the `troupe` command: parses the subcommand (generate, synth, ...) and runs it.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "arch/spec.hpp"
#include "commands.hpp"
#include "core/log.hpp"
#include "kernels/device.hpp"

int main(int argc, char** argv) {
  CLI::App app{"troupe: serve large language models split across devices and machines"};
  app.require_subcommand(0, 1);
  bool version = false;
  std::string log_level;
  std::vector<std::string> arch_specs;
  app.add_flag("--version", version, "print the version");
  app.add_option("--log", log_level, "log level: trace, debug, info, warn, error, off");
  app.add_option("--arch-spec", arch_specs,
                 "an architecture spec file (JSON) defining a family from existing ops; "
                 "repeatable, before or after the subcommand");
  app.fallthrough();
  std::function<int()> run;
  troupe::cli::add_generate(app, run);
  troupe::cli::add_synth(app, run);
  troupe::cli::add_serve(app, run);
  troupe::cli::add_bench(app, run);
  troupe::cli::add_explain(app, run);
  troupe::cli::add_plan(app, run);
  troupe::cli::add_worker(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are 0; any misuse of the command line is 2, as fail()'s bad input
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!log_level.empty()) {
    troupe::log_level lv;
    if (!troupe::log_parse_level(log_level, lv)) {
      fmt::print(stderr, "troupe: unknown log level '{}'\n", log_level);
      return 2;
    }
    troupe::log_set_level(lv);
  }
  for (const auto& path : arch_specs) {
    auto spec = troupe::load_arch_spec(path);
    if (!spec) {
      fmt::print(stderr, "troupe: {}\n", spec.error().to_string());
      return 2;
    }
    troupe::register_arch_spec(std::move(*spec));
  }
  if (version) {
    fmt::print("troupe {} (cuda: {})\n", TROUPE_VERSION,
               troupe::kernels::cuda_available() ? "yes" : "no");
    return 0;
  }
  if (!run) {
    fmt::print("{}", app.help());
    return 0;
  }
  return run();
}
