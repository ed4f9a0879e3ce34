// checkpoint_test.cpp: GGUF and safetensors readers and writers: round trips through
// `synthesize` (every dtype and both formats hold the same model), zero-copy row slices and
// copied column slices, sharded directories, and corrupt files that must fail with an error
// naming the file, the tensor and what is wrong.
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "../test_paths.hpp"
#include "arch/model_source.hpp"
#include "arch/synth.hpp"
#include "core/convert.hpp"
#include "formats/checkpoint_writer.hpp"
#include "formats/gguf.hpp"
#include "formats/safetensors.hpp"
#include "text/tokenizer.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

// One directory per process (ctest runs each test case as its own process, in parallel),
// removed when the process ends.
struct scratch_dir {
  fs::path dir =
      fs::path(::testing::TempDir()) / ("troupe_ckpt_test." + std::to_string(::getpid()));
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string tmp(const std::string& name) {
  static scratch_dir scratch;
  fs::create_directories(scratch.dir);
  return (scratch.dir / name).string();
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

std::string synth(dtype t, const std::string& format) {
  synth_options o;
  o.preset = "tiny";
  o.type = t;
  o.format = format;
  o.out = tmp(fmt::format("tiny-{}.{}", name(t), format == "gguf" ? "gguf" : "hf"));
  o.vocab_gguf = test::model_path("stories260K/stories260K.gguf");
  auto st = synthesize(o);
  EXPECT_TRUE(st) << (st ? "" : st.error().to_string());
  return o.out;
}

std::vector<float> tensor_f32(const model_source& m, const std::string& name) {
  auto v = m.tensors->view(name);
  EXPECT_TRUE(v);
  std::vector<float> out(v->numel());
  to_f32(v->type, v->data, out.data(), v->numel());
  return out;
}

} // namespace

TEST(Synth, EveryDtypeAndFormatLoads) {
  for (auto [t, f] : {std::pair{dtype::f32, "gguf"},
                      {dtype::f16, "gguf"},
                      {dtype::bf16, "gguf"},
                      {dtype::q8_0, "gguf"},
                      {dtype::q4_0, "gguf"},
                      {dtype::f32, "hf"},
                      {dtype::bf16, "hf"}}) {
    auto m = open_model(synth(t, f));
    ASSERT_TRUE(m) << m.error().to_string();
    EXPECT_EQ((*m)->config.C, 64);
    EXPECT_EQ((*m)->config.n_layer, 2);
    EXPECT_EQ((*m)->tensors->find("blk.0.attn_q.weight")
                  ? (*m)->tensors->find("blk.0.attn_q.weight")->type
                  : (*m)->tensors->find("model.layers.0.self_attn.q_proj.weight")->type,
              t);
  }
}

TEST(Synth, GgufAndHfHoldTheSameWeights) {
  auto g = open_model(synth(dtype::f32, "gguf"));
  auto h = open_model(synth(dtype::f32, "hf"));
  ASSERT_TRUE(g && h);
  EXPECT_EQ(tensor_f32(**g, "blk.1.ffn_down.weight"),
            tensor_f32(**h, "model.layers.1.mlp.down_proj.weight"));
  // q rows are permuted: HF row (h, p, j) = GGUF row (h, 2j + p)
  const auto gq = tensor_f32(**g, "blk.0.attn_q.weight"),
             hq = tensor_f32(**h, "model.layers.0.self_attn.q_proj.weight");
  const int64_t C = 64, D = 16;
  for (int64_t j = 0; j < D / 2; ++j)
    for (int64_t p = 0; p < 2; ++p) EXPECT_EQ(hq[(p * D / 2 + j) * C + 5], gq[(2 * j + p) * C + 5]);
  // the exported tokenizer.json tokenizes like the GGUF vocabulary
  const std::string text = "Once upon a time, Lily saw a big red ball in the park.";
  EXPECT_EQ(*(*g)->tok->encode(text, true, false), *(*h)->tok->encode(text, true, false));
}

TEST(Slices, RowsAreViewsColumnsAreCopies) {
  auto m = open_model(synth(dtype::q8_0, "gguf"));
  ASSERT_TRUE(m);
  const auto& t = *(*m)->tensors;
  const tensor_info* info = t.find("blk.0.ffn_down.weight"); // [64, 128] q8_0
  ASSERT_TRUE(info);
  auto rows = t.rows("blk.0.ffn_down.weight", 8, 16);
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->data, info->data + 8 * row_bytes(dtype::q8_0, 128)); // zero-copy
  tensor_view cols;
  auto buf = t.cols("blk.0.ffn_down.weight", 32, 96, &cols);
  ASSERT_TRUE(buf);
  EXPECT_EQ(cols.dims, (shape{64, 64}));
  std::vector<float> full(128), part(64);
  to_f32(dtype::q8_0, info->data + 3 * row_bytes(dtype::q8_0, 128), full.data(), 128);
  to_f32(dtype::q8_0, cols.row(3), part.data(), 64);
  EXPECT_EQ(std::vector<float>(full.begin() + 32, full.begin() + 96), part);
  auto split = t.cols("blk.0.ffn_down.weight", 16, 48, nullptr);
  ASSERT_FALSE(split); // splits a q8_0 block
  EXPECT_EQ(split.error().code, errc::invalid_argument);
  EXPECT_FALSE(t.rows("blk.0.ffn_down.weight", 60, 70));
}

TEST(Safetensors, ShardedDirectoryLoads) {
  auto m = open_model(test::fixture_path("models/mistral"));
  ASSERT_TRUE(m) << m.error().to_string();
  EXPECT_GE((*m)->tensors->files().size(), 3u);
}

// --- corrupt files ---------------------------------------------------------------------

class CorruptGguf : public ::testing::Test {
 protected:
  void SetUp() override { good = slurp(test::model_path("stories260K/stories260K.gguf")); }
  error open_bytes(const std::vector<uint8_t>& bytes) {
    const std::string p = tmp("corrupt.gguf");
    spit(p, bytes);
    auto m = open_model(p);
    EXPECT_FALSE(m);
    return m ? error{} : m.error();
  }
  std::vector<uint8_t> good;
};

TEST_F(CorruptGguf, Truncated) {
  for (size_t cut : {size_t{3}, size_t{20}, size_t{200}, good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> b(good.begin(), good.begin() + cut);
    error e = open_bytes(b);
    EXPECT_EQ(e.code, errc::corrupt_file) << cut << ": " << e.to_string();
    EXPECT_NE(e.message.find("corrupt.gguf"), std::string::npos) << e.to_string();
  }
}

TEST_F(CorruptGguf, WrongMagic) {
  auto b = good;
  std::memcpy(b.data(), "GGML", 4);
  error e = open_bytes(b);
  EXPECT_EQ(e.code, errc::corrupt_file);
  EXPECT_NE(e.message.find("not a GGUF file"), std::string::npos) << e.to_string();
}

TEST_F(CorruptGguf, HugeCountsAndLengths) {
  auto b = good;
  const uint64_t huge = 1ull << 60;
  std::memcpy(b.data() + 8, &huge, 8); // tensor count
  EXPECT_EQ(open_bytes(b).code, errc::corrupt_file);
  b = good;
  std::memcpy(b.data() + 16, &huge, 8); // kv count
  EXPECT_EQ(open_bytes(b).code, errc::corrupt_file);
  b = good;
  std::memcpy(b.data() + 24, &huge, 8); // first key's length
  error e = open_bytes(b);
  EXPECT_EQ(e.code, errc::corrupt_file);
  EXPECT_NE(e.message.find("runs past the end"), std::string::npos) << e.to_string();
}

TEST_F(CorruptGguf, TensorOffsetOutsideFile) {
  // rewrite the last tensor's offset: find it by writing our own file
  gguf_writer w;
  auto g = open_gguf(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(g);
  w.copy_keys(**g, "");
  for (const auto& n : (*g)->tensors.names()) {
    const tensor_info* t = (*g)->tensors.find(n);
    w.add_tensor(n, t->type, t->dims, [t](uint8_t* d, size_t s) { std::memcpy(d, t->data, s); });
  }
  const std::string p = tmp("rewritten.gguf");
  ASSERT_TRUE(w.write(p));
  ASSERT_TRUE(open_model(p)); // the rewrite itself is valid
  auto b = slurp(p);
  b.resize(b.size() - 4096); // the last tensors now end past the file
  error e = open_bytes(b);
  EXPECT_EQ(e.code, errc::corrupt_file);
  EXPECT_NE(e.message.find("lie outside the file"), std::string::npos) << e.to_string();
  EXPECT_NE(e.message.find("tensor '"), std::string::npos) << e.to_string();
}

TEST(CorruptModel, MissingTensorAndWrongShapeAndUnsupportedType) {
  auto g = open_gguf(test::model_path("stories260K/stories260K.gguf"));
  ASSERT_TRUE(g);
  auto rewrite = [&](const std::string& path,
                     const std::function<bool(const std::string&, shape&, dtype&)>& edit) {
    gguf_writer w;
    w.copy_keys(**g, "");
    for (const auto& n : (*g)->tensors.names()) {
      const tensor_info* t = (*g)->tensors.find(n);
      shape s = t->dims;
      dtype ty = t->type;
      if (!edit(n, s, ty)) continue;
      w.add_tensor(n, ty, s, [t](uint8_t* d, size_t sz) {
        std::memcpy(d, t->data, std::min<size_t>(sz, t->nbytes));
      });
    }
    EXPECT_TRUE(w.write(path));
  };
  const std::string missing = tmp("missing.gguf");
  rewrite(missing, [](const std::string& n, shape&, dtype&) { return n != "blk.3.ffn_up.weight"; });
  auto m1 = open_model(missing);
  ASSERT_FALSE(m1);
  EXPECT_EQ(m1.error().code, errc::not_found);
  EXPECT_NE(m1.error().message.find("blk.3.ffn_up.weight"), std::string::npos)
      << m1.error().to_string();

  const std::string wrong = tmp("wrong_shape.gguf");
  rewrite(wrong, [](const std::string& n, shape& s, dtype&) {
    if (n == "blk.2.attn_k.weight") s = shape{16, 64};
    return true;
  });
  auto m2 = open_model(wrong);
  ASSERT_FALSE(m2);
  EXPECT_EQ(m2.error().code, errc::shape_mismatch);
  EXPECT_NE(m2.error().message.find("blk.2.attn_k.weight"), std::string::npos)
      << m2.error().to_string();
  EXPECT_NE(m2.error().message.find("[32, 64]"), std::string::npos) << m2.error().to_string();

  // a tensor of a type Troupe cannot compute with (ggml IQ2_XXS = 16): patch the type id
  const std::string path = tmp("unsupported.gguf");
  rewrite(path, [](const std::string&, shape&, dtype&) { return true; });
  auto bytes = slurp(path);
  const std::string name = "blk.1.attn_v.weight";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  const size_t type_at = (it - bytes.begin()) + name.size() + 4 + 2 * 8; // n_dims u32, two dims
  const uint32_t iq2 = 16;
  std::memcpy(bytes.data() + type_at, &iq2, 4);
  spit(path, bytes);
  auto m3 = open_model(path);
  ASSERT_FALSE(m3);
  EXPECT_NE(m3.error().message.find("blk.1.attn_v.weight"), std::string::npos)
      << m3.error().to_string();
}

TEST(CorruptSafetensors, HeaderAndOffsets) {
  const auto good = slurp(test::model_path("stories260K-hf/model.safetensors"));
  auto parse = [](std::vector<uint8_t> b) {
    tensor_index idx;
    auto r = parse_safetensors(mapped_file::from_memory(std::move(b), "bad.safetensors"), idx);
    EXPECT_FALSE(r);
    return r ? error{} : r.error();
  };
  auto b = good;
  const uint64_t huge = 1ull << 40;
  std::memcpy(b.data(), &huge, 8);
  EXPECT_NE(parse(b).message.find("header length"), std::string::npos);
  b = good;
  b[8] = 'x'; // breaks the JSON
  EXPECT_NE(parse(b).message.find("not a JSON object"), std::string::npos);
  b.assign(good.begin(), good.end() - 100); // last tensor ends past the data
  error e = parse(b);
  EXPECT_NE(e.message.find("lie outside the data"), std::string::npos) << e.to_string();
  // a dtype string Troupe does not know
  b = good;
  const std::string f32 = "\"F32\"";
  auto it = std::search(b.begin(), b.end(), f32.begin(), f32.end());
  ASSERT_NE(it, b.end());
  std::memcpy(&*it, "\"Q99\"", 5);
  EXPECT_NE(parse(b).message.find("unknown dtype"), std::string::npos);
}
