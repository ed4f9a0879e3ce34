// commands.hpp: each subcommand registers itself on the CLI11 app and, when chosen, sets
// `run` to the function main() calls after parsing.
#pragma once

#include <functional>

namespace CLI {
class App;
}

namespace troupe::cli {

void add_generate(CLI::App& app, std::function<int()>& run);
void add_synth(CLI::App& app, std::function<int()>& run);
void add_serve(CLI::App& app, std::function<int()>& run);
void add_bench(CLI::App& app, std::function<int()>& run);
void add_explain(CLI::App& app, std::function<int()>& run);
void add_plan(CLI::App& app, std::function<int()>& run);
void add_worker(CLI::App& app, std::function<int()>& run); // workers.cpp

} // namespace troupe::cli
