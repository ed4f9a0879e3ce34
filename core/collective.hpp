// collective.hpp: what a tensor-parallel shard needs from its communication group, as an
// interface (implemented in transport/: in-process rings today, UCX / NCCL later). Every
// rank of a group calls the same operations in the same order. all_reduce_sum leaves every
// rank with bit-identical sums (a fixed reduction order); all_gather concatenates each
// rank's `counts[r]` floats in rank order. A group whose member fails returns `unavailable`
// to the others instead of hanging. `solo_group` is the size-1 group (no communication).
#pragma once

#include <cstdint>
#include <span>

#include "core/expected.hpp"

namespace troupe {

class collective {
 public:
  virtual ~collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual status all_reduce_sum(float* data, int64_t n) = 0;
  virtual status all_gather(const float* in, float* out, std::span<const int64_t> counts) = 0;
};

class solo_group final : public collective {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  status all_reduce_sum(float*, int64_t) override { return {}; }
  status all_gather(const float* in, float* out, std::span<const int64_t> counts) override {
    for (int64_t i = 0; i < counts[0]; ++i) out[i] = in[i];
    return {};
  }
};

} // namespace troupe
