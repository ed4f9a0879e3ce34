// kv_block_pool.cpp: block bookkeeping with LRU-evictable prefix cache (kv_block_pool.hpp).
#include "engine/kv_block_pool.hpp"

#include <cassert>
#include <xxhash.h>

namespace troupe {

kv_block_pool::kv_block_pool(int32_t blocks, int32_t block_size)
    : block_size_(block_size)
    , ref_(blocks, 0)
    , lru_pos_(blocks)
    , in_lru_(blocks, 0)
    , hash_of_(blocks, 0)
    , published_(blocks, 0) {
  for (int32_t b = blocks - 1; b >= 1; --b) free_.push_back(b); // pop_back hands out 1, 2, ...
}

uint64_t kv_block_pool::chain_hash(uint64_t prev, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), prev ^ 0x9e3779b97f4a7c15ull);
}

int32_t kv_block_pool::allocate() {
  if (fail_next_ > 0) {
    --fail_next_;
    return -1;
  }
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    in_lru_[b] = 0;
    unpublish(b);
    ++evictions_;
  } else {
    return -1;
  }
  ref_[b] = 1;
  return b;
}

void kv_block_pool::retain(int32_t b) {
  assert(b > 0);
  if (ref_[b]++ == 0 && in_lru_[b]) {
    lru_.erase(lru_pos_[b]);
    in_lru_[b] = 0;
  }
}

void kv_block_pool::release(int32_t b) {
  assert(b > 0 && ref_[b] > 0);
  if (--ref_[b] > 0) return;
  if (published_[b]) {
    lru_.push_back(b);
    lru_pos_[b] = std::prev(lru_.end());
    in_lru_[b] = 1;
  } else {
    free_.push_back(b);
  }
}

int32_t kv_block_pool::lookup(uint64_t hash) {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  retain(it->second);
  ++hits_;
  return it->second;
}

void kv_block_pool::publish(int32_t b, uint64_t hash) {
  if (published_[b] || by_hash_.count(hash)) return;
  by_hash_.emplace(hash, b);
  hash_of_[b] = hash;
  published_[b] = 1;
}

void kv_block_pool::clear_cache() {
  for (int32_t b : lru_) {
    in_lru_[b] = 0;
    free_.push_back(b);
  }
  lru_.clear();
  for (auto& [h, b] : by_hash_) published_[b] = 0;
  by_hash_.clear();
}

void kv_block_pool::unpublish(int32_t b) {
  if (!published_[b]) return;
  by_hash_.erase(hash_of_[b]);
  published_[b] = 0;
}

} // namespace troupe
