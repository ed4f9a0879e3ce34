// lease_table.cpp: lease bookkeeping (lease_table.hpp).
#include "engine/lease_table.hpp"

#include <algorithm>

namespace troupe {

void lease_table::add(int64_t holder, uint64_t owner, int32_t block, double now) {
  lease& l = leases_[holder];
  l.owner = owner;
  l.blocks.push_back(block);
  l.expires = now + ttl_;
}

void lease_table::drop(int64_t holder, int32_t block) {
  auto it = leases_.find(holder);
  if (it == leases_.end()) return;
  auto& b = it->second.blocks;
  if (auto pos = std::find(b.begin(), b.end(), block); pos != b.end()) b.erase(pos);
}

void lease_table::renew(int64_t holder, double now) {
  if (auto it = leases_.find(holder); it != leases_.end()) it->second.expires = now + ttl_;
}

std::vector<int32_t> lease_table::release(int64_t holder) {
  auto it = leases_.find(holder);
  if (it == leases_.end()) return {};
  std::vector<int32_t> out = std::move(it->second.blocks);
  leases_.erase(it);
  return out;
}

std::vector<int64_t> lease_table::holders_of(uint64_t owner) const {
  std::vector<int64_t> out;
  for (const auto& [h, l] : leases_)
    if (l.owner == owner) out.push_back(h);
  return out;
}

std::vector<int64_t> lease_table::expired(double now) const {
  std::vector<int64_t> out;
  for (const auto& [h, l] : leases_)
    if (l.expires < now) out.push_back(h);
  return out;
}

int64_t lease_table::blocks_leased() const {
  int64_t n = 0;
  for (const auto& [h, l] : leases_) n += static_cast<int64_t>(l.blocks.size());
  return n;
}

const lease_table::lease* lease_table::find(int64_t holder) const {
  auto it = leases_.find(holder);
  return it == leases_.end() ? nullptr : &it->second;
}

} // namespace troupe
