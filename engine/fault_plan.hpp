// fault_plan.hpp: fault injection as configuration (`--inject`, repeatable). Rules:
//   kill-shard:stage=S,rank=R,step=K     kill shard (S, R) when it receives step K
//   kill-shard:p=P,seed=N                kill each shard with probability P at each step
//   throw-kernel:stage=S,rank=R,step=K   throw inside the shard's forward pass at step K
//   stall-shard:stage=S,rank=R,step=K,ms=M  the shard hangs M ms inside step K (a hung device)
//   delay:from=A,to=B,ms=M[,p=P,seed=N]  delay messages from actor A to actor B
//   drop:from=A,to=B[,p=P,seed=N]        drop messages from A to B (the step times out)
//   fail-alloc:step=K[,count=C]          the KV pool refuses C allocations from step K on
// Actor names: "engine", "stage<S>.rank<R>". Every decision is a pure function of the
// rule, its seed and the step, so the same seed gives the same faults. Thread-safe (const).
// Tests: tests/actors/fault_test.cpp
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

struct fault_rule {
  enum kind_t {
    kill_shard,
    throw_kernel,
    stall_shard,
    delay,
    drop,
    fail_alloc,
    kill_worker, // the worker process of rank `rank` dies (SIGKILL) at `step`
    partition,   // ... stops sending and receiving for ms (frozen: SIGSTOP, then SIGCONT)
    slow_link,   // ... sends every message ms late
  } kind;
  int stage = -1, rank = -1; // -1: any (kill-worker, partition, slow-link: the worker rank)
  int64_t step = -1;         // -1: any step (with p)
  double p = 1.0;
  uint64_t seed = 0;
  std::string from, to;
  int ms = 0;
  int count = 1;
};

class fault_plan {
 public:
  /// Parses one --inject value and adds it; invalid_argument names what is wrong.
  status add(const std::string& spec);
  bool empty() const { return rules_.empty(); }
  const std::vector<fault_rule>& rules() const { return rules_; }

  bool kill(int stage, int rank, uint64_t step) const;
  bool throw_in_kernel(int stage, int rank, uint64_t step) const;
  /// Milliseconds shard (stage, rank) hangs inside `step` (0: none).
  int stall_ms(int stage, int rank, uint64_t step) const;
  /// Milliseconds to delay a message from `from` to `to` at `step` (0: none).
  int delay_ms(const std::string& from, const std::string& to, uint64_t step) const;
  bool drop(const std::string& from, const std::string& to, uint64_t step) const;
  /// Worker processes (`rank` is the worker's): die at `step`? freeze for how many ms?
  bool kill_worker(int rank, uint64_t step) const;
  int partition_ms(int rank, uint64_t step) const;
  /// Milliseconds every message from worker `rank` is late (0: none).
  int slow_link_ms(int rank) const;
  /// KV allocations to refuse at `step`.
  int fail_allocs(uint64_t step) const;
  std::string to_string() const;
  /// The --inject values it was built from (sent to worker processes, which parse them again).
  const std::vector<std::string>& specs() const { return specs_; }

 private:
  bool fires(const fault_rule& r, uint64_t step, uint64_t salt) const;
  std::vector<fault_rule> rules_;
  std::vector<std::string> specs_;
};

} // namespace troupe
