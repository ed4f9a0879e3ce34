// tensor.cpp: shape arithmetic and view helpers (tensor.hpp).
#include "core/tensor.hpp"

#include <cassert>

namespace troupe {

shape::shape(std::initializer_list<int64_t> ds) {
  assert(ds.size() <= max_rank);
  for (int64_t d : ds) dims[rank++] = d;
}

int64_t shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

int64_t shape::rows() const {
  int64_t n = 1;
  for (int i = 0; i + 1 < rank; ++i) n *= dims[i];
  return n;
}

bool shape::operator==(const shape& other) const {
  if (rank != other.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != other.dims[i]) return false;
  return true;
}

std::string shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) out += ", ";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

tensor_view::tensor_view(void* ptr, dtype t, shape s)
    : data(ptr)
    , type(t)
    , dims(s) {
  int64_t stride = row_bytes(t, dims.rank ? dims[dims.rank - 1] : 1);
  // The innermost stride is the element size; quantized types have no per-element stride.
  if (dims.rank) strides[dims.rank - 1] = is_quantized(t) ? 0 : info(t).block_bytes;
  for (int i = dims.rank - 2; i >= 0; --i) {
    strides[i] = stride;
    stride *= dims[i];
  }
}

int64_t tensor_view::nbytes() const {
  return dims.rows() * row_bytes(type, cols());
}

bool tensor_view::contiguous() const {
  if (dims.rank == 0) return true;
  int64_t expect = row_bytes(type, dims[dims.rank - 1]);
  for (int i = dims.rank - 2; i >= 0; --i) {
    if (dims[i] > 1 && strides[i] != expect) return false;
    expect *= dims[i];
  }
  return true;
}

tensor_view tensor_view::slice_rows(int64_t begin, int64_t end) const {
  tensor_view v = *this;
  if (dims.rank == 0) return v;
  const int64_t outer_stride = dims.rank == 1 ? row_bytes(type, 1) : strides[0];
  v.data = static_cast<char*>(data) + begin * outer_stride;
  v.dims[0] = end - begin;
  v.packed = packed && dims.rank == 2 && begin % packed_slice_rows == 0
                 ? static_cast<const char*>(packed) + begin * outer_stride
                 : nullptr;
  return v;
}

tensor_view tensor_view::reshape(shape s) const {
  return tensor_view(data, type, s);
}

} // namespace troupe
