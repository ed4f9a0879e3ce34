// host.cpp: building and running a pipeline in-process (host.hpp).
#include "actors/host.hpp"

#include <caf/io/middleman.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "actors/engine.hpp"
#include "actors/local_node.hpp"
#include "actors/pipeline.hpp"
#include "actors/supervisor.hpp"
#include "actors/worker_pool.hpp"
#include "core/log.hpp"
#include "kernels/device.hpp"
#include "text/output_processor.hpp"

namespace troupe::actors {

int64_t kv_blocks_for(const model_config& c, const placement& p, int block_size, dtype kv,
                      int64_t kv_memory) {
  int64_t worst = 1;
  for (const auto& st : p.stages) {
    int64_t bytes = 0; // over the layers with a KV cache (linear attention keeps a state
                       // instead, an FFN block nothing), each its own geometry
    for (int l = st.layer_begin; l < st.layer_end; ++l) {
      // (a latent-attention layer reading another's cache may keep its own indexer's keys)
      const bool latent_reader =
          c.kv_lora > 0 && c.layer_has_mixer(l) && !c.layer_linear(l) && !c.layer_has_kv(l);
      if (c.layer_has_kv(l) || latent_reader)
        bytes += row_bytes(kv, block_size * c.kv_values_per_token(st.tp, l));
    }
    worst = std::max(worst, bytes);
  }
  const int64_t min_blocks = (c.ctx + block_size - 1) / block_size + 2;
  // room for 64 full-context sequences is plenty; more only costs address space
  const int64_t useful = 64 * ((c.ctx + block_size - 1) / block_size) + 1;
  return std::max(min_blocks, std::min(useful, kv_memory / worst));
}

int64_t state_bytes_per_seq(const model_config& c, const placement& p) {
  int64_t worst = 0; // on the stage that holds most
  for (const auto& st : p.stages)
    worst = std::max(worst, c.state_values_per_seq(st.layer_begin, st.layer_end, st.tp) *
                                static_cast<int64_t>(sizeof(float)));
  return worst;
}

int64_t state_slots_for(const model_config& c, const placement& p, int32_t max_seqs,
                        int64_t kv_memory) {
  const int64_t each = state_bytes_per_seq(c, p);
  if (each == 0) return 0;
  // at most half of the KV memory (all of it where no layer keeps a KV cache: xLSTM, Mamba), at
  // least one sequence, at most a step's sequences
  bool kv = false;
  for (int64_t l = 0; l < c.n_layer && !kv; ++l) kv = c.layer_has_kv(l);
  return std::clamp<int64_t>((kv ? kv_memory / 2 : kv_memory) / each, 1, std::max(max_seqs, 1));
}

host::host()
    : impl_(std::make_unique<host_internals>()) {}

host::~host() {
  if (!impl_ || !impl_->sys) return;
  {
    caf::scoped_actor self{*impl_->sys}; // must be gone before the system waits for its actors
    if (impl_->supervisor) self->send(impl_->supervisor, stop_atom::value);
    if (impl_->engine) self->send_exit(impl_->engine, caf::exit_reason::user_shutdown);
    for (auto& a : impl_->custom) self->send_exit(a, caf::exit_reason::user_shutdown);
    if (impl_->local_node) self->send_exit(impl_->local_node, caf::exit_reason::user_shutdown);
    if (impl_->pool) { // ends the worker processes it launched, and waits for them
      self->send(impl_->pool, stop_atom::value);
      self->wait_for(impl_->pool);
    }
  }
  impl_->pool = pool_actor{};
  impl_->engine = engine_actor{};
  impl_->supervisor = supervisor_actor{};
  impl_->local_node = node_actor{};
  impl_->custom.clear();
  impl_->sys.reset(); // joins every actor
}

namespace {

constexpr bool have_nccl() {
#ifdef TROUPE_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

// An NCCL group for a stage whose ranks each own a distinct GPU of this process (null
// otherwise, or where NCCL is missing or fails: the stage then sums through host memory).
std::shared_ptr<transport::nccl_group> nccl_for(const stage_spec& st) {
#ifdef TROUPE_HAVE_NCCL
  std::vector<int> gpus;
  for (int r = 0; r < st.tp; ++r) {
    auto d = device_of(st, r);
    if (!d || !d->cuda) return nullptr;
    for (int g : gpus)
      if (g == d->index) return nullptr; // NCCL takes one rank per GPU
    gpus.push_back(d->index);
  }
  auto g = transport::nccl_group::create(gpus);
  if (!g) {
    TROUPE_LOG_WARN("host", "layers {}-{}: no NCCL group ({}); their sums go through host memory",
                    st.layer_begin, st.layer_end - 1, g.error().message);
    return nullptr;
  }
  return *g;
#else
  (void)st;
  return nullptr;
#endif
}

} // namespace

expected<std::unique_ptr<host>> host::start(std::shared_ptr<const model_source> m, host_options o) {
  const model_config& c = m->config;
  if (o.place.stages.empty()) {
    TROUPE_TRY_ASSIGN(p, even_placement(c, 1, 1));
    o.place = p;
  }
  // validate every shard's slicing and device before spawning anything: a device this
  // process lacks refuses the start (a worker's shard checks on its own machine)
  for (size_t s = 0; s < o.place.stages.size(); ++s)
    for (int r = 0; r < o.place.stages[s].tp; ++r) {
      TROUPE_TRY(plan_shard(c, o.place.shard(s, r)));
      const auto& st = o.place.stages[s];
      TROUPE_TRY_ASSIGN(dev, device_of(st, r));
      if (dev.cuda && o.workers == 0 && !kernels::get_device(kernels::backend::cuda, dev.index))
        return make_error(errc::unavailable,
                          "placement: stage {} (layers {}-{}) rank {} is placed on {}, which this "
                          "machine lacks ({})",
                          s, st.layer_begin, st.layer_end - 1, r, dev.text,
                          kernels::cuda_summary());
    }
  std::unique_ptr<host> h(new host());
  auto& in = *h->impl_;
  in.model = m;
  in.state_slots = state_slots_for(c, o.place, o.sched.max_seqs, o.kv_memory);
  // the KV blocks get what the states leave
  const int64_t kv_left = o.kv_memory - in.state_slots * state_bytes_per_seq(c, o.place);
  in.kv_blocks = o.kv_blocks > 0 ? o.kv_blocks
                                 : kv_blocks_for(c, o.place, o.block_size, o.kv_dtype,
                                                 std::max<int64_t>(kv_left, 0));
  o.sched.state_slots = static_cast<int32_t>(in.state_slots);
  if (in.state_slots > 0)
    TROUPE_LOG_INFO("host",
                    "{}: a recurrent state per sequence (linear attention, {} MB each): {} "
                    "sequences run at once (--max-seqs, --kv-memory), no prefix caching",
                    m->path, state_bytes_per_seq(c, o.place) >> 20, in.state_slots);
  if (o.sched.eos_ids.empty()) o.sched.eos_ids.assign(c.eos_ids.begin(), c.eos_ids.end());
  o.sched.max_context = static_cast<int32_t>(c.ctx);
  o.sched.window = static_cast<int32_t>(c.kv_horizon());
  for (int64_t l = 0; l < c.n_layer; ++l)
    if (c.layer_compress(l) > 0) o.sched.share_blocks = false; // (compressed entries)
  if (c.input_cut_matters()) {
    // (Dory's last_loop, Zamba2's step clamp: the output depends on where a sequence's input is
    // cut into steps: no prefix from the cache, and every sequence cut in the same pieces
    // whatever else runs, its recomputes too)
    o.sched.share_blocks = false;
    o.sched.fixed_chunks = std::max<int32_t>(1, o.sched.max_batch_tokens / 2);
    TROUPE_LOG_INFO("host",
                    "{}: the output depends on where a sequence is cut into steps ({}): no "
                    "prefix caching; prompts prefilled in chunks of {} tokens whatever the load, "
                    "then a token a step, recomputes likewise",
                    m->path,
                    c.kv_source_writes ? "one KV cache for every run of a recurrent layer"
                                       : "the scan's step clamped on prompts, not on decode steps",
                    o.sched.fixed_chunks);
  }
  if (o.max_inflight <= 0) o.max_inflight = static_cast<int>(o.place.stages.size());
  const int n_shards = o.place.total_shards();
  if (o.workers > 0) {
    if (o.shard_worker.empty())
      for (int i = 0; i < n_shards; ++i) o.shard_worker.push_back(i % o.workers);
    if (static_cast<int>(o.shard_worker.size()) != n_shards)
      return make_error(errc::invalid_argument, "{} worker ranks for {} shards",
                        o.shard_worker.size(), n_shards);
    for (int w : o.shard_worker)
      if (w < 0 || w >= o.workers)
        return make_error(errc::invalid_argument, "worker rank {} of {} workers", w, o.workers);
    if (o.secret.empty()) {
      if (o.worker_exe.empty())
        return make_error(errc::invalid_argument,
                          "workers that join by themselves need the run's secret (--secret, "
                          "TROUPE_SECRET or TROUPE_SECRET_FILE)");
      o.secret = random_secret();
    }
  }
  in.opt = o;
  in.cfg = std::make_unique<caf::actor_system_config>();
  register_messages(*in.cfg);
  in.cfg->set("scheduler.max-threads", o.caf_threads);
  // a shared job queue with a condition variable: workers sleep until there is work, so an
  // idle CAF thread neither burns a vCPU the shards need (work stealing polls) nor adds a
  // polling interval to every message's latency
  in.cfg->set("scheduler.policy", caf::atom("sharing"));
  if (o.workers > 0) in.cfg->load<caf::io::middleman>();
  in.sys = std::make_unique<caf::actor_system>(*in.cfg);
  if (o.workers > 0) {
    worker_pool_options po;
    po.workers = o.workers;
    po.host = o.worker_host;
    po.port = o.worker_port;
    po.secret = o.secret;
    po.exe = o.worker_exe;
    auto port = start_worker_pool(*in.sys, po, in.pool);
    if (!port) return port.error();
    in.worker_port = *port;
  }
  routing_table routes; // the initial routes; the supervisor owns and sends them from then on
  auto watch = std::make_shared<watchdog>();
  auto faults = std::make_shared<const fault_plan>(o.faults);

  // hops: stage shards, with developer actors after the stages they follow
  std::vector<hop_info> hops;
  std::vector<std::pair<size_t, const custom_hop*>> custom_at;
  for (size_t s = 0; s < o.place.stages.size(); ++s) {
    hops.push_back({std::vector<caf::actor>(o.place.stages[s].tp), static_cast<int>(s),
                    shard_name(static_cast<int>(s), 0)});
    for (const auto& ch : o.custom)
      if (ch.after_stage == static_cast<int>(s) && s + 1 < o.place.stages.size()) {
        custom_at.emplace_back(hops.size(), &ch);
        hops.push_back({std::vector<caf::actor>(1), -1, ch.name});
      }
  }
  routes.set_hops(hops);

  engine_setup es;
  es.model = m;
  es.faults = faults;
  es.kv_blocks = static_cast<int32_t>(in.kv_blocks);
  es.block_size = o.block_size;
  es.sched = o.sched;
  es.max_inflight = o.max_inflight;
  es.step_timeout_s = o.step_timeout_s;
  es.max_waiting = o.max_waiting;
  es.restart_policy =
      o.on_give_up == give_up_policy::exit
          ? fmt::format("restart a failed shard with backoff; after {} failures in a row without "
                        "a completed step, exit (status 3)",
                        o.max_restarts)
          : fmt::format("restart a failed shard with backoff; after {} failures in a row without "
                        "a completed step, retry every {} s",
                        o.max_restarts, o.retry_interval_s);
  in.engine = spawn_engine(*in.sys, es);
  routes.set_engine(caf::actor_cast<caf::actor>(in.engine));

  for (auto [hop, ch] : custom_at) {
    hop_context ctx{std::make_shared<routing_table>(routes), hop, ch->name};
    caf::actor made = ch->make(*in.sys, ctx);
    routes.replace(hop, 0, made);
    in.custom.push_back(made);
  }

  supervisor_setup ss;
  ss.watch = watch;
  ss.engine = in.engine;
  ss.hang_timeout_s = o.hang_timeout_s;
  ss.local_node = spawn_local_node(*in.sys, watch);
  in.local_node = ss.local_node;
  ss.max_restarts = o.max_restarts;
  ss.restart_window_s = o.restart_window_s;
  ss.retry_after_give_up = o.on_give_up == give_up_policy::retry;
  ss.retry_interval_s = o.retry_interval_s;
  ss.on_give_up = o.on_fatal;
  for (size_t s = 0; s < o.place.stages.size(); ++s) {
    const auto& st = o.place.stages[s];
    // the stage's in-process TP group: its shards join it, this process's node aborts it
    std::shared_ptr<transport::inproc_group> group;
    std::shared_ptr<transport::nccl_group> nccl;
    if (st.tp > 1 && o.workers == 0) {
      nccl = nccl_for(st); // its ranks on distinct GPUs: sums on the GPUs
      if (!nccl) group = transport::inproc_group::create(st.tp);
    }
    // in worker processes, a stage whose every rank owns a GPU sums over NCCL (formed over
    // its UCX group); the ranks' GPUs are checked where they are, by NCCL (one rank per GPU)
    bool nccl_across = o.workers > 0 && st.tp > 1 && have_nccl();
    for (int r = 0; r < st.tp && nccl_across; ++r) {
      auto d = device_of(st, r);
      nccl_across = d && d->cuda;
    }
    for (int r = 0; r < st.tp; ++r) {
      shard_setup sh;
      sh.model = m;
      sh.spec = o.place.shard(s, r);
      // the stage's device for this rank (placement "@cuda:0"), else the host's default
      TROUPE_TRY_ASSIGN(dev, device_of(st, r));
      sh.opt.where = st.devices.empty() ? o.where
                     : dev.cuda         ? kernels::backend::cuda
                                        : kernels::backend::cpu;
      sh.opt.device = dev.index;
      sh.opt.cpus = dev.cpus;
      sh.opt.threads = o.threads_per_shard;
      sh.opt.kv_blocks = in.kv_blocks;
      sh.opt.state_slots = in.state_slots;
      sh.opt.block_size = o.block_size;
      sh.opt.kv_dtype = o.kv_dtype;
      sh.opt.quantize = o.quantize;
      sh.stage = static_cast<int>(s);
      sh.hop = routes.hop_of_stage(static_cast<int>(s));
      sh.last = sh.spec.last_stage;
      sh.routes = routes;
      sh.watch = watch;
      sh.group = group;
      sh.nccl = nccl;
      sh.nccl_across = nccl_across;
      sh.faults = faults;
      ss.shards.push_back(std::move(sh));
    }
  }
  if (o.workers > 0) {
    ss.pool = in.pool;
    ss.worker_of = o.shard_worker;
    ss.model_path = m->path;
    ss.group_timeout_s = o.group_timeout_s;
  }
  ss.routes = routes; // with every developer actor in place
  in.supervisor = spawn_supervisor(*in.sys, std::move(ss));
  caf::anon_send(in.engine, attach_atom::value, caf::actor_cast<caf::actor>(in.supervisor));
  if (in.pool) { // from this process: the pool takes orders from nowhere else
    caf::scoped_actor self{*in.sys};
    self->send(in.pool, attach_atom::value, caf::actor_cast<caf::actor>(in.supervisor));
  }
  return h;
}

bool host::wait_ready(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    const engine_stats s = stats();
    if (s.ready) return true;
    if (s.cannot_load) return false; // the checkpoint does not fit the plan
    // given up for good (no retry coming): waiting longer cannot help
    if (s.not_ready_reason.find("gave up") != std::string::npos &&
        impl_->opt.on_give_up == give_up_policy::exit)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

engine_stats host::stats() {
  caf::scoped_actor self{*impl_->sys};
  engine_stats out;
  self->request(impl_->engine, std::chrono::seconds(10), stats_atom::value)
      .receive([&](const engine_stats& s) { out = s; }, [&](const caf::error&) {});
  return out;
}

std::vector<int64_t> host::resident_bytes() {
  caf::scoped_actor self{*impl_->sys};
  std::vector<int64_t> out;
  self->request(impl_->supervisor, std::chrono::seconds(10), stats_atom::value)
      .receive([&](const std::vector<int64_t>& v) { out = v; }, [&](const caf::error&) {});
  return out;
}

namespace {

// The output side of one completion in host::generate(_many).
struct collector {
  completion c;
  std::unique_ptr<output_processor> proc;
  bool open = true;

  // Applies an engine event; returns the event with its text, or nothing to show. Sets
  // `stop_hit` when a stop string ended the completion (the engine must be told).
  std::optional<gen_event> apply(const gen_event& e, bool& stop_hit) {
    stop_hit = false;
    if (!open) return std::nullopt;
    gen_event out = e;
    out.text.clear();
    if (!e.tokens.empty()) {
      const auto d = proc->push(e.tokens);
      out.text = d.text;
      out.tokens.resize(d.accepted);
      c.tokens.insert(c.tokens.end(), e.tokens.begin(),
                      e.tokens.begin() + static_cast<std::ptrdiff_t>(d.accepted));
      if (proc->stopped()) {
        out.finish = finish_reason::stop;
        stop_hit = e.finish == finish_reason::none; // the engine did not end it itself
      }
    }
    if (out.finish != finish_reason::none && !proc->stopped()) out.text += proc->finish().text;
    c.text += out.text;
    if (out.finish != finish_reason::none) {
      c.finish = out.finish;
      if (out.finish == finish_reason::error) c.err = {e.error_code, e.error_message};
      open = false;
    }
    return out;
  }
};

std::vector<collector> collectors_for(const gen_request& r, const tokenizer& tok) {
  std::vector<collector> out(static_cast<size_t>(std::max(r.n, 1)));
  for (auto& k : out) {
    k.c.prompt_tokens = r.prompt;
    k.proc = std::make_unique<output_processor>(tok, r.prompt, r.stop, r.min_tokens);
  }
  return out;
}

} // namespace

expected<std::vector<completion>>
host::generate(const gen_request& r, const std::function<void(const gen_event&)>& on_event,
               double timeout_s) {
  auto many = generate_many({r}, timeout_s, on_event);
  if (!many) return many.error();
  return std::move((*many)[0]);
}

expected<std::vector<std::vector<completion>>>
host::generate_many(const std::vector<gen_request>& rs, double timeout_s,
                    const std::function<void(const gen_event&)>& on_event) {
  caf::scoped_actor self{*impl_->sys};
  std::map<int64_t, size_t> index;
  std::vector<std::vector<collector>> cols(rs.size());
  int open = 0;
  for (size_t i = 0; i < rs.size(); ++i) {
    error err;
    int64_t id = -1;
    self->request(impl_->engine, std::chrono::seconds(30), generate_atom::value, rs[i],
                  caf::actor{self})
        .receive([&](int64_t got) { id = got; }, [&](const caf::error& e) { err = from_caf(e); });
    if (id < 0) {
      for (auto [other, j] : index) self->send(impl_->engine, cancel_atom::value, other);
      return error{err.code, rs.size() == 1
                                 ? "request refused: " + err.message
                                 : fmt::format("request {} refused: {}", i, err.message)};
    }
    index[id] = i;
    cols[i] = collectors_for(rs[i], *impl_->model->tok);
    open += static_cast<int>(cols[i].size());
  }
  bool timed_out = false;
  while (open > 0 && !timed_out) {
    self->receive(
        [&](event_atom, const gen_event& e) {
          auto it = index.find(e.request_id);
          if (it == index.end() || e.index < 0 ||
              e.index >= static_cast<int>(cols[it->second].size()))
            return;
          auto& k = cols[it->second][static_cast<size_t>(e.index)];
          bool stop_hit = false;
          auto shown = k.apply(e, stop_hit);
          if (stop_hit) self->send(impl_->engine, finish_atom::value, e.request_id, e.index);
          if (shown && on_event) on_event(*shown);
          if (shown && shown->finish != finish_reason::none) --open;
        },
        caf::after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))) >>
            [&] { timed_out = true; });
  }
  if (timed_out) {
    for (auto [id, i] : index) self->send(impl_->engine, cancel_atom::value, id);
    return make_error(errc::timeout, "requests did not finish within {} s", timeout_s);
  }
  std::vector<std::vector<completion>> out(rs.size());
  for (size_t i = 0; i < rs.size(); ++i)
    for (auto& k : cols[i]) out[i].push_back(std::move(k.c));
  return out;
}

const model_source& host::model() const {
  return *impl_->model;
}
const host_options& host::options() const {
  return impl_->opt;
}
int64_t host::kv_blocks() const {
  return impl_->kv_blocks;
}
uint16_t host::worker_port() const {
  return impl_->worker_port;
}
host_internals& host::internals() {
  return *impl_;
}

} // namespace troupe::actors
