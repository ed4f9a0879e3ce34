// executor.cpp: building and running a shard's graph (executor.hpp): creation (cut, weights,
// backend, KV cache), the step (inputs, copy-on-write, the node loop or its recorded graph,
// collectives, outputs). Compiling the plans is executor_compile.cpp, the collectives
// executor_collectives.cpp.
#include "exec/executor.hpp"
#include "exec/shard_graph.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <sys/mman.h>
#include <unistd.h>

#include "arch/family.hpp"
#include "core/log.hpp"
#include "core/thread_pool.hpp"
#include "exec/executor_impl.hpp"
#include "exec/expert_load.hpp"
#include "graph/passes.hpp"
#include "kernels/jit.hpp"

namespace troupe::exec {

using namespace detail;

executor::~executor() {
  drop_graphs();
}

void executor::drop_graphs() {
  for (auto& [key, g] : graphs_) be_->destroy_graph(g);
  graphs_.clear();
  graphs_seen_.clear();
}

std::string executor::spec_name() const {
  return fmt::format("shard layers {}-{} rank {}", spec_.layer_begin, spec_.layer_end - 1,
                     spec_.tp_rank);
}

expected<std::unique_ptr<executor>> executor::create(std::shared_ptr<const model_source> m,
                                                     const shard_spec& spec_in,
                                                     const exec_options& opt, collective* comm) {
  if (opt.block_size <= 0 || opt.kv_blocks < 2)
    return make_error(errc::invalid_argument,
                      "KV arena needs a positive block size and at least 2 blocks");
  const model_config& c = m->config;
  std::unique_ptr<executor> e(new executor());
  e->source_ = m;
  e->opt_ = opt;
  e->comm_ = comm;
  e->spec_ = spec_in;
  if (spec_in.layer_begin < 0 || spec_in.layer_end > c.n_layer ||
      spec_in.layer_begin >= spec_in.layer_end)
    return make_error(errc::invalid_argument, "layers [{}, {}) outside the model's {}",
                      spec_in.layer_begin, spec_in.layer_end, c.n_layer);
  if (comm && comm->size() != spec_in.tp_size)
    return make_error(errc::invalid_argument, "collective of size {} for TP {}", comm->size(),
                      spec_in.tp_size);
  TROUPE_TRY_ASSIGN(built, arch::build_graph(*m));
  TROUPE_TRY_ASSIGN(cut, cut_for_shard(c, std::move(built), spec_in));
  e->spec_ = cut.spec;
  e->dims_ = cut.dims;
  graph::graph whole = std::move(cut.g);
  // element-wise programs: compiled by the JIT for the CPU; where it cannot, composed from
  // primitive ops (the reference backend interprets them as they are)
  const bool gpu = opt.where == kernels::backend::cuda;
  if ((gpu || opt.where == kernels::backend::cpu) && !whole.programs.empty()) {
    // NVRTC builds each program for the GPU, the C++ JIT for the CPU
    if (auto* d = gpu ? kernels::get_device(kernels::backend::cuda, opt.device) : nullptr)
      TROUPE_TRY(d->make_current());
    // the CPU's programs build on several threads at once (each is a compiler run of ~0.4 s,
    // and a family with constants per layer has one per layer); NVRTC's on this one
    std::vector<kernels::ew_program*> progs; // each once (layers may share one)
    for (auto& prog : whole.programs)
      if (std::find(progs.begin(), progs.end(), prog.get()) == progs.end())
        progs.push_back(prog.get());
    std::vector<status> st(progs.size());
    auto prepare = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        auto& prog = *progs[static_cast<size_t>(i)];
        st[static_cast<size_t>(i)] = gpu             ? kernels::jit_prepare_gpu(prog)
                                     : prog.compiled ? status{}
                                                     : kernels::jit_prepare(prog);
      }
    };
    const auto n_progs = static_cast<int64_t>(progs.size());
    if (gpu) {
      prepare(0, n_progs);
    } else {
      thread_pool pool(static_cast<int>(
          std::min<int64_t>(n_progs, std::max(1u, std::thread::hardware_concurrency()))));
      pool.parallel_for(n_progs, 1, prepare);
    }
    std::set<const kernels::ew_program*> built;
    for (size_t i = 0; i < st.size(); ++i) {
      if (st[i]) {
        built.insert(progs[i]);
        continue;
      }
      static std::once_flag said;
      std::call_once(said, [&] {
        TROUPE_LOG_WARN("exec", "{}; element-wise programs run as compositions of primitive ops",
                        st[i].error().message);
      });
    }
    const int n = graph::expand_elementwise(
        whole, [&](const kernels::ew_program& p) { return built.count(&p) > 0; });
    for (int i = 0; i < n; ++i) kernels::jit_count_composed();
  }
  TROUPE_TRY(graph::infer_shapes(whole));
  TROUPE_TRY(whole.validate());
  e->base_ = std::move(whole);
  TROUPE_TRY_ASSIGN(w, load_weights(*m, e->base_));
  e->weights_ = std::move(w);
  if (opt.quantize != dtype::f32)
    TROUPE_TRY(quantize_weights(*m, e->base_, e->weights_, opt.quantize));
  TROUPE_TRY_ASSIGN(be, opt.host_as_device
                            ? make_emulated_device_backend()
                            : make_backend(opt.where, opt.device, opt.threads, opt.cpus));
  e->be_ = std::move(be);
  e->on_device_ = !e->be_->host_memory();
  if (comm && comm->device_memory()) {
    if (!e->on_device_)
      return make_error(errc::invalid_argument,
                        "a collective on device memory (NCCL) for a shard in host memory");
    comm->set_stream(e->be_->stream()); // its operations go on this shard's stream
  }
  if (!e->on_device_) TROUPE_TRY(e->lay_out(*m, opt.pack_budget));
  if (e->on_device_) {
    // the weights, uploaded once into one buffer; the views then point there. A tensor two
    // values read (a tied embedding and lm_head) goes up once.
    std::map<std::pair<const void*, int64_t>, int64_t> placed; // (host bytes, size) -> offset
    int64_t total = 0;
    for (const auto& v : e->weights_.views)
      if (v.data && placed.emplace(std::pair{v.data, v.nbytes()}, total).second)
        total += round_up(v.nbytes());
    TROUPE_TRY_ASSIGN(wd, e->be_->allocate(static_cast<size_t>(std::max<int64_t>(total, align))));
    std::set<int64_t> sent;
    for (auto& v : e->weights_.views) {
      if (!v.data) continue;
      const int64_t at = placed.at({v.data, v.nbytes()});
      auto* dst = static_cast<uint8_t*>(wd.data()) + at;
      if (sent.insert(at).second)
        TROUPE_TRY(e->be_->upload(dst, v.data, static_cast<size_t>(v.nbytes())));
      v.data = dst;
    }
    e->weights_.owned.clear(); // the host copies (column slices, gathered experts) are on it now
    e->weights_dev_ = std::move(wd);
  }
  // the KV cache: one buffer per cache value a node writes, [NB, P, Hkv, D]; and one per
  // recurrent state a node reads (and updates in place), [NS, dims...] in f32
  e->kv_of_.assign(e->base_.values.size(), -1);
  std::vector<vid> touched;
  for (const auto& n : e->base_.nodes) {
    touched.assign(n.in.begin(), n.in.end());
    touched.insert(touched.end(), n.out.begin(), n.out.end());
    for (vid v : touched) {
      if (v == graph::none) continue;
      const value& s = e->base_[v];
      if (s.kind != value_kind::state || e->kv_of_[static_cast<size_t>(v)] >= 0) continue;
      const bool rec = graph::recurrent(s.state);
      if (rec && opt.state_slots <= 0)
        return make_error(errc::invalid_argument,
                          "{}: the model keeps a recurrent state per sequence ({}), and the shard "
                          "was given no state slots",
                          m->path, s.name);
      e->recurrent_ = e->recurrent_ || rec;
      const int64_t bytes =
          rec ? opt.state_slots * s.row_elems() * static_cast<int64_t>(sizeof(float))
              : row_bytes(opt.kv_dtype, opt.kv_blocks * opt.block_size * s.row_elems());
      // not zeroed: attention only reads positions a step has written, and a recurrent op
      // starts a sequence at position 0 from zero
      auto buf = e->be_->allocate(static_cast<size_t>(bytes));
      if (!buf) // most often a context longer than the machine holds: say what sizes it
        return make_error(
            buf.error().code, "{}: {} ({} MiB: {}): {}", m->path,
            rec ? "the recurrent states" : "the KV cache of " + s.name, bytes >> 20,
            rec ? fmt::format("{} sequences' states; fewer with --max-seqs or --kv-memory",
                              opt.state_slots)
                : fmt::format("{} blocks of {} tokens; fewer with a shorter --context or a "
                              "smaller --kv-memory",
                              opt.kv_blocks, opt.block_size),
            buf.error().message);
      e->kv_of_[static_cast<size_t>(v)] = static_cast<int>(e->kv_.size());
      e->kv_.push_back(std::move(*buf));
      (rec ? e->state_bytes_ : e->kv_bytes_) += bytes;
    }
  }
  if (e->spec_.tp_size > 1)
    for (int r = 0; r < e->spec_.tp_size; ++r) {
      shard_spec other = e->spec_;
      other.tp_rank = r;
      TROUPE_TRY_ASSIGN(od, plan_shard(c, other));
      e->gather_counts_.push_back(od.Vs);
    }
  for (int tc = 0; tc < 2; ++tc)
    for (int nc = 0; nc < 2; ++nc) TROUPE_TRY(e->compile(tc, nc));
  // a device shard allocates for its largest expected step now, not on the step path: the
  // arena and its step inputs (a table of up to max_rows sequences of 64 blocks grows later)
  if (e->on_device_) {
    const int64_t rows = std::max<int64_t>(opt.max_rows, 16);
    TROUPE_TRY(e->grow_arena(rows));
    TROUPE_TRY_ASSIGN(ib,
                      e->be_->allocate(static_cast<size_t>((6 * 16 + 6 * rows + rows * 67) * 4)));
    e->inputs_dev_ = std::move(ib);
    if (!e->spec_.first_stage) { // the previous stage's hidden rows
      TROUPE_TRY_ASSIGN(
          hb, e->be_->allocate(static_cast<size_t>(e->arena_rows_ * c.residual_width()) * 4));
      e->hidden_dev_ = std::move(hb);
    }
  }
  const char* env = std::getenv("TROUPE_CUDA_GRAPHS");
  e->graphs_on_ = e->on_device_ && opt.graphs && !opt.profile && e->be_->device().can_capture() &&
                  !(env && std::string(env) == "0");
  return e;
}

status executor::grow_arena(int64_t T) {
  if (T <= arena_rows_) return {};
  int64_t most = 0, scratch = 0;
  for (const auto& q : plans_) {
    most = std::max(most, q->arena_row_bytes);
    scratch = std::max(scratch, q->scratch_row_bytes);
  }
  const int64_t rows = std::max<int64_t>(T, 16);
  if (on_device_ && arena_rows_ > 0) {
    static std::once_flag said;
    std::call_once(said, [&] {
      TROUPE_LOG_INFO("exec", "a step of {} rows grows the device arena sized for {} (max_rows)", T,
                      arena_rows_);
    });
  }
  arena_ = {}; // the old one first: device memory is scarce
  scratch_ = {};
  arena_rows_ = 0; // until the new ones are there (a failed allocation leaves none)
  drop_graphs();   // recorded with the old layout (offsets scale with the rows)
  TROUPE_TRY_ASSIGN(a, be_->allocate(static_cast<size_t>(std::max<int64_t>(most, align) * rows)));
  TROUPE_TRY_ASSIGN(sc,
                    be_->allocate(static_cast<size_t>(std::max<int64_t>(scratch, align) * rows)));
  arena_ = std::move(a);
  scratch_ = std::move(sc);
  arena_rows_ = rows;
  return {};
}

std::string executor::device_name() const {
  return be_->device().describe();
}

expected<tensor_view> executor::view_of(const plan& p, vid v, int64_t T, int64_t N, int64_t S,
                                        int64_t cols) const {
  const value& x = p.g[v];
  switch (x.kind) {
  case value_kind::weight:
    return weights_.views[static_cast<size_t>(v)];
  case value_kind::state: {
    const auto& buf = kv_[static_cast<size_t>(kv_of_[static_cast<size_t>(v)])];
    if (graph::recurrent(x.state))
      return tensor_view(buf.data(), dtype::f32,
                         shape{opt_.state_slots, x.dims[0], x.dims[1], x.dims[2]});
    return tensor_view(buf.data(), opt_.kv_dtype,
                       shape{opt_.kv_blocks, opt_.block_size, x.dims[0], x.dims[1]});
  }
  case value_kind::input: {
    auto i32 = [&](const std::vector<int32_t>& h, shape s) {
      if (on_device_) // uploaded by forward()
        return tensor_view(static_cast<int32_t*>(inputs_dev_.data()) +
                               input_off_[static_cast<size_t>(x.input)],
                           dtype::i32, s);
      return tensor_view(const_cast<int32_t*>(h.data()), dtype::i32, s);
    };
    switch (x.input) {
    case graph::input_kind::tokens:
      return i32(tokens_, shape{T});
    case graph::input_kind::tokens_local:
      return i32(tokens_local_, shape{T});
    case graph::input_kind::positions:
      return i32(positions_, shape{T});
    case graph::input_kind::slots:
      return i32(slots_, shape{T});
    case graph::input_kind::seq_table:
      return i32(seq_table_, shape{S, cols});
    case graph::input_kind::logit_rows:
      return i32(logit_rows_, shape{N});
    case graph::input_kind::state_table:
      return i32(state_table_, shape{S, 4});
    case graph::input_kind::hidden:
      return make_error(errc::internal, "the hidden input is bound by forward()");
    }
    break;
  }
  case value_kind::activation: {
    const vid root = p.g.storage(v);
    const int64_t off = p.offset[static_cast<size_t>(root)];
    if (off < 0) return make_error(errc::internal, "graph: {} has no arena slot", x.name);
    auto* base = static_cast<uint8_t*>(arena_.data()) + off * arena_rows_;
    return tensor_view(base, x.type, make_shape(rows_of(x, T, N, S), x.dims));
  }
  }
  return make_error(errc::internal, "graph: value {} of unknown kind", x.name);
}

status executor::check_batch(const batch& b) const {
  const model_config& c = config();
  const int64_t T = b.n_tokens();
  const int64_t P = opt_.block_size;
  const int64_t W = c.kv_horizon();
  int64_t covered = 0;
  for (const auto& s : b.seqs) {
    if (s.count <= 0 || s.begin != covered || s.begin + s.count > T || s.pos0 < 0)
      return make_error(errc::invalid_argument, "batch: sequence {} covers tokens [{}, {}) of {}",
                        s.seq_id, s.begin, s.begin + s.count, T);
    if (s.score_rows < 0 || s.score_rows > s.count - (s.logits ? 1 : 0))
      return make_error(errc::invalid_argument, "sequence {}: {} scored rows of {} tokens",
                        s.seq_id, s.score_rows, s.count);
    if (recurrent_ && (s.state_slot < 0 || s.state_slot >= opt_.state_slots))
      return make_error(errc::out_of_range, "sequence {}: state slot {} outside [0, {})", s.seq_id,
                        s.state_slot, opt_.state_slots);
    if (s.pos0 + s.count > c.ctx)
      return make_error(errc::out_of_range, "sequence {} reaches position {} past the context {}",
                        s.seq_id, s.pos0 + s.count, c.ctx);
    const int64_t need = (s.pos0 + s.count + P - 1) / P;
    if (static_cast<int64_t>(s.blocks.size()) < need)
      return make_error(errc::invalid_argument, "sequence {} has {} blocks for {} positions",
                        s.seq_id, s.blocks.size(), s.pos0 + s.count);
    // with a sliding window on every layer, blocks wholly before the first query's window
    // are never read and may have been freed (block id 0)
    const int64_t seen = W > 0 ? std::max<int64_t>(0, s.pos0 - W + 1) / P : 0;
    for (int64_t i = 0; i < need; ++i) {
      const int32_t blk = s.blocks[static_cast<size_t>(i)];
      if (blk < (i < seen ? 0 : 1) || blk >= opt_.kv_blocks)
        return make_error(errc::out_of_range, "sequence {}: block id {} outside [{}, {})", s.seq_id,
                          blk, i < seen ? 0 : 1, opt_.kv_blocks);
    }
    covered += s.count;
  }
  if (covered != T)
    return make_error(errc::invalid_argument, "batch: sequences cover {} of {} tokens", covered, T);
  for (int32_t t : b.tokens)
    if (t < 0 || t >= c.V)
      return make_error(errc::out_of_range, "token id {} outside the vocabulary", t);
  return {};
}

status executor::forward(const batch& b, std::vector<float>& x, std::vector<float>* logits) {
  TROUPE_TRY(check_batch(b));
  const model_config& c = config();
  const int64_t T = b.n_tokens(), P = opt_.block_size;
  if (T == 0) return {};
  const bool last_stage = spec_.last_stage;
  const int64_t N = last_stage && logits ? b.n_logits() : 0;
  const int64_t S = static_cast<int64_t>(b.seqs.size());
  const size_t plan_index =
      static_cast<size_t>((T >= row_class_boundary ? 2 : 0) + (N >= row_class_boundary ? 1 : 0));
  const plan& p = *plans_[plan_index];
  if (!spec_.first_stage && static_cast<int64_t>(x.size()) != T * c.residual_width())
    return make_error(errc::shape_mismatch, "stage input has {} values for [{}, {}]", x.size(), T,
                      c.residual_width());
  // the arena and the scratch grow with the largest step seen
  TROUPE_TRY(grow_arena(T));
  // step inputs
  tokens_.assign(b.tokens.begin(), b.tokens.end());
  tokens_local_.resize(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = b.tokens[static_cast<size_t>(t)];
    tokens_local_[static_cast<size_t>(t)] =
        id >= dims_.v0 && id < dims_.v0 + dims_.Vs ? static_cast<int32_t>(id - dims_.v0) : -1;
  }
  positions_.resize(static_cast<size_t>(T));
  slots_.resize(static_cast<size_t>(T));
  size_t max_blocks = 0;
  for (const auto& s : b.seqs) max_blocks = std::max(max_blocks, s.blocks.size());
  // on a device the table's width is a power of two (from 16): a decode graph records it, and
  // a sequence gains a block every P tokens (the padding is never read)
  if (on_device_) max_blocks = std::max<size_t>(16, std::bit_ceil(max_blocks));
  const int64_t cols = 3 + static_cast<int64_t>(max_blocks);
  seq_table_.assign(static_cast<size_t>(S * cols), 0);
  state_table_.resize(static_cast<size_t>(S * 4));
  logit_rows_.clear();
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const auto& s = b.seqs[si];
    for (int32_t i = 0; i < s.count; ++i) {
      const int32_t pos = s.pos0 + i;
      positions_[static_cast<size_t>(s.begin + i)] = pos;
      slots_[static_cast<size_t>(s.begin + i)] =
          s.blocks[static_cast<size_t>(pos / P)] * static_cast<int32_t>(P) +
          pos % static_cast<int32_t>(P);
    }
    int32_t* row = seq_table_.data() + si * static_cast<size_t>(cols);
    row[0] = s.begin, row[1] = s.count, row[2] = s.pos0;
    std::copy(s.blocks.begin(), s.blocks.end(), row + 3);
    int32_t* st = state_table_.data() + si * 4;
    st[0] = s.begin, st[1] = s.count, st[2] = s.pos0, st[3] = s.state_slot;
    for (int32_t i = 0; i < s.score_rows; ++i) logit_rows_.push_back(s.begin + i);
    if (s.logits) logit_rows_.push_back(s.begin + s.count - 1);
  }
  if (on_device_) {
    // every step input in one upload (input_off_: where each kind starts), then the hidden rows
    using ik = graph::input_kind;
    staged_.clear();
    auto stage = [&](ik k, const std::vector<int32_t>& v) {
      input_off_[static_cast<size_t>(k)] = static_cast<int64_t>(staged_.size());
      staged_.insert(staged_.end(), v.begin(), v.end());
      staged_.resize((staged_.size() + 15) / 16 * 16); // 64-byte aligned starts
    };
    stage(ik::tokens, tokens_);
    stage(ik::tokens_local, tokens_local_);
    stage(ik::positions, positions_);
    stage(ik::slots, slots_);
    stage(ik::seq_table, seq_table_);
    stage(ik::logit_rows, logit_rows_);
    stage(ik::state_table, state_table_);
    const size_t bytes = staged_.size() * sizeof(int32_t);
    if (inputs_dev_.size() < bytes) {
      drop_graphs(); // recorded with the old buffer's pointers
      inputs_dev_ = {};
      TROUPE_TRY_ASSIGN(ib, be_->allocate(std::max<size_t>(bytes * 2, 4096)));
      inputs_dev_ = std::move(ib);
    }
    TROUPE_TRY(be_->upload(inputs_dev_.data(), staged_.data(), bytes));
    if (!spec_.first_stage) {
      const size_t xb = x.size() * sizeof(float);
      if (hidden_dev_.size() < xb) {
        drop_graphs(); // recorded with the old buffer's pointers
        hidden_dev_ = {};
        TROUPE_TRY_ASSIGN(
            hb, be_->allocate(std::max<size_t>(
                    xb, static_cast<size_t>(arena_rows_ * c.residual_width()) * sizeof(float))));
        hidden_dev_ = std::move(hb);
      }
      TROUPE_TRY(be_->upload(hidden_dev_.data(), x.data(), xb));
    }
  }
  // copy-on-write: blocks that sequences stopped sharing get their own copy before writing
  for (auto [src, dst] : b.copies) {
    if (src <= 0 || dst <= 0 || src >= opt_.kv_blocks || dst >= opt_.kv_blocks)
      return make_error(errc::out_of_range, "KV copy {} -> {} outside [1, {})", src, dst,
                        opt_.kv_blocks);
    for (size_t i = 0; i < p.g.values.size(); ++i) {
      if (kv_of_[i] < 0 || graph::recurrent(p.g.values[i].state)) continue;
      const int64_t bb = row_bytes(opt_.kv_dtype, P * p.g.values[i].row_elems());
      auto* base = static_cast<uint8_t*>(kv_[static_cast<size_t>(kv_of_[i])].data());
      TROUPE_TRY(be_->copy(base + dst * bb, base + src * bb, static_cast<size_t>(bb)));
    }
  }
  kernels::bump_arena scratch(align); // reset before every node
  auto view = [&](vid v) -> expected<tensor_view> {
    if (v == graph::none) return tensor_view{};
    const value& xv = p.g[v];
    if (xv.kind == value_kind::input && xv.input == graph::input_kind::hidden)
      return tensor_view(on_device_ ? hidden_dev_.data() : static_cast<void*>(x.data()), dtype::f32,
                         shape{T, c.residual_width()});
    if (xv.kind == value_kind::weight && xv.empty) return tensor_view{};
    return view_of(p, v, T, N, S, cols);
  };
  // profiling: each node's time from its start to the next node's (a device backend would
  // need a synchronisation per node; the CPU backend runs each node to completion)
  using clock = std::chrono::steady_clock;
  clock::time_point started;
  size_t open = p.g.nodes.size();
  auto close = [&]() -> status {
    if (open == p.g.nodes.size()) return {};
    if (on_device_) TROUPE_TRY(be_->synchronize()); // the node's work, not its launch
    const node& n = p.g.nodes[open];
    const std::string kernel = n.kind == node_kind::op           ? p.kernels[open].name
                               : n.kind == node_kind::all_reduce ? std::string("all_reduce")
                                                                 : std::string("all_gather");
    const bool decode = T < row_class_boundary;
    auto it = std::find_if(profile_.begin(), profile_.end(), [&](const op_time& o) {
      return o.decode == decode && o.kernel == kernel;
    });
    if (it == profile_.end()) {
      op_time o;
      o.kernel = kernel;
      o.decode = decode;
      for (vid v : n.in)
        o.weight_matmul =
            o.weight_matmul ||
            (n.kind == node_kind::op && n.op != kernels::op::embedding &&
             n.op != kernels::op::causal_conv && v != graph::none && // (taps, not a matrix)
             p.g[v].kind == value_kind::weight && !p.g[v].empty && p.g[v].dims.size() == 2);
      profile_.push_back(o);
      it = profile_.end() - 1;
    }
    it->seconds += std::chrono::duration<double>(clock::now() - started).count();
    ++it->calls;
    open = p.g.nodes.size();
    return {};
  };
  auto run_nodes = [&]() -> status {
    for (size_t i = 0; i < p.g.nodes.size(); ++i) {
      const node& n = p.g.nodes[i];
      if (N == 0 && n.layer >= p.g.n_layer) continue; // no row needs logits this step
      if (opt_.profile) {
        TROUPE_TRY(close());
        if (n.kind != node_kind::view) open = i, started = clock::now();
      }
      switch (n.kind) {
      case node_kind::view:
        continue;
      case node_kind::all_reduce: {
        if (spec_.tp_size == 1) continue;
        if (!comm_)
          return make_error(errc::internal, "TP {} shard without a collective", spec_.tp_size);
        TROUPE_TRY_ASSIGN(t, view(n.in[0]));
        TROUPE_TRY(all_reduce(t, n.p.reduce_max));
        continue;
      }
      case node_kind::all_gather: {
        if (!comm_)
          return make_error(errc::internal, "TP {} shard without a collective", spec_.tp_size);
        TROUPE_TRY_ASSIGN(part, view(n.in[0]));
        TROUPE_TRY_ASSIGN(all, view(n.out[0]));
        TROUPE_TRY(all_gather(part, all, N));
        continue;
      }
      case node_kind::op:
        break;
      }
      kernels::op_args a;
      a.kind = n.op;
      a.p = n.p;
      a.p.block_size = static_cast<int>(P);
      for (size_t k = 0; k < n.in.size() && k < a.src.size(); ++k) {
        TROUPE_TRY_ASSIGN(t, view(n.in[k]));
        a.src[k] = t;
      }
      TROUPE_TRY_ASSIGN(d, view(n.out[0]));
      a.dst = d;
      if (n.out.size() > 1) {
        TROUPE_TRY_ASSIGN(d2, view(n.out[1]));
        a.dst2 = d2;
      }
      if (n.out.size() > 2) {
        TROUPE_TRY_ASSIGN(d3, view(n.out[2]));
        a.dst3 = d3;
      }
      scratch.reset(static_cast<uint8_t*>(scratch_.data()), scratch_.size());
      if (auto st = be_->run(p.kernels[i], a, &scratch); !st)
        return make_error(st.error().code, "{} ({}): {}", n.name, p.kernels[i].name,
                          st.error().message);
      // the experts' load: the stage's first rank counts (every rank sees the same choices);
      // the router's ids are host memory on the host backends
      if (n.op == kernels::op::moe && spec_.tp_rank == 0 && !on_device_)
        count_experts(n.layer,
                      n.p.n_expert > 0 ? n.p.n_expert
                                       : static_cast<int>(a.src[3].rows() /
                                                          std::max<int64_t>(a.src[5].cols(), 1)),
                      {a.src[1].as<int32_t>(), static_cast<size_t>(a.src[1].numel())});
    }
    return {};
  };
  // a decode step on a device replays the graph captured for its shape (launches recorded
  // once: the step's inputs change in place, the kernels and their arguments do not)
  if (on_device_ && T < row_class_boundary && graphs_on_ && p.capturable) {
    const graph_key key = {static_cast<int64_t>(plan_index), T, N, S, cols};
    auto it = graphs_.find(key);
    // a shape's first step runs as launches (its kernels load lazily, outside any capture),
    // its second is recorded; at most max_graphs shapes are kept
    const bool seen = !graphs_seen_.insert(key).second;
    if (it == graphs_.end() && seen) {
      if (graphs_.size() >= max_graphs) drop_graphs();
      auto& dev = be_->device();
      TROUPE_TRY(dev.make_current());
      status captured = be_->begin_capture();
      if (captured) {
        const status ran = run_nodes();
        auto g = be_->end_capture();
        if (ran && g) {
          it = graphs_.emplace(key, *g).first;
        } else {
          if (g) be_->destroy_graph(*g);
          captured = !ran ? ran : status(g.error());
        }
      }
      if (!captured) { // run it as launches from now on, and say so once
        graphs_on_ = false;
        TROUPE_LOG_WARN("exec", "{}: decode steps run without CUDA graphs: {}", spec_name(),
                        captured.error().message);
      }
    }
    if (it != graphs_.end()) {
      TROUPE_TRY(be_->launch_graph(it->second));
    } else {
      TROUPE_TRY(run_nodes());
    }
  } else {
    TROUPE_TRY(run_nodes());
  }
  if (opt_.profile) TROUPE_TRY(close());
  TROUPE_TRY(be_->synchronize());
  if (last_stage && logits) {
    logits->clear();
    if (N == 0) return {};
    TROUPE_TRY_ASSIGN(lg, view(p.g.logits));
    logits->resize(static_cast<size_t>(N * c.V));
    TROUPE_TRY(
        be_->download(logits->data(), lg.data, static_cast<size_t>(N * c.V) * sizeof(float)));
  } else if (!last_stage) {
    vid out = graph::none;
    for (size_t v = 0; v < p.g.values.size(); ++v)
      if (p.g.values[v].output) out = static_cast<vid>(v);
    TROUPE_TRY_ASSIGN(h, view(out));
    std::vector<float> next(static_cast<size_t>(T * c.residual_width()));
    TROUPE_TRY(be_->download(next.data(), h.data, next.size() * sizeof(float)));
    x = std::move(next);
  }
  return {};
}

// Drops the pages wholly inside [p, p + n) of memory this process made (matrices quantized at
// load): their physical memory goes back; were they read again, they would read zeros, not
// fault and not touch another allocation. Returns the bytes dropped.
static int64_t drop_pages(const void* p, int64_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = (b + page - 1) / page * page,
                  hi = (b + static_cast<uintptr_t>(n)) / page * page;
  if (hi <= lo || ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) return 0;
  return static_cast<int64_t>(hi - lo);
}

// The layouts the CPU kernels read fastest (tensor_view::packed), made once at load for the
// matrices a matmul reads. A matrix that only matmuls read, and whose kernels then read only
// its layout, releases its published rows (mapped from the checkpoint) as llama.cpp's
// repacking replaces them; were they read again, they would fault back in from the file. The
// budget bounds what the layouts add at their peak: the copies kept next to their published
// rows, and the largest matrix being laid out before its rows go.
status executor::lay_out(const model_source& m, int64_t pack_budget) {
  // weights by their bytes: whether a matmul reads them, and whether only matmuls do (a tied
  // embedding is looked up row by row too)
  std::map<const void*, std::pair<bool, bool>> readers; // data -> (by a matmul, only)
  for (const auto& n : base_.nodes)
    for (vid v : n.in) {
      if (v == graph::none) continue; // an absent optional source
      const tensor_view& w = weights_.views[static_cast<size_t>(v)];
      if (!w.data) continue;
      const bool mm = n.kind == graph::node_kind::op &&
                      (n.op == kernels::op::matmul || n.op == kernels::op::matmul_swiglu ||
                       n.op == kernels::op::matmul_qkv);
      auto [it, fresh] = readers.emplace(w.data, std::pair{mm, mm});
      if (!fresh) it->second = {it->second.first || mm, it->second.second && mm};
    }
  auto file_of = [&](const void* p) { return m.tensors ? m.tensors->file_of(p) : nullptr; };
  // each matrix a matmul reads once (a tensor two values read is one), decided once: its
  // layout's bytes, the file its published rows can be released from (null: they stay)
  struct matrix {
    int64_t bytes;
    const mapped_file* release_from;
    const void* at = nullptr; // its layout, once made
    bool drop_owned = false;  // rows this shard made (--quantize): dropped once laid out
  };
  std::map<std::pair<const void*, int64_t>, matrix> todo;
  std::vector<matrix*> of_view(weights_.views.size(), nullptr); // each view's matrix, if any
  int64_t total = 0, kept = 0, largest = 0;
  for (size_t i = 0; i < weights_.views.size(); ++i) {
    const tensor_view& v = weights_.views[i];
    const auto r = v.data ? readers.find(v.data) : readers.end();
    const int64_t bytes = r != readers.end() && r->second.first ? be_->packed_bytes(v) : 0;
    if (bytes <= 0) continue;
    auto [it, fresh] = todo.try_emplace(std::pair{v.data, bytes}, matrix{bytes, nullptr});
    of_view[i] = &it->second;
    if (!fresh) continue;
    if (r->second.second && be_->reads_packed_only(v)) {
      it->second.release_from = file_of(v.data);
      // rows quantized at load have no file to fault back from; the backend's promise that
      // only the layout is read lets their pages go all the same (quantize_weights.cpp)
      if (!it->second.release_from)
        for (const auto& b : weights_.owned)
          if (b.data() == v.data) it->second.drop_owned = true;
    }
    total += bytes;
    if (it->second.release_from || it->second.drop_owned)
      largest = std::max(largest, bytes);
    else
      kept += bytes;
  }
  if (total == 0) return {};
  layout_need_ = kept + largest;
  const int64_t budget = pack_budget >= 0 ? pack_budget : be_->memory().free / 2;
  if (layout_need_ > budget) { // a model that barely fits decodes from the published rows
    TROUPE_LOG_INFO("exec",
                    "{}: matmuls from the published rows: their packed layout would add {:.3f} "
                    "GB, more than {} ({:.3f} GB)",
                    spec_name(), layout_need_ / 1e9,
                    pack_budget >= 0 ? "the budget given" : "half of the free memory",
                    budget / 1e9);
    return {};
  }
  for (size_t i = 0; i < weights_.views.size(); ++i) {
    if (!of_view[i]) continue;
    tensor_view& v = weights_.views[i];
    matrix& x = *of_view[i];
    if (!x.at) {
      TROUPE_TRY_ASSIGN(b, buffer::allocate(static_cast<size_t>(x.bytes)));
      be_->pack(v, b.data());
      x.at = b.data();
      weights_.resident_bytes += x.bytes;
      layout_bytes_ += x.bytes;
      weights_.owned.push_back(std::move(b));
      if (x.release_from || x.drop_owned) {
        const auto dropped = x.release_from
                                 ? static_cast<int64_t>(x.release_from->release(v.data, v.nbytes()))
                                 : drop_pages(v.data, v.nbytes());
        weights_.resident_bytes -= dropped;
        released_bytes_ += dropped;
      }
    }
    v.packed = x.at;
  }
  return {};
}

} // namespace troupe::exec
