// tensor_test.cpp: shapes, views, aligned buffers and file maps (tensor.hpp, buffer.hpp,
// mapped_file.hpp).
#include <cstdio>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "core/buffer.hpp"
#include "core/mapped_file.hpp"
#include "core/tensor.hpp"

using namespace troupe;

TEST(Shape, CountsAndPrints) {
  shape s{4, 3, 2};
  EXPECT_EQ(s.numel(), 24);
  EXPECT_EQ(s.rows(), 12);
  EXPECT_EQ(s.cols(), 2);
  EXPECT_EQ(s.to_string(), "[4, 3, 2]");
  EXPECT_EQ(s, (shape{4, 3, 2}));
  EXPECT_NE(s, (shape{4, 6}));
}

TEST(TensorView, StridesAndSlices) {
  float data[24];
  for (int i = 0; i < 24; ++i) data[i] = static_cast<float>(i);
  tensor_view v(data, dtype::f32, {4, 3, 2});
  EXPECT_EQ(v.strides[2], 4);
  EXPECT_EQ(v.strides[1], 8);
  EXPECT_EQ(v.strides[0], 24);
  EXPECT_TRUE(v.contiguous());
  auto s = v.slice_rows(1, 3);
  EXPECT_EQ(s.dims, (shape{2, 3, 2}));
  EXPECT_EQ(s.as<float>()[0], 6.0f);
  EXPECT_EQ(v.row<float>(5)[1], 11.0f);
  tensor_view q(data, dtype::q8_0, {2, 64});
  EXPECT_EQ(q.nbytes(), 2 * 68);
  EXPECT_EQ(q.strides[0], 68);
}

TEST(Buffer, AlignedAndMovable) {
  auto b = buffer::allocate(1000, true);
  ASSERT_TRUE(b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  EXPECT_EQ(b->as<uint8_t>()[999], 0);
  buffer moved = std::move(*b);
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(b->data(), nullptr);
}

TEST(MappedFile, MapsAndChecksBounds) {
  const std::string path = ::testing::TempDir() + "/troupe_map_test.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f << "hello, troupe";
  }
  auto m = mapped_file::open(path);
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)->size(), 13u);
  auto r = (*m)->region(7, 6);
  ASSERT_TRUE(r);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(r->data()), r->size()), "troupe");
  auto bad = (*m)->region(10, 4);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, errc::out_of_range);
  EXPECT_NE(bad.error().message.find("troupe_map_test.bin"), std::string::npos);
  EXPECT_FALSE((*m)->region(~0ull, 2)); // offset + size overflows
  std::remove(path.c_str());
  auto missing = mapped_file::open(path);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, errc::not_found);
}

// Released pages leave the process and come back from the file with the same bytes; only
// whole pages inside the range go, and a file held in memory releases nothing.
TEST(MappedFile, ReleasedPagesReadBackTheSameBytes) {
  const std::string path = ::testing::TempDir() + "/troupe_release_test.bin";
  std::vector<uint8_t> bytes(5 * 4096 + 100);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  }
  auto m = mapped_file::open(path);
  ASSERT_TRUE(m);
  const uint8_t* d = (*m)->data();
  uint64_t sum = 0;
  for (size_t i = 0; i < bytes.size(); ++i) sum += d[i]; // every page resident
  EXPECT_GT(sum, 0u);
  EXPECT_TRUE((*m)->contains(d + 10));
  EXPECT_FALSE((*m)->contains(d + bytes.size()));
  const size_t page = 4096; // the map starts on a page; these tests assume 4 KB pages
  EXPECT_EQ((*m)->release(d + 10, 3 * page), 2 * page) << "pages 1 and 2, not the partial ones";
  EXPECT_EQ((*m)->release(d, bytes.size()), 5 * page);
  EXPECT_EQ((*m)->release(d + 100, 50), 0u);
  EXPECT_EQ((*m)->release(d, bytes.size() + 1), 0u) << "past the end of the map";
  EXPECT_EQ(std::vector<uint8_t>(d, d + bytes.size()), bytes);
  auto mem = mapped_file::from_memory(bytes, "in memory");
  EXPECT_EQ(mem->release(mem->data(), bytes.size()), 0u);
  EXPECT_EQ(std::vector<uint8_t>(mem->data(), mem->data() + bytes.size()), bytes);
  std::remove(path.c_str());
}
