// dtype.cpp: the dtype table (dtype.hpp) and name parsing.
#include "core/dtype.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>

namespace troupe {
namespace {

constexpr std::array<dtype_info, dtype_count> table = {{
    {"f32", 1, 4, false},       {"f16", 1, 2, false},        {"bf16", 1, 2, false},
    {"i8", 1, 1, false},        {"i32", 1, 4, false},        {"q8_0", 32, 34, true},
    {"q4_0", 32, 18, true},     {"q2_k", 256, 84, true},     {"q3_k", 256, 110, true},
    {"q4_k", 256, 144, true},   {"q5_k", 256, 176, true},    {"q6_k", 256, 210, true},
    {"q4_1", 32, 20, true},     {"q5_0", 32, 22, true},      {"q5_1", 32, 24, true},
    {"mxfp4", 32, 17, true},    {"f8_b128", 128, 132, true}, {"iq4_nl", 32, 18, true},
    {"iq4_xs", 256, 136, true}, {"t2_32", 32, 12, true},
}};

} // namespace

const dtype_info& info(dtype type) {
  return table[static_cast<size_t>(type)];
}

std::optional<dtype> parse_dtype(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "fp32" || s == "float32" || s == "float") s = "f32";
  if (s == "fp16" || s == "float16" || s == "half") s = "f16";
  if (s == "bfloat16") s = "bf16";
  if (s == "int8") s = "i8";
  if (s == "int32") s = "i32";
  for (size_t i = 0; i < table.size(); ++i)
    if (table[i].name == s) return static_cast<dtype>(i);
  return std::nullopt;
}

} // namespace troupe
