// model_source.cpp: opening checkpoints and checking weight shapes (model_source.hpp).
#include "arch/model_source.hpp"

#include <filesystem>

#include "core/log.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"

namespace troupe {

status check_shapes(const model_config& c, const tensor_index& t) {
  auto expect = [&](const std::string& name, shape want, bool required) -> status {
    const tensor_info* info = t.find(name);
    if (!info) {
      if (!required) return {};
      std::string where = t.files().empty() ? "checkpoint" : t.files().front()->path();
      return make_error(errc::not_found, "{}: missing tensor '{}'", where, name);
    }
    // 1-D weights may be stored as [n] or [1, n]
    if (info->dims != want &&
        !(want.rank == 1 && info->dims.numel() == want[0] && info->dims.rank <= 2))
      return make_error(errc::shape_mismatch, "{}: tensor '{}' has shape {}, the config implies {}",
                        info->file->path(), name, info->dims.to_string(), want.to_string());
    if (!info->supported)
      return make_error(errc::unsupported, "{}: tensor '{}' has type {}, which Troupe cannot load",
                        info->file->path(), name, info->raw_type);
    return {};
  };
  const auto& n = c.names;
  TROUPE_TRY(expect(n.tok_embd, {c.V, c.C}, true));
  TROUPE_TRY(expect(n.output_norm, {c.C}, true));
  TROUPE_TRY(expect(n.output, {c.V, c.C}, !c.tie_embeddings));
  for (int i = 0; i < c.n_layer; ++i) {
    auto L = [i](const std::string& p) { return weight_names::layer(p, i); };
    TROUPE_TRY(expect(L(n.attn_norm), {c.C}, true));
    TROUPE_TRY(expect(L(n.wq), {c.H * c.D, c.C}, true));
    TROUPE_TRY(expect(L(n.wk), {c.Hkv * c.D, c.C}, true));
    TROUPE_TRY(expect(L(n.wv), {c.Hkv * c.D, c.C}, true));
    TROUPE_TRY(expect(L(n.wo), {c.C, c.H * c.D}, true));
    TROUPE_TRY(expect(L(n.bq), {c.H * c.D}, c.qkv_bias));
    TROUPE_TRY(expect(L(n.bk), {c.Hkv * c.D}, c.qkv_bias));
    TROUPE_TRY(expect(L(n.bv), {c.Hkv * c.D}, c.qkv_bias));
    TROUPE_TRY(expect(L(n.bo), {c.C}, c.o_bias));
    TROUPE_TRY(expect(L(n.ffn_norm), {c.C}, true));
    TROUPE_TRY(expect(L(n.w_gate), {c.F, c.C}, c.gated_ffn));
    TROUPE_TRY(expect(L(n.w_up), {c.F, c.C}, true));
    TROUPE_TRY(expect(L(n.w_down), {c.C, c.F}, true));
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
    TROUPE_TRY_ASSIGN(tensors, open_safetensors_dir(path));
    TROUPE_TRY_ASSIGN(tok, tokenizer::from_hf_dir(path));
    // HF configs may omit the lm_head of tied models, or tie without saying so
    if (!cfg.tie_embeddings && !tensors->contains(cfg.names.output)) cfg.tie_embeddings = true;
    m->config = std::move(cfg);
    m->tensors = std::move(tensors);
    m->tok = std::move(tok);
  } else if (fs::exists(path, ec)) {
    m->format = "gguf";
    TROUPE_TRY_ASSIGN(g, open_gguf(path));
    TROUPE_TRY_ASSIGN(cfg, config_from_gguf(*g));
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
  TROUPE_TRY(check_shapes(m->config, *m->tensors));
  return std::shared_ptr<const model_source>(std::move(m));
}

} // namespace troupe
