// workers.hpp: the command-line face of worker processes, shared by `generate` and `serve`
// (--workers, --worker-of, --worker-port, --worker-host, --secret, --no-launch), and the
// `troupe worker` subcommand itself (rank and coordinator from RANK, MASTER_ADDR, MASTER_PORT
// as torchrun and Kubernetes set them, or from flags; the secret from --secret, TROUPE_SECRET
// or TROUPE_SECRET_FILE).
#pragma once

#include <functional>
#include <string>

#include "actors/host.hpp"

namespace CLI {
class App;
}

namespace troupe::cli {

struct worker_flags {
  int workers = 0;
  std::string worker_of; // "0,1,1,0": worker rank per shard in spawn order
  int port = 0;
  std::string host = "127.0.0.1";
  std::string secret;
  bool no_launch = false;
};

void add_worker_flags(CLI::App* cmd, worker_flags& f);
/// Fills the host's worker fields from the flags (and the secret from the environment).
status apply_worker_flags(const worker_flags& f, actors::host_options& ho);
/// The secret from --secret, else TROUPE_SECRET, else TROUPE_SECRET_FILE ("" when none).
expected<std::string> run_secret(const std::string& flag);

void add_worker(CLI::App& app, std::function<int()>& run);

} // namespace troupe::cli
