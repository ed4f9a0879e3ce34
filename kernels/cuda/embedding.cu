// embedding.cu: dst[t] = table[ids[t]] as f32, for tables in f32, f16, bf16, q8_0 or q4_0; an
// id outside [0, V) (another shard's vocabulary slice: tokens_local is -1 there) gives zeros, or
// row 0 with p.ids_row0.
// One block per token, threads over the row.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

// kind: 0 f32, 1 f16, 2 bf16 (elem), 3 q8_0, 4 q4_0
__global__ void embedding_kernel(const uint8_t* table, const int32_t* ids, float* y, long long V,
                                 long long C, long long row_bytes, int kind, bool row0) {
  const long long t = blockIdx.x;
  int32_t id = ids[t];
  float* out = y + t * C;
  if (id < 0 || id >= V) {
    if (!row0 || V == 0) {
      for (long long c = threadIdx.x; c < C; c += blockDim.x) out[c] = 0.0f;
      return;
    }
    id = 0;
  }
  const uint8_t* row = table + id * row_bytes;
  for (long long c = threadIdx.x; c < C; c += blockDim.x) {
    if (kind <= e_bf16) {
      out[c] = load_elem(row, c, kind);
    } else {
      const uint8_t* b = row + (c / q_block) * (kind == 3 ? q8_block_bytes : q4_block_bytes);
      out[c] = block_value(b, static_cast<int>(c % q_block), kind == 4);
    }
  }
}

} // namespace

status launch_embedding(const op_args& a, const exec_ctx& c) {
  const auto& tb = a.src[0];
  const int kind = tb.type == dtype::q8_0 ? 3 : tb.type == dtype::q4_0 ? 4 : elem_of(tb.type);
  const long long T = a.src[1].numel();
  if (T == 0) return {};
  embedding_kernel<<<static_cast<unsigned>(T), 256, 0, stream_of(c)>>>(
      static_cast<const uint8_t*>(tb.data), a.src[1].as<int32_t>(), a.dst.as<float>(), tb.rows(),
      tb.cols(), row_bytes(tb.type, tb.cols()), kind, a.p.ids_row0);
  return check_launch("embedding", c);
}

} // namespace troupe::kernels::cuda
