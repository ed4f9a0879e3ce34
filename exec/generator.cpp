// generator.cpp: the single-shard prefill / decode loop (generator.hpp).
#include "exec/generator.hpp"

#include <algorithm>
#include <chrono>

namespace troupe::exec {

expected<std::unique_ptr<generator>> generator::create(std::shared_ptr<const model_source> m,
                                                       exec_options opt) {
  auto g = std::unique_ptr<generator>(new generator());
  g->source_ = m;
  if (opt.kv_blocks == 0) opt.kv_blocks = (m->config.ctx + opt.block_size - 1) / opt.block_size + 1;
  if (opt.state_slots == 0 && m->config.has_recurrent_state())
    opt.state_slots = 1; // its one sequence
  shard_spec spec;
  spec.layer_begin = 0;
  spec.layer_end = static_cast<int>(m->config.n_layer);
  TROUPE_TRY_ASSIGN(r, executor::create(m, spec, opt, nullptr));
  g->runner_ = std::move(r);
  return g;
}

expected<generation> generator::run(const std::vector<int32_t>& prompt, const generate_options& o,
                                    const std::function<void(const std::string&)>& on_text) {
  using clock = std::chrono::steady_clock;
  const model_config& c = source_->config;
  const tokenizer& tok = *source_->tok;
  TROUPE_TRY(o.sampling.validate());
  if (prompt.empty()) return make_error(errc::invalid_argument, "empty prompt");
  if (static_cast<int64_t>(prompt.size()) >= c.ctx)
    return make_error(errc::out_of_range, "prompt of {} tokens does not fit the context of {}",
                      prompt.size(), c.ctx);
  generation out;
  out.prompt_tokens = prompt;
  const int P = runner_->block_size();
  batch b;
  b.tokens = prompt;
  batch_seq s;
  s.state_slot = 0;
  s.seq_id = 1;
  s.count = static_cast<int32_t>(prompt.size());
  s.logits = true;
  const int64_t max_pos =
      std::min<int64_t>(c.ctx, static_cast<int64_t>(prompt.size()) + o.max_tokens);
  for (int64_t blk = 0; blk < (max_pos + P - 1) / P; ++blk)
    s.blocks.push_back(static_cast<int32_t>(blk + 1));
  if (static_cast<int64_t>(s.blocks.size()) >= runner_->kv_blocks())
    return make_error(errc::out_of_memory, "KV arena of {} blocks is too small",
                      runner_->kv_blocks());
  b.seqs = {s};
  std::vector<float> x, logits;
  std::vector<int32_t> history(prompt);
  stream_decoder sd(tok);
  sd.prime(prompt);
  std::string text;
  auto t0 = clock::now();
  TROUPE_TRY(runner_->forward(b, x, &logits));
  out.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  out.prompt_logits = logits;
  out.finish_reason = "length";
  auto t1 = clock::now();
  for (int i = 0; i < o.max_tokens; ++i) {
    const sample_result r = sample(logits, o.sampling, history, static_cast<uint64_t>(i));
    const bool eos = std::find(c.eos_ids.begin(), c.eos_ids.end(), r.token) != c.eos_ids.end();
    const bool turn_end =
        std::find(o.stop_ids.begin(), o.stop_ids.end(), r.token) != o.stop_ids.end();
    if ((eos && o.stop_at_eos) || turn_end) {
      out.finish_reason = "stop";
      break;
    }
    out.tokens.push_back(r.token);
    history.push_back(r.token);
    std::string delta = sd.push(r.token);
    text += delta;
    bool stopped = false;
    for (const auto& st : o.stop) {
      if (auto at = text.find(st); !st.empty() && at != std::string::npos) {
        delta.resize(delta.size() - std::min(delta.size(), text.size() - at));
        text.resize(at);
        stopped = true;
      }
    }
    if (on_text && !delta.empty()) on_text(delta);
    if (stopped) {
      out.finish_reason = "stop";
      break;
    }
    const int64_t pos = static_cast<int64_t>(prompt.size()) + i;
    if (i + 1 == o.max_tokens || pos + 1 >= c.ctx) break;
    b.tokens = {r.token};
    b.seqs[0].pos0 = static_cast<int32_t>(pos);
    b.seqs[0].count = 1;
    const auto ts = clock::now();
    TROUPE_TRY(runner_->forward(b, x, &logits));
    out.step_seconds.push_back(std::chrono::duration<double>(clock::now() - ts).count());
  }
  if (out.finish_reason != "stop") {
    std::string rest = sd.finish();
    text += rest;
    if (on_text && !rest.empty()) on_text(rest);
  }
  out.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  out.text = text;
  return out;
}

} // namespace troupe::exec
