// expected.hpp: `expected<T>` holds either a T or a troupe::error (error.hpp). It is how
// every module below actors/ reports failure: no exception crosses a module boundary.
// A minimal subset of C++23 std::expected: has_value(), operator bool, value(), error(),
// operator* and ->, plus expected<void>. Accessing the wrong alternative is a bug and aborts.
// TROUPE_TRY(x) returns early with the error of an expected-returning expression.
// Tests: tests/core/expected_test.cpp
#pragma once

#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "core/error.hpp"

namespace troupe {

[[noreturn]] inline void expected_misuse(const char* what) {
  std::fprintf(stderr, "troupe: bad expected access: %s\n", what);
  std::abort();
}

template <class T>
class [[nodiscard]] expected {
 public:
  using value_type = T;

  expected(T value)
      : data_(std::in_place_index<0>, std::move(value)) {}
  expected(troupe::error err)
      : data_(std::in_place_index<1>, std::move(err)) {}
  template <class U, class = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                              !std::is_same_v<std::decay_t<U>, troupe::error> &&
                                              !std::is_same_v<std::decay_t<U>, expected>>>
  expected(U&& value)
      : data_(std::in_place_index<0>, T(std::forward<U>(value))) {}

  bool has_value() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & { return check(), std::get<0>(data_); }
  const T& value() const& { return check(), std::get<0>(data_); }
  T&& value() && { return check(), std::move(std::get<0>(data_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const troupe::error& error() const& {
    if (has_value()) expected_misuse("error() on a value");
    return std::get<1>(data_);
  }
  troupe::error&& error() && {
    if (has_value()) expected_misuse("error() on a value");
    return std::move(std::get<1>(data_));
  }

 private:
  void check() const {
    if (!has_value()) {
      std::fprintf(stderr, "troupe: value() on error: %s\n",
                   std::get<1>(data_).to_string().c_str());
      std::abort();
    }
  }
  std::variant<T, troupe::error> data_;
};

template <>
class [[nodiscard]] expected<void> {
 public:
  expected() = default;
  expected(troupe::error err)
      : err_(std::move(err))
      , ok_(false) {}

  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const {
    if (!ok_) {
      std::fprintf(stderr, "troupe: value() on error: %s\n", err_.to_string().c_str());
      std::abort();
    }
  }
  const troupe::error& error() const& {
    if (ok_) expected_misuse("error() on a value");
    return err_;
  }
  troupe::error&& error() && {
    if (ok_) expected_misuse("error() on a value");
    return std::move(err_);
  }

 private:
  troupe::error err_;
  bool ok_ = true;
};

using status = expected<void>;

} // namespace troupe

/// Evaluates an expected-returning expression; on error returns that error from the caller.
#define TROUPE_TRY(expr)                                                                           \
  do {                                                                                             \
    auto troupe_try_result_ = (expr);                                                              \
    if (!troupe_try_result_) return std::move(troupe_try_result_).error();                         \
  } while (false)

/// Assigns an existing `var` from an expected-returning expression, or returns its error.
#define TROUPE_TRY_SET(var, expr)                                                                  \
  do {                                                                                             \
    auto troupe_set_result_ = (expr);                                                              \
    if (!troupe_set_result_) return std::move(troupe_set_result_).error();                         \
    var = std::move(*troupe_set_result_);                                                          \
  } while (false)

/// Declares `var` from an expected-returning expression, or returns its error.
#define TROUPE_TRY_ASSIGN(var, expr)                                                               \
  auto var##_expected_ = (expr);                                                                   \
  if (!var##_expected_) return std::move(var##_expected_).error();                                 \
  auto var = std::move(*var##_expected_)
