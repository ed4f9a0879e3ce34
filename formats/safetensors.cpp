// safetensors.cpp: bounds-checked safetensors parsing and sharded directories
// (safetensors.hpp).
#include "formats/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

namespace troupe {
namespace {

using json = nlohmann::json;
constexpr uint64_t max_header = 100ull << 20; // the format's own limit is 100 MB

int64_t elem_bytes(std::string_view name) {
  static const std::pair<std::string_view, int64_t> sizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2},    {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},   {"U8", 1},      {"U16", 2},
      {"U32", 4}, {"U64", 8}, {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (auto& [n, s] : sizes)
    if (n == name) return s;
  return 0;
}

} // namespace

std::optional<dtype> dtype_from_safetensors(std::string_view name) {
  if (name == "F32") return dtype::f32;
  if (name == "F16") return dtype::f16;
  if (name == "BF16") return dtype::bf16;
  if (name == "I8") return dtype::i8;
  if (name == "I32") return dtype::i32;
  return std::nullopt;
}

std::string_view safetensors_name(dtype t) {
  switch (t) {
  case dtype::f32:
    return "F32";
  case dtype::f16:
    return "F16";
  case dtype::bf16:
    return "BF16";
  case dtype::i8:
    return "I8";
  case dtype::i32:
    return "I32";
  default:
    return "";
  }
}

expected<std::map<std::string, std::string>> parse_safetensors(std::shared_ptr<mapped_file> file,
                                                               tensor_index& index) {
  const std::string& path = file->path();
  if (file->size() < 8)
    return make_error(errc::corrupt_file, "{}: {} bytes is too short for a safetensors header",
                      path, file->size());
  uint64_t n = 0;
  std::memcpy(&n, file->data(), 8);
  if (n > max_header || n > file->size() - 8)
    return make_error(errc::corrupt_file,
                      "{}: header length {} runs past the end of the file (size {})", path, n,
                      file->size());
  json header = json::parse(file->data() + 8, file->data() + 8 + n, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return make_error(errc::corrupt_file, "{}: header is not a JSON object", path);
  const uint64_t data_start = 8 + n;
  const uint64_t data_size = file->size() - data_start;
  std::map<std::string, std::string> metadata;
  std::vector<std::pair<uint64_t, uint64_t>> regions;
  index.add_file(file);
  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object())
        return make_error(errc::corrupt_file, "{}: __metadata__ is not an object", path);
      for (auto& [k, v] : entry.items())
        if (v.is_string()) metadata[k] = v.get<std::string>();
      continue;
    }
    auto bad = [&](std::string_view what) {
      return make_error(errc::corrupt_file, "{}: tensor '{}': {}", path, name, what);
    };
    if (!entry.is_object()) return bad("entry is not an object");
    auto dt = entry.find("dtype");
    auto sh = entry.find("shape");
    auto off = entry.find("data_offsets");
    if (dt == entry.end() || !dt->is_string()) return bad("dtype missing or not a string");
    if (sh == entry.end() || !sh->is_array()) return bad("shape missing or not an array");
    if (off == entry.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      return bad("data_offsets must be two non-negative integers");
    tensor_info t;
    t.name = name;
    t.raw_type = dt->get<std::string>();
    t.file = file.get();
    const int64_t esize = elem_bytes(t.raw_type);
    if (!esize) return bad(fmt::format("unknown dtype '{}'", t.raw_type));
    auto type = dtype_from_safetensors(t.raw_type);
    t.supported = type.has_value();
    if (type) t.type = *type;
    // more dimensions than a view has (a vision tower's 3-D convolution): the leading ones
    // folded into the first, and the tensor marked as one Troupe cannot compute with (a model
    // that reads it is refused by name; one that does not, loads)
    const size_t fold = sh->size() > max_rank ? sh->size() - max_rank : 0;
    if (fold) {
      t.supported = false;
      t.raw_type += fmt::format(" with {} dimensions", sh->size());
    }
    uint64_t elems = 1;
    t.dims.rank = static_cast<int>(sh->size() - fold);
    for (int d = 0; d < t.dims.rank; ++d) t.dims[d] = 1;
    for (size_t d = 0; d < sh->size(); ++d) {
      const auto& x = (*sh)[d];
      if (!x.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      const uint64_t v = x.get<uint64_t>();
      if (v > (uint64_t{1} << 40) || (v && elems > (uint64_t{1} << 50) / v))
        return bad("shape too large");
      elems *= v;
      const int at = static_cast<int>(d > fold ? d - fold : 0);
      t.dims[at] *= static_cast<int64_t>(v);
    }
    const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
    if (b > e || e > data_size)
      return bad(
          fmt::format("data_offsets [{}, {}) lie outside the data ({} bytes)", b, e, data_size));
    if (e - b != elems * static_cast<uint64_t>(esize))
      return bad(fmt::format("shape {} x {} bytes needs {} bytes, data_offsets give {}",
                             t.dims.to_string(), esize, elems * esize, e - b));
    t.nbytes = e - b;
    t.data = file->data() + data_start + b;
    if (t.nbytes) regions.emplace_back(b, e);
    TROUPE_TRY(index.add(std::move(t)));
  }
  std::sort(regions.begin(), regions.end());
  for (size_t i = 1; i < regions.size(); ++i)
    if (regions[i].first < regions[i - 1].second)
      return make_error(errc::corrupt_file, "{}: tensor data regions overlap at byte {}", path,
                        data_start + regions[i].first);
  return metadata;
}

expected<std::unique_ptr<tensor_index>> open_safetensors(const std::string& path) {
  TROUPE_TRY_ASSIGN(f, mapped_file::open(path));
  auto index = std::make_unique<tensor_index>();
  TROUPE_TRY(parse_safetensors(std::move(f), *index));
  return index;
}

expected<std::unique_ptr<tensor_index>> open_safetensors_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    const fs::path single = fs::path(dir) / "model.safetensors";
    if (!fs::exists(single))
      return make_error(errc::not_found,
                        "{}: neither model.safetensors nor model.safetensors.index.json", dir);
    return open_safetensors(single.string());
  }
  std::ifstream in(index_path);
  json idx = json::parse(in, nullptr, false);
  if (idx.is_discarded() || !idx.is_object() || !idx.contains("weight_map") ||
      !idx["weight_map"].is_object())
    return make_error(errc::corrupt_file, "{}: not a JSON object with a weight_map",
                      index_path.string());
  std::map<std::string, std::set<std::string>> by_file;
  for (auto& [name, file] : idx["weight_map"].items()) {
    if (!file.is_string())
      return make_error(errc::corrupt_file, "{}: weight_map['{}'] is not a file name",
                        index_path.string(), name);
    const std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
      return make_error(errc::corrupt_file, "{}: shard name '{}' leaves the directory",
                        index_path.string(), f);
    by_file[f].insert(name);
  }
  auto index = std::make_unique<tensor_index>();
  for (const auto& [file, names] : by_file) {
    const std::string path = (fs::path(dir) / file).string();
    TROUPE_TRY_ASSIGN(m, mapped_file::open(path));
    tensor_index shard;
    TROUPE_TRY(parse_safetensors(m, shard));
    index->add_file(m);
    for (const auto& name : names) {
      const tensor_info* t = shard.find(name);
      if (!t)
        return make_error(errc::not_found,
                          "{}: tensor '{}' named by the index is not in this shard", path, name);
      TROUPE_TRY(index->add(*t));
    }
  }
  return index;
}

} // namespace troupe
