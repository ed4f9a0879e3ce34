// convert.cpp (ref): dtype conversions and GGUF quantization through core/convert.hpp,
// the scalar specification.
#include "kernels/ref/ref.hpp"

namespace troupe::kernels::ref {
namespace {

void convert(const op_args& a, const exec_ctx&) {
  const int64_t n = a.src[0].numel();
  std::vector<float> tmp(n);
  to_f32(a.src[0].type, a.src[0].data, tmp.data(), n);
  from_f32(a.dst.type, tmp.data(), a.dst.data, n);
}

} // namespace

void register_convert(registry& r) {
  r.add(
      op::convert, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); },
      convert);
  r.add(
      op::quantize, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); },
      convert);
  r.add(
      op::dequantize, backend::ref, "any", [](const op_args& a) { return all_contiguous(a); },
      convert);
}

} // namespace troupe::kernels::ref
