// forward_util.hpp (tests/exec): what the whole-model tests share: a generator over a model
// file, the comparison of one fixture case (prompt ids, last-position logits, greedy tokens) and
// a GGUF copy with one metadata key changed. Included by forward_test.cpp and context_test.cpp.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "arch/model_source.hpp"
#include "exec/generator.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/gguf.hpp"
#include "greedy_util.hpp"

namespace troupe::test {

using json = nlohmann::json;

inline std::unique_ptr<exec::generator> make(const std::string& path,
                                             kernels::backend where = kernels::backend::cpu,
                                             dtype kv = dtype::f32, bool fuse = true) {
  auto m = open_model(path);
  EXPECT_TRUE(m) << (m ? "" : m.error().to_string());
  if (!m) return nullptr;
  exec::exec_options opt;
  opt.where = where;
  opt.kv_dtype = kv;
  opt.fuse = fuse;
  return test::generator_of(*m, opt);
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

// Compares one fixture case: prompt ids (or `want_ids` where the file's tokenizer is not the
// fixture's), full last-position logits, greedy continuation.
inline void check_case(exec::generator& g, const json& c, double logit_tol,
                       const std::vector<int32_t>* want_ids = nullptr) {
  const std::string text = c["text"].get<std::string>();
  auto ids = g.source().tok->encode(text, true);
  ASSERT_TRUE(ids);
  EXPECT_EQ(*ids, want_ids ? *want_ids : c["prompt_tokens"].get<std::vector<int32_t>>()) << text;
  const auto want_tokens = c["greedy_tokens"].get<std::vector<int32_t>>();
  auto r = greedy(g, c["prompt_tokens"].get<std::vector<int32_t>>(),
                  static_cast<int>(want_tokens.size()));
  const auto want_logits = c["last_logits"].get<std::vector<float>>();
  if (r.prompt_logits.size() > want_logits.size()) {
    // a pruned head (Apertus 1.5's): the reference's logits are its rows; the ids past them
    // must never be sampled
    for (size_t i = want_logits.size(); i < r.prompt_logits.size(); ++i)
      EXPECT_LE(r.prompt_logits[i], -1e29f) << text << " id " << i;
    r.prompt_logits.resize(want_logits.size());
  }
  EXPECT_LE(max_abs_diff(r.prompt_logits, want_logits), logit_tol) << text;
  EXPECT_EQ(r.tokens, want_tokens) << text;
}

// A copy of GGUF `in` written to `path` with metadata `key` changed by `edit` (dropped when it
// returns false; added, from a default value, when the file lacks it), opened as a model.
inline expected<std::shared_ptr<const model_source>>
open_gguf_variant(const gguf_file& in, const std::string& path, const std::string& key,
                  const std::function<bool(gguf_value&)>& edit) {
  gguf_writer w;
  bool seen = false;
  for (const std::string& k : in.keys) {
    gguf_value v = in.kv.at(k);
    seen = seen || k == key;
    if (k == key && !edit(v)) continue;
    w.set(k, v);
  }
  if (gguf_value v; !seen && edit(v)) w.set(key, v);
  for (const std::string& name : in.tensors.names()) {
    const tensor_info* t = in.tensors.find(name);
    w.add_tensor(name, t->type, t->dims,
                 [t](uint8_t* dst, size_t bytes) { std::memcpy(dst, t->data, bytes); });
  }
  EXPECT_TRUE(w.write(path));
  return open_model(path);
}

} // namespace troupe::test
