// fp8_repack_test.cpp: DeepSeek's FP8 weights repacked at load (arch/families/deepseek.cpp,
// prepare_tensors) into f8_b128 rows, including a last tile of fewer than 128 rows (DeepSeek-V3's
// 576-row kv_a), which the transformers fixture cannot cover: DeepSeek's tiles are 128 rows,
// so rows 128 .. 191 of a 192-row weight take the second row of scales. Values are checked
// against the definition: W[n, k] = e4m3(code) x scale_inv[n / 128, k / 128].
#include <gtest/gtest.h>

#include <cstring>

#include "arch/family.hpp"
#include "core/convert.hpp"
#include "core/kquant_blocks.hpp"
#include "formats/checkpoint.hpp"

namespace troupe {
namespace {

tensor_info add(tensor_index& t, const std::string& name, const std::string& raw, dtype type,
                shape dims, std::vector<uint8_t> bytes) {
  auto file = mapped_file::from_memory(std::move(bytes), "test:" + name);
  tensor_info info;
  info.name = name;
  info.raw_type = raw;
  info.type = type;
  info.supported = raw != "F8_E4M3";
  info.dims = dims;
  info.data = file->data();
  info.nbytes = file->size();
  info.file = file.get();
  t.add_file(std::move(file));
  EXPECT_TRUE(t.add(info));
  return info;
}

TEST(Fp8Repack, TilesOf128RowsIncludingAPartialLastOne) {
  const int64_t N = 192, K = 256;
  std::vector<uint8_t> codes(static_cast<size_t>(N * K));
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = static_cast<uint8_t>((i * 37 + 11) % 0x7f) | (i % 3 ? 0 : 0x80); // no NaN code
  const float scales[4] = {0.5f, 0.25f, 2.0f, 8.0f}; // [2 row tiles, 2 column tiles]
  std::vector<uint8_t> sbytes(sizeof scales);
  std::memcpy(sbytes.data(), scales, sizeof scales);
  tensor_index t;
  add(t, "w.weight", "F8_E4M3", dtype::i8, shape{N, K}, codes);
  add(t, "w.weight_scale_inv", "F32", dtype::f32, shape{2, 2}, sbytes);
  model_config c;
  c.family = "deepseek_v3";
  c.fp8_blocks = true;
  ASSERT_TRUE(arch::prepare_tensors(c, t));
  const tensor_info* w = t.find("w.weight");
  ASSERT_TRUE(w);
  ASSERT_EQ(w->type, dtype::f8_b128);
  ASSERT_EQ(w->dims, (shape{N, K}));
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n : {0, 127, 128, 150, 191}) {
    to_f32(dtype::f8_b128, w->data + n * row_bytes(dtype::f8_b128, K), row.data(), K);
    for (int64_t k = 0; k < K; k += 7) {
      const float want =
          kq::e4m3(codes[static_cast<size_t>(n * K + k)]) * scales[(n / 128) * 2 + k / 128];
      EXPECT_EQ(row[static_cast<size_t>(k)], want) << "row " << n << " col " << k;
    }
  }
}

TEST(Fp8Repack, RefusesInputsNotInWholeBlocksAndScalesOfAnotherShape) {
  for (auto [K, sr, sc] : {std::tuple<int64_t, int64_t, int64_t>{200, 1, 2}, {256, 1, 1}}) {
    tensor_index t;
    add(t, "w.weight", "F8_E4M3", dtype::i8, shape{64, K}, std::vector<uint8_t>(64 * K, 0x38));
    add(t, "w.weight_scale_inv", "F32", dtype::f32, shape{sr, sc},
        std::vector<uint8_t>(static_cast<size_t>(sr * sc * 4), 0));
    model_config c;
    c.family = "deepseek_v3";
    c.fp8_blocks = true;
    EXPECT_FALSE(arch::prepare_tensors(c, t)) << K << " " << sr << "x" << sc;
  }
}

} // namespace
} // namespace troupe
