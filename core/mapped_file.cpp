// mapped_file.cpp: mmap/munmap for mapped_file.hpp. Empty files map to an empty span.
#include "core/mapped_file.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace troupe {

expected<std::shared_ptr<mapped_file>> mapped_file::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return make_error(e == ENOENT ? errc::not_found : errc::io_error, "{}: cannot open: {}", path,
                      std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(errc::io_error, "{}: cannot stat: {}", path, std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(errc::io_error, "{}: not a regular file", path);
  }
  std::shared_ptr<mapped_file> f(new mapped_file());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return make_error(errc::io_error, "{}: mmap failed: {}", path, std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

std::shared_ptr<mapped_file> mapped_file::from_memory(std::vector<uint8_t> bytes,
                                                      std::string name) {
  std::shared_ptr<mapped_file> f(new mapped_file());
  f->path_ = std::move(name);
  f->owned_ = std::move(bytes);
  f->data_ = f->owned_.data();
  f->size_ = f->owned_.size();
  return f;
}

mapped_file::~mapped_file() {
  if (data_ && owned_.empty() && size_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

bool mapped_file::contains(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  return data_ && b >= data_ && b < data_ + size_;
}

size_t mapped_file::release(const void* p, size_t n) const {
  const auto* b = static_cast<const uint8_t*>(p);
  if (!owned_.empty() || !data_ || b < data_ || b + n > data_ + size_) return 0;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(b) + page - 1) / page * page;
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(b) + n) / page * page;
  if (hi <= lo) return 0;
  if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) return 0;
  return hi - lo;
}

expected<std::span<const uint8_t>> mapped_file::region(uint64_t offset, uint64_t size) const {
  if (offset > size_ || size > size_ - offset)
    return make_error(errc::out_of_range, "{}: bytes [{}, {}) lie outside the file (size {})",
                      path_, offset, offset + size, size_);
  return std::span<const uint8_t>(data_ + offset, size);
}

} // namespace troupe
