// lease_table.hpp: who holds which KV blocks, and until when. A lease belongs to an owner
// (the actor that asked: a request's sink, or an engine) and covers one holder's blocks (a
// sequence, or an engine's whole share of the pool); each block reference in a lease is one
// reference in the kv_block_pool. Leases are renewed by use (renew), released when their
// holder ends (release), revoked all at once when their owner dies (revoke_owner), and
// reclaimed when they expire (expired). The table only keeps the books: callers return the
// listed blocks to the pool. Not thread-safe. Tests: tests/engine/lease_table_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace troupe {

class lease_table {
 public:
  struct lease {
    uint64_t owner = 0;
    std::vector<int32_t> blocks;
    double expires = 0; // seconds on the caller's clock
  };

  explicit lease_table(double ttl_s = 300)
      : ttl_(ttl_s) {}

  /// Adds one block reference to holder's lease (created on first use); renews it.
  void add(int64_t holder, uint64_t owner, int32_t block, double now);
  /// Removes one reference to `block` from the lease (copy-on-write replaced it).
  void drop(int64_t holder, int32_t block);
  void renew(int64_t holder, double now);
  /// Ends the lease; returns its block references (for the pool).
  std::vector<int32_t> release(int64_t holder);
  /// Holders of every lease `owner` holds (the caller releases them).
  std::vector<int64_t> holders_of(uint64_t owner) const;
  /// Holders whose lease expired before `now`.
  std::vector<int64_t> expired(double now) const;

  size_t size() const { return leases_.size(); }
  int64_t blocks_leased() const;
  const lease* find(int64_t holder) const;
  double ttl() const { return ttl_; }

 private:
  double ttl_;
  std::map<int64_t, lease> leases_;
};

} // namespace troupe
