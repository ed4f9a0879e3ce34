// checkpoint.cpp: tensor lookup and zero-copy / copying slices (checkpoint.hpp).
#include "formats/checkpoint.hpp"

#include <cstring>

namespace troupe {

status tensor_index::add(tensor_info info) {
  std::string key = info.name;
  if (tensors_.count(key))
    return make_error(errc::corrupt_file, "{}: tensor '{}' appears twice",
                      info.file ? info.file->path() : "?", key);
  tensors_.emplace(std::move(key), std::move(info));
  return {};
}

void tensor_index::replace(tensor_info info) {
  std::string key = info.name;
  tensors_.insert_or_assign(std::move(key), std::move(info));
}

const tensor_info* tensor_index::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

expected<const tensor_info*> tensor_index::usable(std::string_view name) const {
  const tensor_info* t = find(name);
  if (!t) {
    std::string where = files_.empty() ? "checkpoint" : files_.front()->path();
    return make_error(errc::not_found, "{}: missing tensor '{}'", where, name);
  }
  if (!t->supported)
    return make_error(errc::unsupported, "{}: tensor '{}' has type {}, which Troupe cannot load",
                      t->file->path(), name, t->raw_type);
  return t;
}

expected<tensor_view> tensor_index::view(std::string_view name) const {
  TROUPE_TRY_ASSIGN(t, usable(name));
  return t->view();
}

expected<tensor_view> tensor_index::rows(std::string_view name, int64_t begin, int64_t end) const {
  TROUPE_TRY_ASSIGN(t, usable(name));
  // a tensor of rank 3 or more is seen as the matrix [product of the leading dims, last dim]
  // (GGUF's merged experts [E, F, C]: rows e * F ..)
  tensor_view v = t->view();
  if (t->dims.rank > 2) v = v.reshape(shape{t->dims.rows(), t->dims.cols()});
  if (v.dims.rank == 0 || begin < 0 || end > v.dims[0] || begin > end)
    return make_error(errc::out_of_range, "{}: rows [{}, {}) of tensor '{}' {}", t->file->path(),
                      begin, end, name, t->dims.to_string());
  return v.slice_rows(begin, end);
}

expected<buffer> tensor_index::cols(std::string_view name, int64_t begin, int64_t end,
                                    tensor_view* out) const {
  TROUPE_TRY_ASSIGN(t, usable(name));
  if (t->dims.rank != 2 || begin < 0 || end > t->dims[1] || begin >= end)
    return make_error(errc::out_of_range, "{}: columns [{}, {}) of tensor '{}' {}", t->file->path(),
                      begin, end, name, t->dims.to_string());
  const int64_t blk = block_elems(t->type);
  if (begin % blk || end % blk)
    return make_error(errc::invalid_argument,
                      "{}: columns [{}, {}) of '{}' split a {}-value {} block", t->file->path(),
                      begin, end, name, blk, troupe::name(t->type));
  const int64_t R = t->dims[0];
  const int64_t src_row = row_bytes(t->type, t->dims[1]);
  const int64_t dst_row = row_bytes(t->type, end - begin);
  const int64_t off = row_bytes(t->type, begin);
  TROUPE_TRY_ASSIGN(b, buffer::allocate(static_cast<size_t>(R * dst_row)));
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(b.as<uint8_t>() + r * dst_row, t->data + r * src_row + off, dst_row);
  if (out) *out = b.view(t->type, shape{R, end - begin});
  return b;
}

std::vector<std::string> tensor_index::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : tensors_) out.push_back(k);
  return out;
}

uint64_t tensor_index::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [k, v] : tensors_) n += v.nbytes;
  return n;
}

} // namespace troupe
