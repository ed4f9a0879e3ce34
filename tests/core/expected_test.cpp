// expected_test.cpp: expected<T>, TROUPE_TRY and error rendering (core/expected.hpp).
#include "core/expected.hpp"

#include <gtest/gtest.h>

using namespace troupe;

namespace {

expected<int> parse_positive(int x) {
  if (x <= 0) return make_error(errc::invalid_argument, "x must be positive, got {}", x);
  return x;
}

expected<int> doubled(int x) {
  TROUPE_TRY_ASSIGN(v, parse_positive(x));
  return 2 * v;
}

status check(int x) {
  TROUPE_TRY(parse_positive(x));
  return {};
}

} // namespace

TEST(Expected, HoldsValueOrError) {
  auto ok = parse_positive(3);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, errc::invalid_argument);
  EXPECT_EQ(bad.error().to_string(), "invalid_argument: x must be positive, got -1");
}

TEST(Expected, TryPropagates) {
  EXPECT_EQ(*doubled(4), 8);
  EXPECT_EQ(doubled(0).error().code, errc::invalid_argument);
  EXPECT_TRUE(check(1));
  EXPECT_FALSE(check(0));
}

TEST(Expected, MoveOnlyValues) {
  expected<std::unique_ptr<int>> p = std::make_unique<int>(5);
  ASSERT_TRUE(p);
  auto owned = std::move(p).value();
  EXPECT_EQ(*owned, 5);
}

TEST(ExpectedDeath, ValueOnErrorAborts) {
  EXPECT_DEATH((void)parse_positive(-2).value(), "x must be positive");
}
