// kv_block_pool.hpp: fixed pool of KV-cache blocks with reference counts and chained prefix
// hashes for reuse. Owns bookkeeping only; the bytes live in each shard's arena, where
// logical block ids are the same on every shard. Invariant: block 0 is the null block and is
// never handed out. A full block may be published under the chained hash of its tokens
// (hash of the previous block's hash and this block's tokens); a later sequence with the
// same prefix takes it with lookup() (reference counted). Blocks whose count drops to zero
// stay cached (evictable, least recently used first) until allocate() needs them.
// free_count() counts free plus evictable blocks: after a run it returns to total().
// Owned by the supervisor / engine; not thread-safe. Tests: tests/engine/scheduler_test.cpp
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace troupe {

class kv_block_pool {
 public:
  /// `blocks` includes the null block 0; `block_size` is P (tokens per block).
  kv_block_pool(int32_t blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int32_t total() const { return static_cast<int32_t>(ref_.size()) - 1; }
  int32_t free_count() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  int32_t used_count() const { return total() - free_count(); }

  /// A block for writing (count 1), evicting the least recently used cached block when the
  /// free list is empty; -1 when every block is in use.
  int32_t allocate();
  void retain(int32_t block);
  void release(int32_t block);
  int32_t refcount(int32_t block) const { return ref_.at(block); }
  /// Fault injection: the next `n` allocate() calls fail as if the pool were empty.
  void fail_next(int n) { fail_next_ += n; }

  /// The cached block published under `hash`, retained; -1 when none.
  int32_t lookup(uint64_t hash);
  /// Marks a full, written block as reusable under `hash` (no-op if the hash is taken).
  void publish(int32_t block, uint64_t hash);
  /// Forgets every cached block (their bytes are gone, e.g. a shard restarted). Blocks in
  /// use stay allocated but are no longer findable.
  void clear_cache();
  /// Chained hash of one full block of tokens.
  static uint64_t chain_hash(uint64_t prev, std::span<const int32_t> tokens);

  int64_t hits() const { return hits_; }
  int64_t evictions() const { return evictions_; }

 private:
  void unpublish(int32_t block);

  int32_t block_size_;
  std::vector<int32_t> ref_;
  std::vector<int32_t> free_; // never cached or unpublished, count 0
  std::list<int32_t> lru_;    // cached, count 0; front = oldest
  std::vector<std::list<int32_t>::iterator> lru_pos_;
  std::vector<uint8_t> in_lru_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::vector<uint64_t> hash_of_;
  std::vector<uint8_t> published_;
  int64_t hits_ = 0, evictions_ = 0;
  int fail_next_ = 0;
};

} // namespace troupe
