// op_cases_attention.cpp: harness cases for attention (op_cases.hpp): contiguous and paged,
// prefill tiles and decode rows, caches in f32 / f16 / bf16, sliding windows, chunks and the
// temperature on the scores, soft-caps, ALiBi and sinks, the null blocks a window or a chunk
// leaves unread, batched decode over all heads at once, and the KV-cache store.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>

#include <fmt/format.h>

#include "case_util.hpp"

namespace troupe::kernels::harness {

namespace {

// A step of three sequences (counts rows from first positions pos0s) through the blocks
// 1 .. NB - 1 of P rows, shuffled (block 0 is the null block): the table i32 [3, 3 + MB] (a
// sequence's first row, rows, first position, blocks; a block before `first_read(s)`, in blocks,
// the null one, as the scheduler frees what no query sees) and the step's rows T
struct paged_step {
  std::vector<int32_t> seqs;
  int64_t T = 0;
};
paged_step three_sequences(gen& g, const int64_t (&counts)[3], const int64_t (&pos0s)[3], int64_t P,
                           int64_t NB, int64_t MB,
                           const std::function<int64_t(int)>& first_read = nullptr) {
  std::vector<int32_t> blocks(NB - 1);
  std::iota(blocks.begin(), blocks.end(), 1);
  std::shuffle(blocks.begin(), blocks.end(), g.rng);
  paged_step out;
  int64_t used = 0;
  for (int s = 0; s < 3; ++s) {
    out.seqs.push_back(static_cast<int32_t>(out.T));
    out.seqs.push_back(static_cast<int32_t>(counts[s]));
    out.seqs.push_back(static_cast<int32_t>(pos0s[s]));
    const int64_t need = (pos0s[s] + counts[s] + P - 1) / P;
    const int64_t seen = first_read ? first_read(s) : 0;
    for (int64_t b = 0; b < MB; ++b)
      out.seqs.push_back(b < need && b >= seen ? blocks[used + b] : 0);
    used += need;
    out.T += counts[s];
  }
  return out;
}

} // namespace

void attention_cases(std::vector<op_case>& out_cases) {
  // head dims: 16 (a short row), 64 and 128 (the prefill tile's compiled head sizes), 80 (64 +
  // a remainder), 20 (not a multiple of 8: the tiles' scalar tails); prefill of 37 and 70 rows:
  // tiles of 16 (AVX-512) or 8 with a partial one, key blocks of 16 (8) with a partial one
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16})
    for (int64_t D : {16, 64, 80, 20, 128})
      for (auto [T, pos0] :
           {std::pair<int64_t, int64_t>{4, 3}, {1, 39}, {9, 0}, {37, 20}, {70, 0}}) {
        if (D != 16 && T == 4) continue;
        if ((D == 80 || D == 20) && T == 70) continue;
        if (D == 128 && T != 37) continue;
        const int64_t H = 8, Hkv = 2, S = pos0 + T;
        op_case c;
        c.name =
            fmt::format("attention(T={},S={},H={},Hkv={},D={},kv={})", T, S, H, Hkv, D, name(kv));
        gen g(c.name);
        c.kind = op::attention;
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D))};
        c.dst = out(dtype::f32, {T, H, D});
        c.p.pos0 = pos0;
        c.p.scale = 0.25f;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
        c.flops = 4.0 * T * H * D * S;
        out_cases.push_back(std::move(c));
      }
  // sliding windows (p.window): shorter than a tile, than a key block, and longer than both
  // (40: whole blocks inside every row's window of a 16-row tile); a decode row whose window
  // starts mid-block; one longer than the context (no window at all)
  for (dtype kv : {dtype::f32, dtype::f16})
    for (int64_t D : {16, 64})
      for (auto [T, pos0, W] : {std::tuple<int64_t, int64_t, int64_t>{37, 20, 5},
                                {1, 39, 16},
                                {70, 0, 24},
                                {9, 30, 3},
                                {20, 0, 40},
                                {70, 0, 40},
                                {37, 20, int64_t{1} << 40}}) {
        const int64_t H = 8, Hkv = 2, S = pos0 + T;
        op_case c;
        c.name = fmt::format("attention(T={},S={},H={},Hkv={},D={},kv={},window={})", T, S, H, Hkv,
                             D, name(kv), W);
        gen g(c.name);
        c.kind = op::attention;
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D))};
        c.dst = out(dtype::f32, {T, H, D});
        c.p.pos0 = pos0;
        c.p.window = W;
        c.p.scale = 0.25f;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
        c.flops = 4.0 * T * H * D * std::min(S, W);
        out_cases.push_back(std::move(c));
      }
  // chunked attention (p.chunk: Llama 4) shorter than a tile, across tiles, with a decode row
  // mid-chunk and one at a chunk's start (it sees itself only), with a window inside the chunk;
  // and the temperature on the scores (p.temp_floor / temp_scale), whose factor changes inside a
  // tile, alone and with chunks, with the position offset by 0 and by 1
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (int64_t D : {16, 64})
      for (auto [T, pos0, C, W, F] :
           {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>{37, 20, 5, 0, 0},
            {70, 0, 24, 0, 0},
            {1, 39, 16, 0, 0},
            {1, 48, 16, 0, 0},
            {40, 10, 16, 6, 0},
            {37, 20, 0, 0, 4},
            {1, 39, 0, 0, 8},
            {70, 0, 24, 0, 8}}) {
        const int64_t H = 8, Hkv = 2, S = pos0 + T;
        op_case c;
        c.name = fmt::format("attention(T={},S={},H={},Hkv={},D={},kv={},chunk={},window={},"
                             "temp_floor={})",
                             T, S, H, Hkv, D, name(kv), C, W, F);
        gen g(c.name);
        c.kind = op::attention;
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D)),
                 from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D))};
        c.dst = out(dtype::f32, {T, H, D});
        c.p.pos0 = pos0;
        c.p.chunk = C;
        c.p.window = W;
        c.p.temp_floor = F;
        c.p.temp_scale = 0.5f;
        c.p.temp_offset = F == 8 ? 1 : 0; // Llama 4's p + 1, Ministral 3's p
        c.p.scale = 0.25f;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
        out_cases.push_back(std::move(c));
      }
  // soft-capped scores (Gemma 2) and ALiBi (Bloom / MPT: 12 heads, so the slopes of the
  // heads past the largest power of two are exercised, and a shard whose first head is 4)
  // (and both at once with GQA: 4 query heads per KV head, the slopes indexed per query head)
  // (and over several key blocks and tiles: 40 rows after 30; and in a window of 12), from
  // caches in each element type (the modifiers run on the widened rows)
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto [softcap, alibi, head0, Hkv, T, pos0, W] :
         {std::tuple<float, float, int, int64_t, int64_t, int64_t, int64_t>{5.0f, 0.0f, 0, 12, 9, 6,
                                                                            0},
          {0.0f, 8.0f, 0, 12, 9, 6, 0},
          {0.0f, 8.0f, 4, 12, 9, 6, 0},
          {4.0f, 8.0f, 2, 3, 9, 6, 0},
          {4.0f, 8.0f, 2, 3, 40, 30, 0},
          {4.0f, 8.0f, 2, 3, 40, 30, 12},
          {4.0f, 8.0f, 2, 3, 1, 50, 12}}) {
      const int64_t H = 12, D = 16, S = pos0 + T;
      op_case c;
      c.name = fmt::format(
          "attention(T={},S={},H={},Hkv={},D={},kv={},softcap={},alibi={},head0={},window={})", T,
          S, H, Hkv, D, name(kv), softcap, alibi, head0, W);
      gen g(c.name);
      c.kind = op::attention;
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D, 2.0f)),
               from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D, 2.0f)),
               from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D))};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.pos0 = pos0;
      c.p.window = W;
      c.p.scale = 0.5f;
      c.p.softcap = softcap;
      c.p.alibi_max_bias = alibi;
      c.p.alibi_heads = 16;
      c.p.head0 = head0;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  // attention sinks (GPT-OSS: one logit per head in the softmax's denominator): decode rows,
  // a prefill with a partial tile, with and without a window, sinks above and below the scores,
  // from caches in each element type
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16})
    for (auto [T, pos0, W, D] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 39, 0, 64},
                                 {37, 20, 0, 64},
                                 {9, 30, 5, 16},
                                 {1, 50, 16, 16}}) {
      const int64_t H = 8, Hkv = 2, S = pos0 + T;
      op_case c;
      c.name = fmt::format("attention(T={},S={},H={},Hkv={},D={},kv={},window={},sinks)", T, S, H,
                           Hkv, D, name(kv), W);
      gen g(c.name);
      c.kind = op::attention;
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
               from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D)),
               from_floats(kv, {S, Hkv, D}, g.normal(S * Hkv * D)),
               from_floats(dtype::f32, {H}, g.normal(H, 3.0f))};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.pos0 = pos0;
      c.p.window = W;
      c.p.scale = 0.25f;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  // paged with a window of 6 over blocks of 4: blocks wholly before every query's window are
  // the null block 0 (the scheduler frees them), so a kernel that reads them fails the case;
  // the same with chunks of 8 (and the blocks before a sequence's first chunk null)
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (auto [D, W, C] :
         {std::tuple<int64_t, int64_t, int64_t>{8, 6, 0}, {64, 6, 0}, {8, 0, 8}, {64, 0, 8}}) {
      const int64_t H = 4, Hkv = 2, P = 4, NB = 24, MB = 8;
      op_case c;
      c.name = fmt::format("paged_attention(S=3,P={},H={},Hkv={},D={},kv={},window={},chunk={})", P,
                           H, Hkv, D, name(kv), W, C);
      gen g(c.name);
      c.kind = op::paged_attention;
      const int64_t counts[3] = {13, 1, 3}, pos0s[3] = {0, 25, 14};
      // the first block read: its first row's window or chunk
      const auto [seqs, T] = three_sequences(g, counts, pos0s, P, NB, MB, [&](int s) {
        const int64_t p0 = pos0s[s];
        return std::max<int64_t>({0, W ? p0 - W + 1 : 0, C ? p0 - p0 % C : 0}) / P;
      });
      // NB * P slots; nothing is stored in block 0 that a correct kernel could use
      std::vector<float> kvals = g.normal(NB * P * Hkv * D), vvals = g.normal(NB * P * Hkv * D);
      for (int64_t i = 0; i < P * Hkv * D; ++i) kvals[i] = vvals[i] = 1e4f;
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
               from_floats(kv, {NB, P, Hkv, D}, kvals), from_floats(kv, {NB, P, Hkv, D}, vvals),
               from_ints({3, 3 + MB}, seqs)};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.scale = 1.0f / std::sqrt(8.0f);
      c.p.block_size = P;
      c.p.window = W;
      c.p.chunk = C;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  // relative biases (Inkling's: a bias per query, head and distance, src7 [T, H, E]): a prefill
  // chunk, a decode row and a chunk after a prefix; E shorter than the contexts (the bias stops
  // at distance E) and longer; a window of 6 over blocks of 4 (earlier blocks null) with E = 6;
  // sinks beside them
  for (auto [D, E, W, sinks] : {std::tuple<int64_t, int64_t, int64_t, bool>{8, 5, 0, false},
                                {64, 40, 0, true},
                                {64, 6, 6, false}})
    for (dtype kv : {dtype::f32, dtype::bf16}) {
      const int64_t H = 4, Hkv = 2, P = 4, NB = 24, MB = 8;
      op_case c;
      c.name =
          fmt::format("paged_attention(S=3,P={},H={},Hkv={},D={},kv={},rel={}{}{})", P, H, Hkv, D,
                      name(kv), E, W ? fmt::format(",window={}", W) : "", sinks ? ",sinks" : "");
      gen g(c.name);
      c.kind = op::paged_attention;
      const int64_t counts[3] = {20, 1, 3}, pos0s[3] = {0, 25, 14};
      const auto [seqs, T] = three_sequences(g, counts, pos0s, P, NB, MB, [&](int s) {
        return std::max<int64_t>(0, W ? pos0s[s] - W + 1 : 0) / P;
      });
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_ints({3, 3 + MB}, seqs),
               sinks ? from_floats(dtype::f32, {H}, g.normal(H, 2.0f)) : absent(),
               absent(),
               absent(),
               from_floats(dtype::f32, {T, H, E}, g.normal(T * H * E, 2.0f))};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.scale = 1.0f / std::sqrt(8.0f);
      c.p.block_size = P;
      c.p.window = W;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16})
    for (int64_t D : {8, 64}) {
      // three sequences: a prefill chunk, a decode, a chunk continuing a prefix
      const int64_t H = 4, Hkv = 2, P = 4, NB = 24, MB = 6;
      op_case c;
      c.name =
          fmt::format("paged_attention(S=3,P={},H={},Hkv={},D={},kv={})", P, H, Hkv, D, name(kv));
      gen g(c.name);
      c.kind = op::paged_attention;
      const int64_t counts[3] = {20, 1, 3}, pos0s[3] = {0, 17, 6}; // 20: a whole 16-row tile
      const auto [seqs, T] = three_sequences(g, counts, pos0s, P, NB, MB);
      c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_ints({3, 3 + MB}, seqs)};
      c.dst = out(dtype::f32, {T, H, D});
      c.p.scale = 1.0f / std::sqrt(8.0f);
      c.p.block_size = P;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  // batched decode: 12 sequences of one row each (enough rows that a task takes a row with
  // all its KV heads) through shuffled blocks of 16; short rows (positions 0 to 66) go head
  // by head, long ones (1030 to 1140, over 1 MB of K and V each) in one pass over all heads
  // (window 1000: the one-pass path over a window that starts mid-block, earlier blocks null;
  // `mods`: soft-capped ALiBi scores and sinks, short rows and long)
  // (chunk 1024: the rows at 1030 .. 1140 see the keys from 1024 on, earlier blocks null; with
  // the temperature from a floor of 512)
  // (C = -1: the temperature alone on the long rows, which take the one-pass path over all heads)
  for (auto [long_rows, W, mods, C] : {std::tuple<bool, int64_t, bool, int64_t>{false, 0, false, 0},
                                       {true, 0, false, 0},
                                       {true, 1000, false, 0},
                                       {false, 0, true, 0},
                                       {true, 0, true, 0},
                                       {true, 0, false, 1024},
                                       {true, 0, false, -1}})
    for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16}) {
      if ((W || C) && kv == dtype::f16) continue;
      const int64_t B = 12, H = 8, Hkv = long_rows ? 4 : 2, D = 64, P = 16;
      const int64_t MB = long_rows ? 72 : 5, NB = B * MB + 1;
      op_case c;
      c.name =
          fmt::format("paged_attention(decode,S={},P={},H={},Hkv={},D={},kv={}{}{}{}{})", B, P, H,
                      Hkv, D, name(kv), long_rows ? ",long" : "",
                      W ? fmt::format(",window={}", W) : "", mods ? ",softcap,alibi,sinks" : "",
                      C > 0   ? fmt::format(",chunk={},temp_floor=512", C)
                      : C < 0 ? std::string(",temp_floor=512")
                              : std::string());
      gen g(c.name);
      c.kind = op::paged_attention;
      std::vector<int32_t> blocks(NB - 1);
      std::iota(blocks.begin(), blocks.end(), 1);
      std::shuffle(blocks.begin(), blocks.end(), g.rng);
      std::vector<int32_t> seqs;
      for (int64_t s = 0; s < B; ++s) {
        const int64_t pos = (long_rows ? 1030 : 0) + s * (long_rows ? 10 : 6); // sees pos + 1 keys
        seqs.insert(seqs.end(), {static_cast<int32_t>(s), 1, static_cast<int32_t>(pos)});
        // the first block read (0 without a window or chunks)
        const int64_t seen =
            std::max<int64_t>({0, W ? pos - W + 1 : 0, C > 0 ? pos - pos % C : 0}) / P;
        for (int64_t b = 0; b < MB; ++b)
          seqs.push_back(b <= pos / P && b >= seen ? blocks[s * MB + b] : 0);
      }
      c.src = {from_floats(dtype::f32, {B, H, D}, g.normal(B * H * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
               from_ints({B, 3 + MB}, seqs)};
      if (mods) {
        c.src.push_back(from_floats(dtype::f32, {H}, g.normal(H, 3.0f))); // sinks
        c.p.softcap = 4.0f;
        c.p.alibi_max_bias = 8.0f;
        c.p.alibi_heads = H;
      }
      c.dst = out(dtype::f32, {B, H, D});
      c.p.scale = 0.125f;
      c.p.block_size = P;
      c.p.window = W;
      c.p.chunk = std::max<int64_t>(C, 0);
      if (C) c.p.temp_floor = 512, c.p.temp_scale = 0.2f, c.p.temp_offset = 1;
      c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      out_cases.push_back(std::move(c));
    }
  for (dtype kv : {dtype::f32, dtype::f16, dtype::bf16}) {
    op_case c;
    c.name = fmt::format("kv_store(T=6,Hkv=2,D=8,cache={})", name(kv));
    gen g(c.name);
    c.kind = op::kv_store;
    std::vector<int32_t> slots = {5, 0, 17, 3, 30, 12};
    auto cache = from_floats(kv, {8, 4, 2, 8}, std::vector<float>(8 * 4 * 2 * 8, 0.0f));
    c.src = {from_floats(dtype::f32, {6, 2, 8}, g.normal(96)), from_ints({6}, slots)};
    c.dst = std::move(cache);
    c.p.block_size = 4;
    c.tol = {0, 0};
    out_cases.push_back(std::move(c));
  }
  // DeepSeek Sparse Attention: three sequences (a prefill chunk, a decode, a continued chunk)
  // through shuffled blocks; the indexer's top 6 of each query's keys (exact ids: fewer than 6
  // keys leave -1s), and paged attention over a selection (some entries -1)
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (bool select : {true, false}) {
      const int64_t P = 4, NB = 16, MB = 5, K = 6;
      const int64_t H = select ? 8 : 4, Hkv = select ? 1 : 2, D = select ? 16 : 24;
      op_case c;
      const bool sinks = !select && kv == dtype::bf16; // (HY-V4's sinks with a selection)
      c.name = fmt::format("{}(S=3,P={},H={},D={},K={},kv={}{})",
                           select ? "dsa_select" : "paged_attention_sparse", P, H, D, K, name(kv),
                           sinks ? ",sinks" : "");
      gen g(c.name);
      c.kind = select ? op::dsa_select : op::paged_attention;
      const int64_t counts[3] = {9, 1, 3}, pos0s[3] = {0, 14, 5};
      const auto [seqs, T] = three_sequences(g, counts, pos0s, P, NB, MB);
      std::vector<int32_t> picked; // positions <= the query's, a few -1
      for (int s = 0; s < 3; ++s)
        for (int64_t i = 0; i < counts[s]; ++i)
          for (int64_t j = 0; j < K; ++j)
            picked.push_back(j == K - 1 ? -1 : static_cast<int32_t>(g.rng() % (pos0s[s] + i + 1)));
      if (select) {
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {NB, P, 1, D}, g.normal(NB * P * D)), from_ints({3, 3 + MB}, seqs),
                 from_floats(dtype::f32, {T, H}, g.normal(T * H))};
        c.dst = out(dtype::i32, {T, K});
        c.p.scale = 0.25f;
        c.p.k = static_cast<int>(K);
        c.tol = {0, 0};
      } else {
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
                 from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
                 from_ints({3, 3 + MB}, seqs),
                 sinks ? from_floats(dtype::f32, {H}, g.normal(H, 1.0f)) : absent(),
                 from_ints({T, K}, picked)};
        c.dst = out(dtype::f32, {T, H, D});
        c.p.scale = 0.2f;
        c.p.block_size = P;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      }
      out_cases.push_back(std::move(c));
    }
  // MiniMax M3: each indexer head's top 2 blocks of 3 positions (the query's own block forced),
  // over the same three sequences (queries at positions up to 17: up to 6 blocks to choose
  // among); and paged attention with a selection per KV head (head h reading its KV head's)
  for (dtype kv : {dtype::f32, dtype::bf16})
    for (bool select : {true, false}) {
      const int64_t P = 4, NB = 16, MB = 5, b = 3, K = 2, Hkv = 2, H = 6, D = 16;
      op_case c;
      c.name = fmt::format("{}(S=3,P={},H={},D={},blocks={}x{},kv={})",
                           select ? "dsa_select_blocks" : "paged_attention_grouped", P,
                           select ? Hkv : H, D, K, b, name(kv));
      gen g(c.name);
      c.kind = select ? op::dsa_select : op::paged_attention;
      const int64_t counts[3] = {9, 1, 3}, pos0s[3] = {0, 14, 5};
      const auto [seqs, T] = three_sequences(g, counts, pos0s, P, NB, MB);
      if (select) {
        c.src = {from_floats(dtype::f32, {T, Hkv, D}, g.normal(T * Hkv * D)),
                 from_floats(kv, {NB, P, 1, D}, g.normal(NB * P * D)), from_ints({3, 3 + MB}, seqs),
                 absent()};
        c.dst = out(dtype::i32, {T, Hkv * K * b});
        c.p.scale = 1.0f;
        c.p.k = static_cast<int>(K);
        c.p.block = static_cast<int>(b);
        c.p.local_blocks = 1;
        c.tol = {0, 0};
      } else {
        std::vector<int32_t> picked; // per KV head K b positions <= the query's, some -1
        for (int s = 0; s < 3; ++s)
          for (int64_t i = 0; i < counts[s]; ++i)
            for (int64_t j = 0; j < Hkv * K * b; ++j)
              picked.push_back(j % 5 == 4 ? -1
                                          : static_cast<int32_t>(g.rng() % (pos0s[s] + i + 1)));
        c.src = {from_floats(dtype::f32, {T, H, D}, g.normal(T * H * D)),
                 from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
                 from_floats(kv, {NB, P, Hkv, D}, g.normal(NB * P * Hkv * D)),
                 from_ints({3, 3 + MB}, seqs),
                 absent(),
                 from_ints({T, Hkv * K * b}, picked)};
        c.dst = out(dtype::f32, {T, H, D});
        c.p.scale = 0.2f;
        c.p.block_size = P;
        c.p.sel_per_kv = true;
        c.tol = kv == dtype::f32 ? tolerance{1e-10, 1e-5} : tolerance{1e-8, 1e-4};
      }
      out_cases.push_back(std::move(c));
    }
}

} // namespace troupe::kernels::harness
