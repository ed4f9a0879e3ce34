// mapped_file.hpp: a read-only memory map of a whole file (checkpoints are read zero-copy
// through it). Shared ownership: tensor views handed out by the readers keep the map alive
// through a shared_ptr held by whoever owns the views. `region(offset, size)` checks bounds
// and returns an error naming the file instead of a pointer past the end.
// Tests: tests/core/tensor_test.cpp
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/expected.hpp"

namespace troupe {

class mapped_file {
 public:
  /// Maps `path` read-only. Errors: not_found, io_error.
  static expected<std::shared_ptr<mapped_file>> open(const std::string& path);
  /// Wraps bytes already in memory under a name (tests, fuzzing, network payloads).
  static std::shared_ptr<mapped_file> from_memory(std::vector<uint8_t> bytes, std::string name);
  ~mapped_file();
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  /// Bytes [offset, offset + size) or out_of_range naming the file.
  expected<std::span<const uint8_t>> region(uint64_t offset, uint64_t size) const;
  /// Whether p points into this map.
  bool contains(const void* p) const;
  /// Drops the pages wholly inside [p, p + n) from the process's memory (a read-only map: a
  /// later read faults the same bytes back in from the file); returns the bytes dropped, 0 for
  /// a file held in memory (from_memory) or a range outside the map.
  size_t release(const void* p, size_t n) const;

 private:
  mapped_file() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::vector<uint8_t> owned_; // from_memory only
};

} // namespace troupe
