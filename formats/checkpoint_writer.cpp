// checkpoint_writer.cpp: GGUF v3 and safetensors serialisation (checkpoint_writer.hpp).
#include "formats/checkpoint_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include <nlohmann/json.hpp>

#include "formats/safetensors.hpp"

namespace troupe {
namespace {

struct file_closer {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using file_ptr = std::unique_ptr<std::FILE, file_closer>;

class out_file {
 public:
  static expected<out_file> open(const std::string& path) {
    out_file o;
    o.path_ = path;
    o.f_.reset(std::fopen(path.c_str(), "wb"));
    if (!o.f_)
      return make_error(errc::io_error, "{}: cannot create: {}", path, std::strerror(errno));
    return o;
  }
  void put(const void* p, size_t n) {
    if (ok_ && n && std::fwrite(p, 1, n, f_.get()) != n) ok_ = false;
    written_ += n;
  }
  template <class T>
  void pod(T v) {
    put(&v, sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    put(s.data(), s.size());
  }
  void pad_to(uint64_t align) {
    static const uint8_t zeros[256] = {};
    while (written_ % align) put(zeros, std::min<uint64_t>(align - written_ % align, sizeof zeros));
  }
  uint64_t written() const { return written_; }
  status close() {
    if (ok_ && std::fflush(f_.get()) != 0) ok_ = false;
    f_.reset();
    if (!ok_) return make_error(errc::io_error, "{}: write failed", path_);
    return {};
  }

 private:
  std::string path_;
  file_ptr f_;
  bool ok_ = true;
  uint64_t written_ = 0;
};

void put_value(out_file& o, const gguf_value& v) {
  switch (v.type) {
  case gguf_type::u8:
    o.pod<uint8_t>(static_cast<uint8_t>(v.i));
    break;
  case gguf_type::i8:
    o.pod<int8_t>(static_cast<int8_t>(v.i));
    break;
  case gguf_type::u16:
    o.pod<uint16_t>(static_cast<uint16_t>(v.i));
    break;
  case gguf_type::i16:
    o.pod<int16_t>(static_cast<int16_t>(v.i));
    break;
  case gguf_type::u32:
    o.pod<uint32_t>(static_cast<uint32_t>(v.i));
    break;
  case gguf_type::i32:
    o.pod<int32_t>(static_cast<int32_t>(v.i));
    break;
  case gguf_type::u64:
    o.pod<uint64_t>(static_cast<uint64_t>(v.i));
    break;
  case gguf_type::i64:
    o.pod<int64_t>(v.i);
    break;
  case gguf_type::f32:
    o.pod<float>(static_cast<float>(v.f));
    break;
  case gguf_type::f64:
    o.pod<double>(v.f);
    break;
  case gguf_type::boolean:
    o.pod<uint8_t>(v.i ? 1 : 0);
    break;
  case gguf_type::string:
    o.str(std::string(v.str));
    break;
  case gguf_type::array:
    o.pod<uint32_t>(static_cast<uint32_t>(v.elem));
    o.pod<uint64_t>(v.arr.size());
    for (const auto& e : v.arr) put_value(o, e);
    break;
  }
}

gguf_value scalar(gguf_type t) {
  gguf_value v;
  v.type = t;
  return v;
}

} // namespace

void gguf_writer::set(const std::string& key, const gguf_value& v) {
  for (auto& e : kvs_)
    if (e.key == key) {
      e.value = v;
      return;
    }
  kvs_.push_back({key, v, {}});
}

void gguf_writer::set_u32(const std::string& key, uint32_t x) {
  auto v = scalar(gguf_type::u32);
  v.i = x;
  v.f = x;
  set(key, v);
}

void gguf_writer::set_f32(const std::string& key, float x) {
  auto v = scalar(gguf_type::f32);
  v.f = x;
  set(key, v);
}

void gguf_writer::set_bool(const std::string& key, bool x) {
  auto v = scalar(gguf_type::boolean);
  v.i = x;
  set(key, v);
}

void gguf_writer::set_string(const std::string& key, const std::string& s) {
  set_strings(key, {s}); // stores the text in kv::owned
  auto v = scalar(gguf_type::string);
  v.str = kvs_.back().owned.front();
  kvs_.back().value = v;
}

void gguf_writer::set_strings(const std::string& key, const std::vector<std::string>& xs) {
  kv e{key, scalar(gguf_type::array), xs};
  e.value.elem = gguf_type::string;
  for (const auto& s : e.owned) {
    auto v = scalar(gguf_type::string);
    v.str = s;
    e.value.arr.push_back(v);
  }
  for (auto it = kvs_.begin(); it != kvs_.end(); ++it)
    if (it->key == key) {
      kvs_.erase(it);
      break;
    }
  kvs_.push_back(std::move(e));
  // string_views must point at the stored copies
  auto& back = kvs_.back();
  for (size_t i = 0; i < back.owned.size(); ++i) back.value.arr[i].str = back.owned[i];
}

void gguf_writer::set_f32s(const std::string& key, const std::vector<float>& xs) {
  auto v = scalar(gguf_type::array);
  v.elem = gguf_type::f32;
  for (float x : xs) {
    auto e = scalar(gguf_type::f32);
    e.f = x;
    v.arr.push_back(e);
  }
  set(key, v);
}

void gguf_writer::set_i32s(const std::string& key, const std::vector<int32_t>& xs) {
  auto v = scalar(gguf_type::array);
  v.elem = gguf_type::i32;
  for (int32_t x : xs) {
    auto e = scalar(gguf_type::i32);
    e.i = x;
    e.f = x;
    v.arr.push_back(e);
  }
  set(key, v);
}

void gguf_writer::copy_keys(const gguf_file& g, const std::string& prefix) {
  for (const auto& key : g.keys) {
    if (key.rfind(prefix, 0) != 0) continue;
    const gguf_value& v = g.kv.at(key);
    if (v.type == gguf_type::string) {
      set_string(key, std::string(v.str));
    } else if (v.type == gguf_type::array && v.elem == gguf_type::string) {
      std::vector<std::string> xs;
      xs.reserve(v.arr.size());
      for (const auto& e : v.arr) xs.emplace_back(e.str);
      set_strings(key, xs);
    } else {
      set(key, v); // numbers and arrays of numbers carry no views
    }
  }
}

void gguf_writer::add_tensor(const std::string& name, dtype type, shape dims, fill_fn fill) {
  tensors_.push_back({name, type, dims, std::move(fill)});
}

status gguf_writer::write(const std::string& path, uint32_t alignment) const {
  for (const auto& t : tensors_)
    if (ggml_type_of(t.type) == UINT32_MAX)
      return make_error(errc::unsupported, "{}: GGUF has no type for {} ({})", path,
                        std::string(troupe::name(t.type)), t.name);
  TROUPE_TRY_ASSIGN(o, out_file::open(path));
  o.pod<uint32_t>(0x46554747u);
  o.pod<uint32_t>(3);
  o.pod<uint64_t>(tensors_.size());
  const bool has_align = [&] {
    for (const auto& e : kvs_)
      if (e.key == "general.alignment") return true;
    return false;
  }();
  o.pod<uint64_t>(kvs_.size() + (has_align || alignment == 32 ? 0 : 1));
  for (const auto& e : kvs_) {
    o.str(e.key);
    o.pod<uint32_t>(static_cast<uint32_t>(e.value.type));
    put_value(o, e.value);
  }
  if (!has_align && alignment != 32) {
    o.str("general.alignment");
    o.pod<uint32_t>(static_cast<uint32_t>(gguf_type::u32));
    o.pod<uint32_t>(alignment);
  }
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors_) {
    o.str(t.name);
    o.pod<uint32_t>(static_cast<uint32_t>(t.dims.rank));
    for (int d = t.dims.rank - 1; d >= 0; --d) o.pod<uint64_t>(static_cast<uint64_t>(t.dims[d]));
    o.pod<uint32_t>(ggml_type_of(t.type));
    o.pod<uint64_t>(offset);
    const uint64_t n = static_cast<uint64_t>(t.dims.rows() * row_bytes(t.type, t.dims.cols()));
    sizes.push_back(n);
    offset += (n + alignment - 1) / alignment * alignment;
  }
  o.pad_to(alignment);
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    buf.assign(sizes[i], 0);
    tensors_[i].fill(buf.data(), buf.size());
    o.put(buf.data(), buf.size());
    o.pad_to(alignment);
  }
  return o.close();
}

void safetensors_writer::set_metadata(const std::string& key, const std::string& value) {
  metadata_.emplace_back(key, value);
}

void safetensors_writer::add_tensor(const std::string& name, dtype type, shape dims, fill_fn fill) {
  tensors_.push_back({name, type, dims, std::move(fill)});
}

status safetensors_writer::write(const std::string& path) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    auto& m = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
  }
  uint64_t offset = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors_) {
    const auto st = safetensors_name(t.type);
    if (st.empty())
      return make_error(errc::unsupported, "safetensors cannot store {}", name(t.type));
    const uint64_t n = static_cast<uint64_t>(t.dims.numel()) * info(t.type).block_bytes;
    std::vector<int64_t> dims(t.dims.dims.begin(), t.dims.dims.begin() + t.dims.rank);
    header[t.name] = {
        {"dtype", std::string(st)}, {"shape", dims}, {"data_offsets", {offset, offset + n}}};
    sizes.push_back(n);
    offset += n;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8) text += ' ';
  TROUPE_TRY_ASSIGN(o, out_file::open(path));
  o.pod<uint64_t>(text.size());
  o.put(text.data(), text.size());
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    buf.assign(sizes[i], 0);
    tensors_[i].fill(buf.data(), buf.size());
    o.put(buf.data(), buf.size());
  }
  return o.close();
}

} // namespace troupe
