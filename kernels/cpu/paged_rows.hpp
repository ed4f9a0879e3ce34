// paged_rows.hpp (cpu, internal): the queries of a step's sequence table and the rows of a paged
// cache, for the kernels that walk them one query at a time (sparse.cpp: DeepSeek Sparse
// Attention; compress.cpp: DeepSeek-V4's compressed attention).
#pragma once

#include <vector>

#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {

/// One query of the step: its row, position, and its sequence's block table.
struct query_ref {
  int64_t t, pos;
  const int32_t* blocks;
};

/// The step's queries, sequence by sequence (seqs: i32 [S, 3 + MB]).
inline std::vector<query_ref> queries(const tensor_view& seqs) {
  std::vector<query_ref> out;
  for (int64_t si = 0; si < seqs.rows(); ++si) {
    const int32_t* info = seqs.row<int32_t>(si);
    for (int64_t i = 0; i < info[1]; ++i) out.push_back({info[0] + i, info[2] + i, info + 3});
  }
  return out;
}

/// KV head kh's row of position (or entry) s of a sequence in cache c [NB, P, Hkv, D].
inline const char* row_at(const tensor_view& c, const int32_t* blocks, int64_t s, int64_t kh) {
  const int64_t P = c.dims[1], Hkv = c.dims[2], D = c.dims[3];
  const int64_t slot = static_cast<int64_t>(blocks[s / P]) * P + s % P;
  return static_cast<const char*>(c.data) + row_bytes(c.type, (slot * Hkv + kh) * D);
}

} // namespace troupe::kernels::cpu
