// weights.cpp: resolving weight values against the checkpoint (weights.hpp).
#include "exec/weights.hpp"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/convert.hpp"

namespace troupe::exec {
namespace {

using graph::value;

// A stored tensor seen as a row-major matrix [rows, cols] (1-D: one row).
struct stored {
  const tensor_info* t;
  int64_t rows, cols;
  const uint8_t* row(int64_t r) const { return t->data + r * row_bytes(t->type, cols); }
};

expected<stored> find(const model_source& m, const std::string& name) {
  const tensor_info* t = m.tensors->find(name);
  if (!t) return make_error(errc::not_found, "{}: missing tensor '{}'", m.path, name);
  if (!t->supported)
    return make_error(errc::unsupported, "{}: tensor '{}' has type {}", t->file->path(), name,
                      t->raw_type);
  stored s{t, t->dims.rank >= 2 ? t->dims.rows() : 1, t->dims.cols()};
  return s;
}

// A column range outside the matrix, or one that cuts through a quantization block: a
// tensor-parallel split of a quantized matrix must give each rank whole blocks (Q4_K's 256
// values: 768 columns cannot be split in two, can in three).
error split_off_blocks(const std::string& tensor, dtype type, int64_t c0, int64_t nc,
                       int64_t cols) {
  const int64_t blk = block_elems(type);
  if (c0 + nc > cols)
    return make_error(errc::shape_mismatch, "{}: columns [{}, {}) of {}", tensor, c0, c0 + nc,
                      cols);
  return make_error(errc::shape_mismatch,
                    "{}: columns [{}, {}) do not fall on its {}-value {} blocks: a tensor-parallel "
                    "split must give each rank whole blocks ({} columns, {} blocks); choose a --tp "
                    "that divides the blocks, or a checkpoint in another dtype",
                    tensor, c0, c0 + nc, blk, name(type), cols, cols / blk);
}

class loader {
 public:
  loader(const model_source& m, loaded_weights& out)
      : m_(m)
      , out_(out) {}

  expected<tensor_view> load(const value& v) {
    if (v.w.constant) { // every element the same (the graph's shape, after any cut)
      int64_t n = 1;
      for (int64_t d : v.dims) n *= d;
      TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(n) * 4, false));
      std::fill(buf.as<float>(), buf.as<float>() + n, v.w.fill);
      shape sh;
      sh.rank = static_cast<int>(v.dims.size());
      for (size_t i = 0; i < v.dims.size(); ++i) sh.dims[i] = v.dims[i];
      tensor_view t(buf.data(), dtype::f32, sh);
      keep(std::move(buf), t);
      return t;
    }
    if (!v.w.parts.empty()) return stacked(v);
    TROUPE_TRY_ASSIGN(s, find(m_, v.w.name));
    if (v.w.row_step < 1 || v.w.row_phase < 0)
      return make_error(errc::internal, "{}: rows strided by {} from {}", v.w.name, v.w.row_step,
                        v.w.row_phase);
    if (v.dims.size() == 1) return vec(v, s);
    if (v.w.transposed) {
      if (strided(v))
        return make_error(errc::unsupported, "{}: strided rows of a transposed weight", v.w.name);
      return transposed(v, s);
    }
    if (v.w.add != 0)
      return make_error(errc::unsupported, "{}: a constant added to a matrix weight", v.w.name);
    const auto segs = segments(v, s.rows);
    TROUPE_TRY(check_rows(v, segs, s.rows));
    const bool all_cols = v.w.col0 == 0 && (v.w.cols < 0 || v.w.cols == s.cols);
    if (segs.size() == 1 && all_cols && v.w.row_step == 1) { // zero-copy rows
      const int64_t first = stored_row(v, segs[0].first);
      TROUPE_TRY_ASSIGN(view, m_.tensors->rows(v.w.name, first, first + segs[0].second));
      tensor_view t(view.data, view.type, shape{segs[0].second, s.cols});
      out_.resident_bytes += t.nbytes();
      return t;
    }
    // gather rows, then columns [col0, col0 + cols)
    const int64_t c0 = v.w.col0, nc = v.w.cols < 0 ? s.cols - c0 : v.w.cols;
    const int64_t blk = block_elems(s.t->type);
    if (c0 % blk || nc % blk || c0 + nc > s.cols)
      return split_off_blocks(v.w.name, s.t->type, c0, nc, s.cols);
    int64_t n = 0;
    for (auto [a, c] : segs) n += c;
    const size_t rb = row_bytes(s.t->type, nc), off = row_bytes(s.t->type, c0);
    TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(n) * rb, false));
    int64_t r = 0;
    for (auto [a, c] : segs)
      for (int64_t i = 0; i < c; ++i, ++r)
        std::memcpy(buf.as<uint8_t>() + r * rb, s.row(stored_row(v, a + i)) + off, rb);
    tensor_view t(buf.data(), s.t->type, shape{n, nc});
    keep(std::move(buf), t);
    return t;
  }

 private:
  // the logical rows (segments) of a value whose stored matrix has `rows` rows
  static std::vector<std::pair<int64_t, int64_t>> segments(const value& v, int64_t rows) {
    if (!v.w.segments.empty()) return v.w.segments;
    const int64_t n = rows > v.w.row_phase ? (rows - v.w.row_phase - 1) / v.w.row_step + 1 : 0;
    return {{0, n}};
  }
  static bool strided(const value& v) { return v.w.row_step != 1 || v.w.row_phase != 0; }
  static int64_t stored_row(const value& v, int64_t r) { return r * v.w.row_step + v.w.row_phase; }
  // every logical row read is a stored one
  static status check_rows(const value& v, const std::vector<std::pair<int64_t, int64_t>>& segs,
                           int64_t rows) {
    for (auto [a, c] : segs)
      if (c > 0 && (a < 0 || stored_row(v, a + c - 1) >= rows))
        return make_error(errc::shape_mismatch, "{}: rows [{}, {}) (stored every {} from {}) of {}",
                          v.w.name, a, a + c, v.w.row_step, v.w.row_phase, rows);
    return {};
  }
  void keep(buffer b, const tensor_view& t) {
    out_.resident_bytes += t.nbytes();
    out_.owned.push_back(std::move(b));
  }

  // several stored [R, K] matrices whose rows are concatenated (HF's experts): the selected
  // rows (segments of the concatenation) and columns, gathered into one buffer
  expected<tensor_view> stacked(const value& v) {
    std::vector<stored> parts;
    for (const auto& name : v.w.parts) {
      TROUPE_TRY_ASSIGN(s, find(m_, name));
      if (!parts.empty() &&
          (s.rows != parts[0].rows || s.cols != parts[0].cols || s.t->type != parts[0].t->type))
        return make_error(errc::shape_mismatch, "{}: stacked tensors differ in shape or dtype",
                          name);
      parts.push_back(s);
    }
    const int64_t R = parts[0].rows, K = parts[0].cols;
    const dtype type = parts[0].t->type;
    const auto segs = segments(v, R * static_cast<int64_t>(parts.size()));
    TROUPE_TRY(check_rows(v, segs, R * static_cast<int64_t>(parts.size())));
    const int64_t c0 = v.w.col0, nc = v.w.cols < 0 ? K - c0 : v.w.cols;
    const int64_t blk = block_elems(type);
    if (c0 % blk || nc % blk || c0 + nc > K) return split_off_blocks(v.w.name, type, c0, nc, K);
    int64_t n = 0;
    for (auto [a, c] : segs) n += c;
    const size_t rb = row_bytes(type, nc), off = row_bytes(type, c0);
    TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(n) * rb, false));
    int64_t r = 0;
    for (auto [a, c] : segs)
      for (int64_t i = 0; i < c; ++i, ++r) {
        const int64_t row = stored_row(v, a + i);
        if (row < 0 || row / R >= static_cast<int64_t>(parts.size()))
          return make_error(errc::shape_mismatch, "{}: row {} of {} stacked", v.w.name, row,
                            R * static_cast<int64_t>(parts.size()));
        std::memcpy(buf.as<uint8_t>() + r * rb,
                    parts[static_cast<size_t>(row / R)].row(row % R) + off, rb);
      }
    tensor_view t(buf.data(), type, shape{n, nc});
    keep(std::move(buf), t);
    return t;
  }

  // 1-D (norms, biases): the selected elements as f32, plus the constant
  expected<tensor_view> vec(const value& v, const stored& s) {
    const int64_t total = s.rows * s.cols;
    if (is_quantized(s.t->type))
      return make_error(errc::unsupported, "{}: quantized norms and biases are not supported",
                        v.w.name);
    auto segs = segments(v, total);
    TROUPE_TRY(check_rows(v, segs, total));
    int64_t n = 0;
    for (auto [a, c] : segs) n += c;
    const bool contiguous = v.w.row_step == 1;
    if (segs.size() == 1 && contiguous && s.t->type == dtype::f32 && v.w.add == 0) {
      tensor_view t(const_cast<uint8_t*>(s.t->data) + stored_row(v, segs[0].first) * 4, dtype::f32,
                    shape{n});
      out_.resident_bytes += n * 4;
      return t;
    }
    TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(n) * 4, false));
    float* o = buf.as<float>();
    for (auto [a, c] : segs) {
      if (contiguous)
        to_f32(s.t->type, s.t->data + row_bytes(s.t->type, stored_row(v, a)), o, c);
      else // (a strided view: element by element)
        for (int64_t i = 0; i < c; ++i)
          to_f32(s.t->type, s.t->data + row_bytes(s.t->type, stored_row(v, a + i)), o + i, 1);
      for (int64_t i = 0; i < c; ++i) o[i] += v.w.add;
      o += c;
    }
    tensor_view t(buf.data(), dtype::f32, shape{n});
    keep(std::move(buf), t);
    return t;
  }

  // stored [K, N]: the logical [N, K] is its transpose (f32), then rows and columns
  expected<tensor_view> transposed(const value& v, const stored& s) {
    if (is_quantized(s.t->type))
      return make_error(errc::unsupported, "{}: a transposed weight must be f32/f16/bf16",
                        v.w.name);
    const int64_t K = s.rows, N = s.cols;
    std::vector<float> row(static_cast<size_t>(N));
    auto segs = segments(v, N);
    const int64_t c0 = v.w.col0, nc = v.w.cols < 0 ? K - c0 : v.w.cols;
    int64_t n = 0;
    for (auto [a, c] : segs) n += c;
    TROUPE_TRY_ASSIGN(buf, buffer::allocate(static_cast<size_t>(n * nc) * 4, false));
    float* o = buf.as<float>();
    for (int64_t k = c0; k < c0 + nc; ++k) { // logical column k = stored row k
      to_f32(s.t->type, s.row(k), row.data(), N);
      int64_t r = 0;
      for (auto [a, c] : segs)
        for (int64_t i = 0; i < c; ++i, ++r) o[r * nc + (k - c0)] = row[static_cast<size_t>(a + i)];
    }
    tensor_view t(buf.data(), dtype::f32, shape{n, nc});
    keep(std::move(buf), t);
    return t;
  }

  const model_source& m_;
  loaded_weights& out_;
};

} // namespace

expected<loaded_weights> load_weights(const model_source& m, const graph::graph& g) {
  loaded_weights out;
  out.views.resize(g.values.size());
  std::vector<char> used(g.values.size(), 0);
  for (const auto& n : g.nodes)
    for (graph::vid v : n.in)
      if (v != graph::none) used[static_cast<size_t>(v)] = 1;
  loader ld(m, out);
  std::map<std::string, tensor_view> loaded; // by weight_identity: one copy of the same bytes
  for (size_t i = 0; i < g.values.size(); ++i) {
    const value& v = g.values[i];
    if (!used[i] || v.kind != graph::value_kind::weight || v.empty) continue;
    const std::string key = graph::weight_identity(v);
    if (auto it = loaded.find(key); !key.empty() && it != loaded.end()) {
      out.views[i] = it->second;
      continue;
    }
    TROUPE_TRY_ASSIGN(t, ld.load(v));
    out.views[i] = t;
    if (!key.empty()) loaded.emplace(key, t);
  }
  return out;
}

} // namespace troupe::exec
