// executor_collectives.cpp: the graph's collectives on a shard's tensor-parallel group
// (executor.hpp): all_reduce nodes (a sum in place, or the ranks' maximum for reduce_max) and the
// vocabulary-parallel logits' all_gather, over host memory (through it from a device whose group
// takes host memory) or, with NCCL, on the devices.
#include <algorithm>
#include <cstring>

#include "exec/executor.hpp"
#include "exec/executor_impl.hpp"

namespace troupe::exec {

using namespace detail;

std::vector<int64_t> executor::gather_block_counts(int64_t N, int64_t& total) const {
  std::vector<int64_t> counts(gather_counts_.size());
  total = 0;
  for (size_t r = 0; r < counts.size(); ++r) total += counts[r] = N * gather_counts_[r];
  return counts;
}

status executor::interleave_gathered(const float* blocks, float* rows, int64_t N, int64_t V,
                                     bool device) const {
  // rank r's block is [N, Vs_r]: interleave into rows of V
  int64_t base = 0, v0 = 0;
  for (const int64_t vs : gather_counts_) {
    for (int64_t k = 0; k < N; ++k) {
      const size_t bytes = static_cast<size_t>(vs) * sizeof(float);
      if (device)
        TROUPE_TRY(be_->copy(rows + k * V + v0, blocks + base + k * vs, bytes));
      else
        std::memcpy(rows + k * V + v0, blocks + base + k * vs, bytes);
    }
    base += N * vs;
    v0 += vs;
  }
  return {};
}

status executor::gather_on_device(const tensor_view& part, const tensor_view& all, int64_t N) {
  int64_t total = 0;
  const auto counts = gather_block_counts(N, total);
  if (static_cast<size_t>(total) * sizeof(float) > scratch_.size())
    return make_error(errc::internal, "gathered logits ({} values) exceed the scratch", total);
  auto* buf = static_cast<float*>(scratch_.data()); // the ranks' blocks, in rank order
  TROUPE_TRY(comm_->all_gather(part.as<float>(), buf, counts));
  return interleave_gathered(buf, all.as<float>(), N, all.cols(), true);
}

status executor::all_reduce_max(const tensor_view& t) {
  // (a few values a token: gathered from every rank, the maximum taken on the host)
  const int64_t n = t.numel(), R = spec_.tp_size;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  host_tmp_.resize(static_cast<size_t>(n * (R + 1)));
  float* all = host_tmp_.data();
  float* mine = all + n * R;
  const std::vector<int64_t> counts(static_cast<size_t>(R), n);
  if (on_device_ && comm_->device_memory()) { // NCCL: gathered on the GPUs, then brought over
    if (static_cast<size_t>(n * R) * sizeof(float) > scratch_.size())
      return make_error(errc::internal, "gathered maxima ({} values) exceed the scratch", n * R);
    auto* buf = static_cast<float*>(scratch_.data());
    TROUPE_TRY(comm_->all_gather(t.as<float>(), buf, counts));
    TROUPE_TRY(be_->download(all, buf, bytes * static_cast<size_t>(R)));
  } else {
    if (on_device_)
      TROUPE_TRY(be_->download(mine, t.data, bytes));
    else
      std::memcpy(mine, t.data, bytes);
    TROUPE_TRY(comm_->all_gather(mine, all, counts));
  }
  for (int64_t i = 0; i < n; ++i) {
    float m = all[i];
    for (int64_t r = 1; r < R; ++r) m = std::max(m, all[r * n + i]);
    mine[i] = m;
  }
  if (on_device_) return be_->upload(t.data, mine, bytes);
  std::memcpy(t.data, mine, bytes);
  return {};
}

status executor::all_reduce(const tensor_view& t, bool max) {
  if (max) return all_reduce_max(t);
  if (on_device_ && !comm_->device_memory()) { // the group sums host memory: through it
    const size_t bytes = static_cast<size_t>(t.numel()) * sizeof(float);
    host_tmp_.resize(static_cast<size_t>(t.numel()));
    TROUPE_TRY(be_->download(host_tmp_.data(), t.data, bytes));
    TROUPE_TRY(comm_->all_reduce_sum(host_tmp_.data(), t.numel()));
    return be_->upload(t.data, host_tmp_.data(), bytes);
  }
  return comm_->all_reduce_sum(t.as<float>(), t.numel());
}

status executor::all_gather(const tensor_view& part, const tensor_view& all, int64_t N) {
  if (on_device_ && comm_->device_memory()) // NCCL: gathered on the GPUs
    return gather_on_device(part, all, N);
  int64_t total = 0;
  const auto counts = gather_block_counts(N, total);
  gathered_.resize(static_cast<size_t>(total));
  const float* mine = part.as<float>();
  if (on_device_) { // the group gathers host memory: through the host
    host_tmp_.resize(static_cast<size_t>(part.numel()));
    TROUPE_TRY(be_->download(host_tmp_.data(), part.data,
                             static_cast<size_t>(part.numel()) * sizeof(float)));
    mine = host_tmp_.data();
  }
  TROUPE_TRY(comm_->all_gather(mine, gathered_.data(), counts));
  const int64_t V = all.cols();
  std::vector<float> rows_host;
  float* rows = all.as<float>();
  if (on_device_) {
    rows_host.resize(static_cast<size_t>(N * V));
    rows = rows_host.data();
  }
  TROUPE_TRY(interleave_gathered(gathered_.data(), rows, N, V, false));
  if (on_device_)
    TROUPE_TRY(be_->upload(all.data, rows_host.data(), rows_host.size() * sizeof(float)));
  return {};
}

} // namespace troupe::exec
