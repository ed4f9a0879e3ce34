// workers.cpp: worker-process flags and `troupe worker` (workers.hpp).
#include "workers.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdlib>
#include <sstream>

#include "actors/worker_node.hpp"
#include "common.hpp"
#include "core/log.hpp"
#include "transport/auth.hpp"

namespace troupe::cli {

void add_worker_flags(CLI::App* cmd, worker_flags& f) {
  cmd->add_option("--workers", f.workers,
                  "run every shard in one of N worker processes (launched here unless "
                  "--no-launch)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--worker-of", f.worker_of,
                  "worker rank of each shard in spawn order (stage by stage, rank by rank), "
                  "e.g. 0,1,2,3; default: shard i on worker i % N");
  cmd->add_option("--worker-port", f.port, "where workers join (0: a free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--worker-host", f.host, "address the worker registry listens on");
  cmd->add_option("--secret", f.secret,
                  "the run's shared secret (else TROUPE_SECRET or TROUPE_SECRET_FILE; launched "
                  "workers get a random one)");
  cmd->add_flag("--no-launch", f.no_launch,
                "do not start the workers: wait for `troupe worker` processes to join");
}

expected<std::string> run_secret(const std::string& flag) {
  if (!flag.empty()) return flag;
  return transport::secret_from_env();
}

status apply_worker_flags(const worker_flags& f, actors::host_options& ho) {
  if (f.workers <= 0) {
    if (!f.worker_of.empty() || f.no_launch)
      return make_error(errc::invalid_argument, "--worker-of and --no-launch need --workers N");
    return {};
  }
  ho.workers = f.workers;
  ho.worker_host = f.host;
  ho.worker_port = static_cast<uint16_t>(f.port);
  TROUPE_TRY_ASSIGN(secret, run_secret(f.secret));
  ho.secret = secret;
  if (!f.worker_of.empty()) {
    std::stringstream ss(f.worker_of);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      const long w = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end || w < 0 || w >= f.workers)
        return make_error(errc::invalid_argument, "--worker-of: '{}' is not a worker rank 0..{}",
                          item, f.workers - 1);
      ho.shard_worker.push_back(static_cast<int>(w));
    }
  }
  if (!f.no_launch) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) return make_error(errc::io_error, "cannot find this executable to launch workers");
    ho.worker_exe.assign(buf, static_cast<size_t>(n));
  } else if (ho.secret.size() < 8) {
    return make_error(errc::invalid_argument,
                      "--no-launch: workers that join by themselves need a secret of at least 8 "
                      "bytes (--secret, TROUPE_SECRET or TROUPE_SECRET_FILE)");
  }
  return {};
}

namespace {

struct worker_opts {
  int rank = -1;
  std::string coordinator, secret;
  int port = 0;
  double join_timeout = 60;
  int caf_threads = 2;
};

int run(const worker_opts& o) {
  actors::worker_options w;
  auto env_int = [](const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : fallback;
  };
  w.rank = o.rank >= 0 ? o.rank : env_int("RANK", -1);
  if (w.rank < 0)
    return fail(make_error(errc::invalid_argument, "troupe worker: no rank (--rank or RANK)"));
  const char* addr = std::getenv("MASTER_ADDR");
  w.coordinator = !o.coordinator.empty() ? o.coordinator : addr && *addr ? addr : "127.0.0.1";
  const int port = o.port > 0 ? o.port : env_int("MASTER_PORT", 29500);
  if (port <= 0 || port > 65535)
    return fail(make_error(errc::invalid_argument, "troupe worker: port {} out of range", port));
  w.port = static_cast<uint16_t>(port);
  auto secret = run_secret(o.secret);
  if (!secret) return fail(secret.error());
  if (secret->size() < 8)
    return fail(make_error(errc::invalid_argument,
                           "troupe worker: the run's secret (at least 8 bytes) is needed: "
                           "--secret, TROUPE_SECRET or TROUPE_SECRET_FILE"));
  w.secret = *secret;
  w.join_timeout_s = o.join_timeout;
  w.caf_threads = o.caf_threads;
  return actors::run_worker(w);
}

} // namespace

void add_worker(CLI::App& app, std::function<int()>& run_fn) {
  auto o = std::make_shared<worker_opts>();
  auto* cmd = app.add_subcommand("worker", "hold shards for a coordinator (troupe serve)");
  cmd->add_option("--rank", o->rank, "this worker's rank (else RANK)");
  cmd->add_option("--coordinator", o->coordinator, "the coordinator's address (else MASTER_ADDR)");
  cmd->add_option("--port", o->port, "the coordinator's worker port (else MASTER_PORT)");
  cmd->add_option("--secret", o->secret, "the run's secret (else TROUPE_SECRET[_FILE])");
  cmd->add_option("--join-timeout", o->join_timeout, "seconds to wait for the coordinator");
  cmd->add_option("--caf-threads", o->caf_threads, "actor scheduler threads")
      ->check(CLI::Range(1, 64));
  cmd->callback([o, &run_fn] { run_fn = [o] { return run(*o); }; });
}

} // namespace troupe::cli
