// tensor.hpp: shapes and non-owning tensor views. A `shape` holds up to 4 dimensions, outermost
// first (row-major: the last dimension is contiguous), as PyTorch and safetensors write them.
// A `tensor_view` is a pointer, a dtype, a shape and byte strides (ggml's nb); it never owns
// memory. Views over quantized dtypes must be contiguous in their last dimension, whose length
// is a multiple of the block size. Owned memory is buffer.hpp; file-backed is mapped_file.hpp.
// Tests: tests/core/tensor_test.cpp
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.hpp"

namespace troupe {

inline constexpr int max_rank = 4;

struct shape {
  int rank = 0;
  std::array<int64_t, max_rank> dims{};

  shape() = default;
  shape(std::initializer_list<int64_t> ds);

  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const;
  /// Product of all but the last dimension: the number of rows of a row-major matrix view.
  int64_t rows() const;
  int64_t cols() const { return rank ? dims[rank - 1] : 1; }
  bool operator==(const shape& other) const;
  bool operator!=(const shape& other) const { return !(*this == other); }
  std::string to_string() const; // "[512, 64]"
};

struct tensor_view {
  void* data = nullptr;
  dtype type = dtype::f32;
  shape dims;
  std::array<int64_t, max_rank> strides{}; // bytes between consecutive indices per dimension
  // A weight's rows as a backend's kernels read them fastest, prepared once at load
  // (backend::pack; the CPU: q4_0 / Q4_K in groups of 8 or 16 interleaved rows, as many bytes
  // as `data`, group g at g * G row lengths), or null. Kept by row slices that start at a
  // multiple of packed_slice_rows (a boundary of every layout's groups).
  const void* packed = nullptr;
  static constexpr int64_t packed_slice_rows = 16;

  tensor_view() = default;
  /// A contiguous row-major view.
  tensor_view(void* ptr, dtype t, shape s);

  int64_t numel() const { return dims.numel(); }
  int64_t rows() const { return dims.rows(); }
  int64_t cols() const { return dims.cols(); }
  int64_t nbytes() const; // bytes spanned by a contiguous view
  bool contiguous() const;
  /// Row i of a view seen as a [rows, cols] matrix (contiguous views only).
  template <class T = void>
  T* row(int64_t i) const {
    return reinterpret_cast<T*>(static_cast<char*>(data) + i * row_bytes(type, cols()));
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  /// Rows [begin, end) of the outermost dimension (zero-copy; keeps strides).
  tensor_view slice_rows(int64_t begin, int64_t end) const;
  /// The same bytes seen with another shape of equal element count (contiguous views only).
  tensor_view reshape(shape s) const;
};

} // namespace troupe
