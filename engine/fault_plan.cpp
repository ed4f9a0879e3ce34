// fault_plan.cpp: parsing and deterministic decisions (fault_plan.hpp).
#include "engine/fault_plan.hpp"

#include <charconv>
#include <sstream>

namespace troupe {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_str(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

} // namespace

status fault_plan::add(const std::string& spec) {
  auto bad = [&](std::string_view why) {
    return make_error(errc::invalid_argument, "--inject '{}': {}", spec, why);
  };
  const auto colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  fault_rule r;
  if (kind == "kill-shard")
    r.kind = fault_rule::kill_shard;
  else if (kind == "throw-kernel")
    r.kind = fault_rule::throw_kernel;
  else if (kind == "stall-shard")
    r.kind = fault_rule::stall_shard;
  else if (kind == "delay")
    r.kind = fault_rule::delay;
  else if (kind == "drop")
    r.kind = fault_rule::drop;
  else if (kind == "fail-alloc")
    r.kind = fault_rule::fail_alloc;
  else if (kind == "kill-worker")
    r.kind = fault_rule::kill_worker;
  else if (kind == "partition")
    r.kind = fault_rule::partition;
  else if (kind == "slow-link")
    r.kind = fault_rule::slow_link;
  else
    return bad("unknown fault (kill-shard, throw-kernel, stall-shard, delay, drop, fail-alloc, "
               "kill-worker, partition, slow-link)");
  bool has_p = false;
  if (colon != std::string::npos) {
    std::stringstream ss(spec.substr(colon + 1));
    for (std::string kv; std::getline(ss, kv, ',');) {
      const auto eq = kv.find('=');
      if (eq == std::string::npos) return bad(fmt::format("'{}' is not key=value", kv));
      const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
      auto num = [&](auto& out) {
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
        return ec == std::errc() && p == v.data() + v.size();
      };
      bool ok = true;
      if (k == "stage")
        ok = num(r.stage);
      else if (k == "rank")
        ok = num(r.rank);
      else if (k == "step")
        ok = num(r.step);
      else if (k == "seed")
        ok = num(r.seed);
      else if (k == "ms")
        ok = num(r.ms) && r.ms >= 0;
      else if (k == "count")
        ok = num(r.count) && r.count > 0;
      else if (k == "p") {
        try {
          size_t used = 0;
          r.p = std::stod(v, &used);
          ok = used == v.size() && r.p >= 0 && r.p <= 1;
        } catch (...) {
          ok = false;
        }
        has_p = true;
      } else if (k == "from")
        r.from = v;
      else if (k == "to")
        r.to = v;
      else
        return bad(fmt::format("unknown key '{}'", k));
      if (!ok) return bad(fmt::format("bad value for '{}'", k));
    }
  }
  if ((r.kind == fault_rule::kill_shard || r.kind == fault_rule::throw_kernel ||
       r.kind == fault_rule::stall_shard) &&
      r.step < 0 && !has_p)
    return bad("give step=K (with stage and rank) or p=P");
  if ((r.kind == fault_rule::delay || r.kind == fault_rule::drop) &&
      (r.from.empty() || r.to.empty()))
    return bad("give from= and to= actor names");
  if ((r.kind == fault_rule::delay || r.kind == fault_rule::stall_shard) && r.ms <= 0)
    return bad("give ms=M");
  if (r.kind == fault_rule::fail_alloc && r.step < 0) return bad("give step=K");
  const bool worker_fault = r.kind == fault_rule::kill_worker || r.kind == fault_rule::partition ||
                            r.kind == fault_rule::slow_link;
  if (worker_fault && r.rank < 0) return bad("give rank=R (the worker's rank)");
  if (worker_fault && r.stage >= 0) return bad("a worker fault takes rank=, not stage=");
  if ((r.kind == fault_rule::kill_worker || r.kind == fault_rule::partition) && r.step < 0 &&
      !has_p)
    return bad("give step=K or p=P");
  if ((r.kind == fault_rule::partition || r.kind == fault_rule::slow_link) && r.ms <= 0)
    return bad("give ms=M");
  rules_.push_back(r);
  specs_.push_back(spec);
  return {};
}

bool fault_plan::fires(const fault_rule& r, uint64_t step, uint64_t salt) const {
  if (r.step >= 0 && static_cast<uint64_t>(r.step) != step) return false;
  if (r.p >= 1.0) return true;
  const double u = static_cast<double>(mix(mix(r.seed ^ salt) ^ step) >> 11) / 9007199254740992.0;
  return u < r.p;
}

bool fault_plan::kill(int stage, int rank, uint64_t step) const {
  for (const auto& r : rules_)
    if (r.kind == fault_rule::kill_shard && (r.stage < 0 || r.stage == stage) &&
        (r.rank < 0 || r.rank == rank) &&
        fires(r, step, static_cast<uint64_t>(stage) * 1000003 + static_cast<uint64_t>(rank)))
      return true;
  return false;
}

bool fault_plan::throw_in_kernel(int stage, int rank, uint64_t step) const {
  for (const auto& r : rules_)
    if (r.kind == fault_rule::throw_kernel && (r.stage < 0 || r.stage == stage) &&
        (r.rank < 0 || r.rank == rank) &&
        fires(r, step, static_cast<uint64_t>(stage) * 7919 + static_cast<uint64_t>(rank)))
      return true;
  return false;
}

int fault_plan::stall_ms(int stage, int rank, uint64_t step) const {
  int ms = 0;
  for (const auto& r : rules_)
    if (r.kind == fault_rule::stall_shard && (r.stage < 0 || r.stage == stage) &&
        (r.rank < 0 || r.rank == rank) &&
        fires(r, step, static_cast<uint64_t>(stage) * 104729 + static_cast<uint64_t>(rank)))
      ms += r.ms;
  return ms;
}

bool fault_plan::kill_worker(int rank, uint64_t step) const {
  for (const auto& r : rules_)
    if (r.kind == fault_rule::kill_worker && r.rank == rank &&
        fires(r, step, 0x6b696c6c ^ static_cast<uint64_t>(rank)))
      return true;
  return false;
}

int fault_plan::partition_ms(int rank, uint64_t step) const {
  int ms = 0;
  for (const auto& r : rules_)
    if (r.kind == fault_rule::partition && r.rank == rank &&
        fires(r, step, 0x70617274 ^ static_cast<uint64_t>(rank)))
      ms += r.ms;
  return ms;
}

int fault_plan::slow_link_ms(int rank) const {
  int ms = 0;
  for (const auto& r : rules_)
    if (r.kind == fault_rule::slow_link && r.rank == rank) ms += r.ms;
  return ms;
}

int fault_plan::delay_ms(const std::string& from, const std::string& to, uint64_t step) const {
  int ms = 0;
  for (const auto& r : rules_)
    if (r.kind == fault_rule::delay && r.from == from && r.to == to &&
        fires(r, step, hash_str(from + ">" + to)))
      ms += r.ms;
  return ms;
}

bool fault_plan::drop(const std::string& from, const std::string& to, uint64_t step) const {
  for (const auto& r : rules_)
    if (r.kind == fault_rule::drop && r.from == from && r.to == to &&
        fires(r, step, hash_str(from + ">" + to)))
      return true;
  return false;
}

int fault_plan::fail_allocs(uint64_t step) const {
  int n = 0;
  for (const auto& r : rules_)
    if (r.kind == fault_rule::fail_alloc && static_cast<uint64_t>(r.step) == step) n += r.count;
  return n;
}

std::string fault_plan::to_string() const {
  std::string out;
  for (const auto& s : specs_) out += (out.empty() ? "" : " ") + s;
  return out;
}

} // namespace troupe
