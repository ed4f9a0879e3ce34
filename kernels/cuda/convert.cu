// convert.cu: element type conversions (convert: f32 / f16 / bf16 both ways, round to nearest
// even as core/half.hpp), GGUF's q8_0 / q4_0 quantization and its inverse (one thread per
// 32-value block, the reference's arithmetic: q8_0 rounds half away from zero, q4_0 scales by
// the signed largest value over -8), and two helpers of the GEMMs: activations rounded to
// bf16 / f16 (and the remainder, for exact activations), and a bias added to every row.
#include "kernels/cuda/common.cuh"

namespace troupe::kernels::cuda {
namespace {

__global__ void convert_kernel(const void* x, int ex, void* y, int ey, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    store_elem(y, i, ey, load_elem(x, i, ex));
}

__global__ void quantize_kernel(const float* x, uint8_t* q, long long blocks, bool q4) {
  for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks;
       b += (long long)gridDim.x * blockDim.x) {
    const float* v = x + b * q_block;
    uint8_t* out = q + b * (q4 ? q4_block_bytes : q8_block_bytes);
    float amax = 0.0f, mx = 0.0f;
    for (int j = 0; j < q_block; ++j)
      if (fabsf(v[j]) > amax) amax = fabsf(v[j]), mx = v[j];
    const float d = q4 ? mx / -8.0f : amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    // the scale's bits by value: reading the __half's bytes through a pointer gave a zero low
    // byte on sm_90 (nvcc 13.0; seen on an H200 by the op harness)
    const unsigned short dh = __half_as_ushort(__float2half_rn(d));
    out[0] = static_cast<uint8_t>(dh & 0xffu);
    out[1] = static_cast<uint8_t>(dh >> 8);
    if (!q4) {
      for (int j = 0; j < q_block; ++j)
        out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(v[j] * id)));
    } else {
      for (int j = 0; j < q_block / 2; ++j) { // no fused multiply-add: the host rounds first
        const int q0 = min(15, static_cast<int>(__fadd_rn(__fmul_rn(v[j], id), 8.5f)));
        const int q1 =
            min(15, static_cast<int>(__fadd_rn(__fmul_rn(v[j + q_block / 2], id), 8.5f)));
        out[2 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    }
  }
}

__global__ void dequantize_kernel(const uint8_t* q, float* y, long long n, bool q4) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const uint8_t* b = q + (i / q_block) * (q4 ? q4_block_bytes : q8_block_bytes);
    y[i] = block_value(b, static_cast<int>(i % q_block), q4);
  }
}

__global__ void to_half_kernel(const float* x, void* hi, void* lo, long long n, int e) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = x[i];
    store_elem(hi, i, e, v);
    if (lo) store_elem(lo, i, e, v - load_elem(hi, i, e));
  }
}

__global__ void add_bias_kernel(float* y, const float* bias, long long T, long long N) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < T * N;
       i += (long long)gridDim.x * blockDim.x)
    y[i] += bias[i % N];
}

} // namespace

status launch_convert(const op_args& a, const exec_ctx& c) {
  const long long n = a.src[0].numel();
  convert_kernel<<<grid_for(n), 256, 0, stream_of(c)>>>(a.src[0].data, elem_of(a.src[0].type),
                                                        a.dst.data, elem_of(a.dst.type), n);
  return check_launch("convert", c);
}

status launch_quantize(const op_args& a, const exec_ctx& c) {
  const long long blocks = a.src[0].numel() / q_block;
  quantize_kernel<<<grid_for(blocks), 256, 0, stream_of(c)>>>(
      a.src[0].as<float>(), static_cast<uint8_t*>(a.dst.data), blocks, a.dst.type == dtype::q4_0);
  return check_launch("quantize", c);
}

status launch_dequantize(const op_args& a, const exec_ctx& c) {
  const long long n = a.dst.numel();
  dequantize_kernel<<<grid_for(n), 256, 0, stream_of(c)>>>(
      static_cast<const uint8_t*>(a.src[0].data), a.dst.as<float>(), n,
      a.src[0].type == dtype::q4_0);
  return check_launch("dequantize", c);
}

status launch_to_half(const float* x, void* hi, void* lo, long long n, bool bf16,
                      const exec_ctx& c) {
  to_half_kernel<<<grid_for(n), 256, 0, stream_of(c)>>>(x, hi, lo, n, bf16 ? e_bf16 : e_f16);
  return check_launch("to_half", c);
}

status launch_add_bias(float* y, const float* bias, long long T, long long N, const exec_ctx& c) {
  add_bias_kernel<<<grid_for(T * N), 256, 0, stream_of(c)>>>(y, bias, T, N);
  return check_launch("add_bias", c);
}

} // namespace troupe::kernels::cuda
