// convert.cpp (cpu): dtype conversions and q8_0 / q4_0 (de)quantization, threaded over
// 32-value blocks, using the scalar definitions of core/convert.hpp per chunk.
#include <algorithm>
#include <vector>

#include "core/convert.hpp"
#include "kernels/cpu/cpu.hpp"

namespace troupe::kernels::cpu {
namespace {

void convert(const op_args& a, const exec_ctx& ctx) {
  const dtype st = a.src[0].type, dt = a.dst.type;
  const int64_t n = a.src[0].numel();
  const int64_t blk = std::max(block_elems(st), block_elems(dt));
  parallel(ctx, n / blk, 1024, [&](int64_t b0, int64_t b1) {
    const int64_t i0 = b0 * blk, len = (b1 - b0) * blk;
    std::vector<float> tmp(len);
    to_f32(st, static_cast<const char*>(a.src[0].data) + row_bytes(st, i0), tmp.data(), len);
    from_f32(dt, tmp.data(), static_cast<char*>(a.dst.data) + row_bytes(dt, i0), len);
  });
}

} // namespace

void register_convert(registry& r) {
  auto ok = [](const op_args& a) { return contiguous_args(a); };
  r.add(op::convert, backend::cpu, "any", ok, convert);
  r.add(op::quantize, backend::cpu, "any", ok, convert);
  r.add(op::dequantize, backend::cpu, "any", ok, convert);
}

} // namespace troupe::kernels::cpu
