// Reading one object of a tokenizer.json so that every refusal names the file and the field
// (e.g. "tokenizer 'x.json': normalizer.normalizers[1].type: ..."), shared by the parsers of the
// normalizers, pre-tokenizers, models, post-processors and decoders.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug::tok {

class Fields {
 public:
  using json = nlohmann::json;
  // `where`: the path of this object in the file ("" for the top); `what`: the file.
  Fields(const json& j, std::string where, const std::string& what)
      : j_(j), where_(std::move(where)), what_(what) {
    SNUG_CHECK(j_.is_object(), what_, ": ", where_, ": expected an object");
  }
  // Refuses any key not in `known`: a field snug does not implement is never ignored.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& item : j_.items()) {
      const std::string& k = item.key();  // (clang 14 cannot capture a structured binding)
      const bool ok =
          std::any_of(known.begin(), known.end(), [&](const char* n) { return k == n; });
      SNUG_CHECK(ok, what_, ": ", at(excerpt(k)),
                 ": field not supported by snug (see docs/tokenizers.md)");
    }
  }
  bool has(const char* k) const { return j_.contains(k); }
  bool is_null(const char* k) const { return !j_.contains(k) || j_.at(k).is_null(); }
  const json& get(const char* k) const {
    SNUG_CHECK(j_.contains(k), what_, ": ", at(k), ": missing");
    return j_.at(k);
  }
  // An array field, with the path of its element i.
  const json& array(const char* k) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_array(), what_, ": ", at(k), ": expected an array");
    return v;
  }
  std::string item(const char* k, size_t i) const { return detail::concat(at(k), "[", i, "]"); }
  bool boolean(const char* k, bool fallback) const {
    if (is_null(k)) return fallback;
    SNUG_CHECK(j_.at(k).is_boolean(), what_, ": ", at(k), ": expected true or false");
    return j_.at(k).get<bool>();
  }
  // A field tokenizers also requires: snug does not guess a default for what it would refuse.
  bool required_bool(const char* k) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_boolean(), what_, ": ", at(k), ": expected true or false");
    return v.get<bool>();
  }
  std::string string(const char* k) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_string(), what_, ": ", at(k), ": expected a string");
    return v.get<std::string>();
  }
  std::optional<std::string> optional_string(const char* k) const {
    if (is_null(k)) return std::nullopt;
    return string(k);
  }
  // A non-negative integer below `limit`.
  int64_t integer(const char* k, int64_t limit) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < limit, what_,
               ": ", at(k), ": expected an integer in [0, ", limit, ")");
    return v.get<int64_t>();
  }
  std::string at(const std::string& k) const { return where_.empty() ? k : where_ + "." + k; }
  const std::string& where() const { return where_; }
  const std::string& what() const { return what_; }
  [[noreturn]] void refuse(const std::string& k, const std::string& why) const {
    throw Error(detail::concat(what_, ": ", at(k), ": ", why));
  }

 private:
  const json& j_;
  std::string where_;
  const std::string& what_;
};

}  // namespace snug::tok
