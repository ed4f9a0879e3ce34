// comm_bench.cpp: what Troupe's UCX groups cost between processes on one machine, measured
// the way ucx_perftest measures UCX itself, so the two can be set side by side
// (bench/run_comm.sh does): point-to-point bandwidth of 1 MiB messages (rank 0 sends, rank 1
// receives; each send waits for its completion, as a stage boundary does), the small-message
// round trip (8 bytes there and back, reported as half, ucx_perftest's "latency"), and
// all-reduce latency at decode sizes (C = 768 and 8192 floats) over 2 and 4 ranks.
// Ranks are forked processes joined through ucx_world on 127.0.0.1; UCX_TLS applies as usual.
// Prints one JSON object per measurement.
//   comm_bench [--iters N] [--ranks 2,4]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "transport/ucx_world.hpp"

using namespace troupe;
using namespace troupe::transport;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

int die(const error& e) {
  std::fprintf(stderr, "comm_bench: %s\n", e.to_string().c_str());
  return 1;
}

int run_rank(int rank, int size, uint16_t port, int iters) {
  world_options o;
  o.rank = rank;
  o.size = size;
  o.master_port = port;
  o.secret = "comm-bench-secret";
  auto w = ucx_world::join(o);
  if (!w) return die(w.error());
  auto& g = (*w)->group();
  if (size == 2) {
    // bandwidth, 1 MiB one way
    std::vector<uint8_t> buf(1 << 20, static_cast<uint8_t>(rank));
    for (int warm = 0; warm < 20; ++warm) {
      auto st = rank == 0 ? g.send(1, buf.data(), 1 << 20) : g.recv(0, buf.data(), 1 << 20);
      if (!st) return die(st.error());
    }
    if (auto st = g.barrier(); !st) return die(st.error());
    const int n_bw = std::max(200, iters / 2); // 1 MiB each: ~0.25 s at 10 GB/s
    auto t0 = clock_type::now();
    for (int i = 0; i < n_bw; ++i) {
      auto st = rank == 0 ? g.send(1, buf.data(), 1 << 20) : g.recv(0, buf.data(), 1 << 20);
      if (!st) return die(st.error());
    }
    if (auto st = g.barrier(); !st) return die(st.error()); // the last message has landed
    const double bw = n_bw * double(1 << 20) / seconds_since(t0);
    // small-message round trip
    uint64_t x = 0;
    for (int i = 0; i < iters + 100; ++i) {
      if (i == 100) t0 = clock_type::now();
      auto st = rank == 0 ? g.send(1, &x, 8) : g.recv(0, &x, 8);
      if (st) st = rank == 0 ? g.recv(1, &x, 8) : g.send(0, &x, 8);
      if (!st) return die(st.error());
    }
    const double rtt = seconds_since(t0) / iters;
    if (rank == 0) {
      std::printf("{\"what\":\"p2p_bandwidth\",\"bytes\":1048576,\"GBps\":%.3f}\n", bw / 1e9);
      std::printf("{\"what\":\"p2p_latency\",\"bytes\":8,\"half_rtt_us\":%.2f}\n", rtt / 2 * 1e6);
    }
  }
  for (int64_t n : {int64_t{768}, int64_t{8192}}) {
    std::vector<float> v(n, 1.0f);
    double best = 1e9, sum = 0;
    int count = 0;
    for (int i = 0; i < iters + 100; ++i) {
      g.arm(0, i);
      const auto t0 = clock_type::now();
      auto st = g.all_reduce_sum(v.data(), n);
      const double s = seconds_since(t0);
      if (!st) return die(st.error());
      if (i >= 100) {
        best = std::min(best, s);
        sum += s;
        ++count;
      }
    }
    if (rank == 0)
      std::printf("{\"what\":\"all_reduce\",\"ranks\":%d,\"floats\":%lld,\"mean_us\":%.2f,"
                  "\"min_us\":%.2f}\n",
                  size, static_cast<long long>(n), sum / count * 1e6, best * 1e6);
  }
  std::fflush(stdout);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int iters = 2000;
  std::vector<int> sizes = {2, 4};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--iters")
      iters = std::max(10, std::atoi(argv[i + 1]));
    else if (a == "--ranks") {
      sizes.clear();
      for (char* p = argv[i + 1]; *p;) {
        sizes.push_back(static_cast<int>(std::strtol(p, &p, 10)));
        if (*p == ',') ++p;
      }
    }
  }
  int port = 29700 + getpid() % 200;
  for (int size : sizes) {
    std::vector<pid_t> pids;
    for (int r = 0; r < size; ++r) {
      const pid_t p = fork();
      if (p == 0) _exit(run_rank(r, size, static_cast<uint16_t>(port), iters));
      pids.push_back(p);
    }
    int failed = 0;
    for (pid_t p : pids) {
      int st = 0;
      waitpid(p, &st, 0);
      failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    if (failed) return 1;
    ++port;
  }
  return 0;
}
