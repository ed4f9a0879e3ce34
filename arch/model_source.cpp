// model_source.cpp: opening checkpoints and checking weight shapes (model_source.hpp).
#include "arch/model_source.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "arch/family.hpp"
#include "core/log.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "graph/graph.hpp"

namespace troupe {

std::vector<std::string> unread_tensors(const model_source& m, const graph::graph& g) {
  std::set<std::string> read;
  for (const auto& v : g.values) {
    if (v.kind != graph::value_kind::weight) continue;
    read.insert(v.w.name);
    read.insert(v.w.parts.begin(), v.w.parts.end());
  }
  std::vector<std::string> out;
  for (const auto& name : m.tensors->names())
    if (!read.count(name) && !m.tensors->consumed(name) &&
        std::find(m.config.config_tensors.begin(), m.config.config_tensors.end(), name) ==
            m.config.config_tensors.end())
      out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

status check_shapes(const model_source& m) {
  // the family's builder names every tensor the model reads, with the shape its config
  // implies, and refuses a missing, misshapen or unloadable one
  auto g = arch::build_graph(m);
  if (!g) return g.error();
  if (auto unread = unread_tensors(m, *g); !unread.empty()) {
    std::string some;
    for (size_t i = 0; i < unread.size() && i < 8; ++i) some += (i ? ", " : "") + unread[i];
    TROUPE_LOG_INFO("model", "{}: {} tensors of the checkpoint are not read by the {} graph: {}{}",
                    m.path, unread.size(), m.config.family, some, unread.size() > 8 ? ", ..." : "");
  }
  return {};
}

expected<std::shared_ptr<const model_source>> open_model(const std::string& path) {
  namespace fs = std::filesystem;
  auto m = std::make_shared<model_source>();
  m->path = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    m->format = "hf";
    TROUPE_TRY_ASSIGN(cfg, config_from_hf_dir(path));
    if (!cfg.ignored_keys.empty()) {
      std::string keys;
      for (const auto& k : cfg.ignored_keys) keys += (keys.empty() ? "" : ", ") + k;
      TROUPE_LOG_INFO("model", "{}: config keys {} does not read, ignored: {}", path, cfg.arch,
                      keys);
    }
    for (const auto& note : cfg.load_notes) TROUPE_LOG_INFO("model", "{}: {}", path, note);
    TROUPE_TRY_ASSIGN(tensors, open_safetensors_dir(path));
    TROUPE_TRY(arch::prepare_tensors(cfg, *tensors));
    TROUPE_TRY_ASSIGN(tok, tokenizer::from_hf_dir(path));
    // HF configs may omit the lm_head of tied models, or tie without saying so
    if (!cfg.tie_embeddings && !cfg.names.output.empty() && !tensors->contains(cfg.names.output))
      cfg.tie_embeddings = true;
    m->config = std::move(cfg);
    m->tensors = std::move(tensors);
    m->tok = std::move(tok);
  } else if (fs::exists(path, ec)) {
    m->format = "gguf";
    TROUPE_TRY_ASSIGN(g, open_gguf(path));
    TROUPE_TRY_ASSIGN(cfg, config_from_gguf(*g));
    for (const auto& note : cfg.load_notes) TROUPE_LOG_INFO("model", "{}: {}", path, note);
    TROUPE_TRY_ASSIGN(tok, tokenizer::from_gguf(*g));
    m->config = std::move(cfg);
    std::shared_ptr<gguf_file> shared(std::move(g));
    m->tensors = std::shared_ptr<const tensor_index>(shared, &shared->tensors);
    m->gguf = shared;
    m->tok = std::move(tok);
  } else {
    return make_error(errc::not_found, "{}: no such model file or directory", path);
  }
  if (m->config.bos_id < 0) m->config.bos_id = m->tok->bos_id();
  if (m->config.eos_ids.empty() && m->tok->eos_id() >= 0) m->config.eos_ids = {m->tok->eos_id()};
  if (m->tok->vocab_size() > m->config.V)
    return make_error(errc::shape_mismatch, "{}: tokenizer has {} tokens, the model only {}", path,
                      m->tok->vocab_size(), m->config.V);
  TROUPE_TRY(check_shapes(*m));
  return std::shared_ptr<const model_source>(std::move(m));
}

expected<std::shared_ptr<const model_source>> with_context(std::shared_ptr<const model_source> m,
                                                           int64_t ctx) {
  if (ctx == 0 || ctx == m->config.ctx) return m;
  if (ctx < 2 || ctx > m->config.ctx)
    return make_error(errc::invalid_argument,
                      "{}: a context of {} tokens (the model's is {}; at least 2)", m->path, ctx,
                      m->config.ctx);
  auto out = std::make_shared<model_source>(*m); // the same tensors and tokenizer (shared)
  if (out->config.position_rows == 0) out->config.position_rows = m->config.ctx; // the table's
  out->config.ctx = ctx;
  // LongRoPE's factor set is chosen for the served context (finish_longrope): the short one
  // where no sequence may outgrow the original context
  for (rope_spec* r : {&out->config.rope, &out->config.rope_local})
    if (r->scaling == rope_scaling::longrope) r->use_long = static_cast<double>(ctx) > r->orig_ctx;
  return std::shared_ptr<const model_source>(std::move(out));
}

expected<std::shared_ptr<const model_source>> open_model_config(const std::string& path,
                                                                std::optional<dtype> weights) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file =
      fs::is_directory(path, ec) ? fs::path(path) / "config.json" : fs::path(path);
  if (file.filename() != "config.json" || !fs::is_regular_file(file, ec))
    return make_error(errc::not_found, "{}: give a config.json or the directory that holds it",
                      path);
  auto m = std::make_shared<model_source>();
  m->path = file.string();
  m->format = "hf";
  TROUPE_TRY_ASSIGN(cfg, config_from_hf_dir(file.parent_path().string()));
  for (const auto& note : cfg.load_notes) TROUPE_LOG_INFO("model", "{}: {}", path, note);
  if (weights) {
    m->assumed = *weights;
  } else {
    // the dtype the checkpoint's matrices are published in (transformers' torch_dtype, newer
    // configs' dtype); none named: f32, as transformers loads such a config
    std::ifstream in(file);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    std::string named;
    for (const char* k : {"torch_dtype", "dtype"})
      if (j.is_object() && j.contains(k) && j[k].is_string()) named = j[k].get<std::string>();
    if (named == "bfloat16" || named.empty()) {
      m->assumed = named.empty() ? dtype::f32 : dtype::bf16;
    } else if (named == "float16") {
      m->assumed = dtype::f16;
    } else if (named == "float32") {
      m->assumed = dtype::f32;
    } else {
      return make_error(errc::unsupported,
                        "{}: torch_dtype '{}': give the weights' dtype (f32, f16 or bf16)",
                        file.string(), named);
    }
  }
  m->config = std::move(cfg);
  m->tensors = std::make_shared<tensor_index>();
  m->shapes_only = true;
  TROUPE_TRY(check_shapes(*m));
  return std::shared_ptr<const model_source>(std::move(m));
}

} // namespace troupe
