// gguf.cpp: bounds-checked GGUF parsing (gguf.hpp). Layout (little-endian):
//   "GGUF" u32 version u64 n_tensors u64 n_kv
//   n_kv x { string key, u32 type, value }            string = u64 length + bytes
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to `general.alignment` (default 32), then tensor data; offsets are relative to it.
#include "formats/gguf.hpp"

#include <cstring>
#include <iterator>
#include <limits>

namespace troupe {
namespace {

constexpr int max_array_depth = 4;
constexpr int max_dims = 4;

// Size in bytes of `n` elements of a ggml type, for the types whose layout is known (so
// tensors of unsupported types are still bounds-checked). 0 when unknown.
struct ggml_layout {
  uint32_t id;
  const char* name;
  uint32_t block;
  uint32_t bytes;
};
constexpr ggml_layout ggml_layouts[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {24, "I8", 1, 1},
    {25, "I16", 1, 2},        {26, "I32", 1, 4},        {27, "I64", 1, 8},
    {28, "F64", 1, 8},        {30, "BF16", 1, 2},       {39, "MXFP4", 32, 17},
    {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98},
    {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {29, "IQ1_M", 256, 56},
    {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},
};

const ggml_layout* layout_of(uint32_t id) {
  for (const auto& l : ggml_layouts)
    if (l.id == id) return &l;
  return nullptr;
}

class cursor {
 public:
  cursor(const mapped_file& f)
      : f_(f)
      , p_(f.data())
      , end_(f.data() + f.size()) {}

  uint64_t offset() const { return static_cast<uint64_t>(p_ - f_.data()); }
  uint64_t remaining() const { return static_cast<uint64_t>(end_ - p_); }

  template <class T>
  expected<T> read(std::string_view what) {
    if (remaining() < sizeof(T)) return truncated(what, sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }

  expected<std::string_view> read_string(std::string_view what) {
    TROUPE_TRY_ASSIGN(len, read<uint64_t>(what));
    if (len > remaining())
      return make_error(errc::corrupt_file,
                        "{}: byte {}: {} length {} runs past the end of the file", f_.path(),
                        offset() - 8, what, len);
    std::string_view s(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    return s;
  }

  error truncated(std::string_view what, uint64_t need) const {
    return make_error(errc::corrupt_file, "{}: byte {}: file ends inside {} (needs {} more bytes)",
                      f_.path(), offset(), what, need);
  }
  error bad(std::string_view text) const {
    return make_error(errc::corrupt_file, "{}: byte {}: {}", f_.path(), offset(), text);
  }

 private:
  const mapped_file& f_;
  const uint8_t* p_;
  const uint8_t* end_;
};

size_t scalar_size(gguf_type t) {
  switch (t) {
  case gguf_type::u8:
  case gguf_type::i8:
  case gguf_type::boolean:
    return 1;
  case gguf_type::u16:
  case gguf_type::i16:
    return 2;
  case gguf_type::u32:
  case gguf_type::i32:
  case gguf_type::f32:
    return 4;
  case gguf_type::u64:
  case gguf_type::i64:
  case gguf_type::f64:
    return 8;
  case gguf_type::string:
    return 8; // at least its length
  case gguf_type::array:
    return 12; // at least type + count
  }
  return 1;
}

expected<gguf_value> read_value(cursor& c, gguf_type type, const std::string& key, int depth) {
  gguf_value v;
  v.type = type;
  auto set_int = [&v](int64_t x) {
    v.i = x;
    v.f = static_cast<double>(x);
  };
  switch (type) {
  case gguf_type::u8: {
    TROUPE_TRY_ASSIGN(x, c.read<uint8_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::i8: {
    TROUPE_TRY_ASSIGN(x, c.read<int8_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::u16: {
    TROUPE_TRY_ASSIGN(x, c.read<uint16_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::i16: {
    TROUPE_TRY_ASSIGN(x, c.read<int16_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::u32: {
    TROUPE_TRY_ASSIGN(x, c.read<uint32_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::i32: {
    TROUPE_TRY_ASSIGN(x, c.read<int32_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::i64: {
    TROUPE_TRY_ASSIGN(x, c.read<int64_t>(key));
    set_int(x);
    break;
  }
  case gguf_type::u64: {
    TROUPE_TRY_ASSIGN(x, c.read<uint64_t>(key));
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return c.bad(fmt::format("key '{}': u64 value {} is too large", key, x));
    set_int(static_cast<int64_t>(x));
    break;
  }
  case gguf_type::f32: {
    TROUPE_TRY_ASSIGN(x, c.read<float>(key));
    v.f = x;
    break;
  }
  case gguf_type::f64: {
    TROUPE_TRY_ASSIGN(x, c.read<double>(key));
    v.f = x;
    break;
  }
  case gguf_type::boolean: {
    TROUPE_TRY_ASSIGN(x, c.read<uint8_t>(key));
    if (x > 1) return c.bad(fmt::format("key '{}': bool value {} is neither 0 nor 1", key, x));
    set_int(x);
    break;
  }
  case gguf_type::string: {
    TROUPE_TRY_ASSIGN(s, c.read_string(fmt::format("string of key '{}'", key)));
    v.str = s;
    break;
  }
  case gguf_type::array: {
    if (depth >= max_array_depth)
      return c.bad(fmt::format("key '{}': arrays nested deeper than {}", key, max_array_depth));
    TROUPE_TRY_ASSIGN(et, c.read<uint32_t>(key));
    if (et > static_cast<uint32_t>(gguf_type::f64))
      return c.bad(fmt::format("key '{}': unknown array element type {}", key, et));
    TROUPE_TRY_ASSIGN(n, c.read<uint64_t>(key));
    v.elem = static_cast<gguf_type>(et);
    if (n > c.remaining() / scalar_size(v.elem))
      return c.bad(fmt::format("key '{}': array of {} {} cannot fit in the {} bytes left", key, n,
                               to_string(v.elem), c.remaining()));
    v.arr.reserve(n);
    for (uint64_t j = 0; j < n; ++j) {
      TROUPE_TRY_ASSIGN(e, read_value(c, v.elem, key, depth + 1));
      v.arr.push_back(std::move(e));
    }
    break;
  }
  default:
    return c.bad(fmt::format("key '{}': unknown value type {}", key, static_cast<uint32_t>(type)));
  }
  return v;
}

error wrong_type(const gguf_file& g, std::string_view key, std::string_view want) {
  const gguf_value* v = g.get(key);
  return make_error(errc::corrupt_file, "{}: key '{}' is {}, expected {}", g.file->path(), key,
                    to_string(v->type), want);
}

error missing(const gguf_file& g, std::string_view key) {
  return make_error(errc::not_found, "{}: missing key '{}'", g.file->path(), key);
}

} // namespace

std::string_view to_string(gguf_type t) {
  constexpr std::string_view names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                        "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = static_cast<uint32_t>(t);
  return i < std::size(names) ? names[i] : "unknown";
}

bool gguf_value::is_integer() const {
  switch (type) {
  case gguf_type::u8:
  case gguf_type::i8:
  case gguf_type::u16:
  case gguf_type::i16:
  case gguf_type::u32:
  case gguf_type::i32:
  case gguf_type::u64:
  case gguf_type::i64:
    return true;
  default:
    return false;
  }
}

std::optional<dtype> dtype_from_ggml(uint32_t t) {
  switch (t) {
  case 0:
    return dtype::f32;
  case 1:
    return dtype::f16;
  case 2:
    return dtype::q4_0;
  case 3:
    return dtype::q4_1;
  case 6:
    return dtype::q5_0;
  case 7:
    return dtype::q5_1;
  case 8:
    return dtype::q8_0;
  case 10:
    return dtype::q2_k;
  case 11:
    return dtype::q3_k;
  case 12:
    return dtype::q4_k;
  case 13:
    return dtype::q5_k;
  case 14:
    return dtype::q6_k;
  case 30:
    return dtype::bf16;
  case 39:
    return dtype::mxfp4;
  case 20:
    return dtype::iq4_nl;
  case 23:
    return dtype::iq4_xs;
  default:
    return std::nullopt;
  }
}

uint32_t ggml_type_of(dtype t) {
  switch (t) {
  case dtype::f32:
    return 0;
  case dtype::f16:
    return 1;
  case dtype::q4_0:
    return 2;
  case dtype::q8_0:
    return 8;
  case dtype::bf16:
    return 30;
  case dtype::i8:
    return 24;
  case dtype::i32:
    return 26;
  case dtype::q2_k:
    return 10;
  case dtype::q3_k:
    return 11;
  case dtype::q4_k:
    return 12;
  case dtype::q5_k:
    return 13;
  case dtype::q6_k:
    return 14;
  case dtype::q4_1:
    return 3;
  case dtype::q5_0:
    return 6;
  case dtype::q5_1:
    return 7;
  case dtype::mxfp4:
    return 39;
  case dtype::iq4_nl:
    return 20;
  case dtype::iq4_xs:
    return 23;
  case dtype::f8_b128: // no GGUF form (Troupe's layout of DeepSeek's FP8 after loading)
  case dtype::t2_32:   // (nor BitNet's ternary weights)
    return UINT32_MAX;
  }
  return 0;
}

std::string ggml_type_name(uint32_t t) {
  if (auto* l = layout_of(t)) return l->name;
  return fmt::format("ggml type {}", t);
}

const gguf_value* gguf_file::get(std::string_view key) const {
  auto it = kv.find(key);
  return it == kv.end() ? nullptr : &it->second;
}

expected<int64_t> gguf_file::get_int(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (!v->is_integer()) return wrong_type(*this, key, "an integer");
  return v->i;
}

expected<double> gguf_file::get_float(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (!v->is_float() && !v->is_integer()) return wrong_type(*this, key, "a number");
  return v->f;
}

expected<std::string_view> gguf_file::get_string(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (v->type != gguf_type::string) return wrong_type(*this, key, "a string");
  return v->str;
}

expected<bool> gguf_file::get_bool(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (v->type != gguf_type::boolean) return wrong_type(*this, key, "a bool");
  return v->i != 0;
}

expected<std::vector<std::string_view>> gguf_file::get_strings(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (v->type != gguf_type::array || v->elem != gguf_type::string)
    return wrong_type(*this, key, "an array of strings");
  std::vector<std::string_view> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) out.push_back(e.str);
  return out;
}

expected<std::vector<double>> gguf_file::get_floats(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  if (v->type != gguf_type::array || v->elem == gguf_type::string || v->elem == gguf_type::array)
    return wrong_type(*this, key, "an array of numbers");
  std::vector<double> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) out.push_back(e.f);
  return out;
}

expected<std::vector<int64_t>> gguf_file::get_ints(std::string_view key) const {
  const gguf_value* v = get(key);
  if (!v) return missing(*this, key);
  gguf_value probe;
  probe.type = v->elem;
  if (v->type != gguf_type::array || !probe.is_integer())
    return wrong_type(*this, key, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(v->arr.size());
  for (const auto& e : v->arr) out.push_back(e.i);
  return out;
}

int64_t gguf_file::get_int_or(std::string_view key, int64_t fallback) const {
  auto v = get_int(key);
  return v ? *v : fallback;
}

double gguf_file::get_float_or(std::string_view key, double fallback) const {
  auto v = get_float(key);
  return v ? *v : fallback;
}

expected<std::unique_ptr<gguf_file>> parse_gguf(std::shared_ptr<mapped_file> file) {
  auto g = std::make_unique<gguf_file>();
  g->file = file;
  cursor c(*file);
  TROUPE_TRY_ASSIGN(magic, c.read<uint32_t>("the magic"));
  if (magic != 0x46554747u) // "GGUF"
    return make_error(errc::corrupt_file, "{}: not a GGUF file (magic {:08x}, expected 'GGUF')",
                      file->path(), magic);
  TROUPE_TRY_ASSIGN(version, c.read<uint32_t>("the version"));
  if (version == 1)
    return make_error(errc::unsupported, "{}: GGUF version 1 is not supported (use v2 or v3)",
                      file->path());
  if (version != 2 && version != 3)
    return make_error(errc::corrupt_file, "{}: unknown GGUF version {}", file->path(), version);
  g->version = version;
  TROUPE_TRY_ASSIGN(n_tensors, c.read<uint64_t>("the tensor count"));
  TROUPE_TRY_ASSIGN(n_kv, c.read<uint64_t>("the metadata count"));
  // every kv takes at least 8 (key length) + 4 (type) + 1 bytes; every tensor info 8+4+4+8
  if (n_kv > c.remaining() / 13)
    return c.bad(fmt::format("metadata count {} cannot fit in the file", n_kv));
  if (n_tensors > c.remaining() / 24)
    return c.bad(fmt::format("tensor count {} cannot fit in the file", n_tensors));

  for (uint64_t i = 0; i < n_kv; ++i) {
    TROUPE_TRY_ASSIGN(key, c.read_string("a metadata key"));
    std::string k(key);
    TROUPE_TRY_ASSIGN(type, c.read<uint32_t>(k));
    if (type > static_cast<uint32_t>(gguf_type::f64))
      return c.bad(fmt::format("key '{}': unknown value type {}", k, type));
    TROUPE_TRY_ASSIGN(value, read_value(c, static_cast<gguf_type>(type), k, 0));
    if (g->kv.count(k)) return c.bad(fmt::format("key '{}' appears twice", k));
    g->keys.push_back(k);
    g->kv.emplace(k, std::move(value));
  }
  if (const gguf_value* a = g->get("general.alignment")) {
    if (!a->is_integer() || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20))
      return make_error(errc::corrupt_file, "{}: general.alignment must be a power of two, got {}",
                        file->path(), a->i);
    g->alignment = static_cast<uint64_t>(a->i);
  }

  struct pending {
    std::string name;
    uint32_t type;
    shape dims;
    uint64_t elems;
    uint64_t offset;
  };
  std::vector<pending> infos;
  infos.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TROUPE_TRY_ASSIGN(name, c.read_string("a tensor name"));
    pending p;
    p.name = std::string(name);
    TROUPE_TRY_ASSIGN(n_dims, c.read<uint32_t>(p.name));
    if (n_dims == 0 || n_dims > max_dims)
      return c.bad(
          fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", p.name, n_dims, max_dims));
    uint64_t ne[max_dims] = {1, 1, 1, 1};
    p.elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      TROUPE_TRY_ASSIGN(x, c.read<uint64_t>(p.name));
      if (x == 0 || x > (uint64_t{1} << 40))
        return c.bad(fmt::format("tensor '{}': dimension {} is {}", p.name, d, x));
      if (p.elems > (uint64_t{1} << 50) / x)
        return c.bad(fmt::format("tensor '{}': element count overflows", p.name));
      ne[d] = x;
      p.elems *= x;
    }
    p.dims.rank = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) p.dims[d] = static_cast<int64_t>(ne[n_dims - 1 - d]);
    TROUPE_TRY_ASSIGN(type, c.read<uint32_t>(p.name));
    TROUPE_TRY_ASSIGN(offset, c.read<uint64_t>(p.name));
    p.type = type;
    p.offset = offset;
    const ggml_layout* l = layout_of(type);
    if (l && ne[0] % l->block != 0)
      return c.bad(fmt::format("tensor '{}': row length {} is not a multiple of the {} block ({})",
                               p.name, ne[0], l->name, l->block));
    infos.push_back(std::move(p));
  }
  const uint64_t header_end = c.offset();
  g->data_offset = (header_end + g->alignment - 1) / g->alignment * g->alignment;
  if (g->data_offset > file->size() && n_tensors > 0)
    return make_error(errc::corrupt_file,
                      "{}: tensor data would start at byte {}, past the end ({})", file->path(),
                      g->data_offset, file->size());
  g->tensors.add_file(file);
  for (auto& p : infos) {
    tensor_info t;
    t.name = p.name;
    t.dims = p.dims;
    t.file = file.get();
    t.raw_type = ggml_type_name(p.type);
    const ggml_layout* l = layout_of(p.type);
    auto dt = dtype_from_ggml(p.type);
    t.supported = dt.has_value();
    if (dt) t.type = *dt;
    if (p.offset % g->alignment != 0)
      return make_error(errc::corrupt_file,
                        "{}: tensor '{}': offset {} is not a multiple of the alignment {}",
                        file->path(), p.name, p.offset, g->alignment);
    if (l) {
      t.nbytes = p.elems / l->block * l->bytes;
      auto region = file->region(g->data_offset + p.offset, t.nbytes);
      if (!region || p.offset > file->size())
        return make_error(errc::corrupt_file,
                          "{}: tensor '{}' {} {}: bytes [{}, {}) lie outside the file (size {})",
                          file->path(), p.name, t.raw_type, p.dims.to_string(),
                          g->data_offset + p.offset, g->data_offset + p.offset + t.nbytes,
                          file->size());
      t.data = region->data();
    } else {
      t.supported = false; // unknown layout: cannot even bounds-check it
    }
    TROUPE_TRY(g->tensors.add(std::move(t)));
  }
  return g;
}

expected<std::unique_ptr<gguf_file>> open_gguf(const std::string& path) {
  TROUPE_TRY_ASSIGN(f, mapped_file::open(path));
  return parse_gguf(std::move(f));
}

} // namespace troupe
