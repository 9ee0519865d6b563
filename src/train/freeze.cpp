#include "train/freeze.h"

#include <fnmatch.h>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

namespace {

bool is_glob(const std::string& pattern) {
  return pattern.find_first_of("*?[") != std::string::npos;
}

// A few names to show next to an unmatched pattern: all of them up to 6, else the first four
// and the last two.
std::string example_names(const ParameterList& params) {
  const size_t n = params.size();
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    if (n > 6 && i >= 4 && i < n - 2) {
      if (i == 4) s += ", ...";
      continue;
    }
    if (i > 0) s += ", ";
    s += params[i]->name;
  }
  return s;
}

}  // namespace

bool freeze_pattern_matches(const std::string& pattern, const std::string& name) {
  if (is_glob(pattern)) return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
  return name.find(pattern) != std::string::npos;
}

int64_t apply_freeze(const ParameterList& params, const std::vector<std::string>& patterns) {
  std::vector<bool> frozen(params.size(), false);
  for (const std::string& pat : patterns) {
    SNUG_CHECK(!pat.empty(), "--freeze: empty pattern");
    bool any = false;
    for (size_t i = 0; i < params.size(); ++i)
      if (freeze_pattern_matches(pat, params[i]->name)) {
        frozen[i] = true;
        any = true;
      }
    SNUG_CHECK(any, "--freeze '", excerpt(pat), "' matches no parameter (", params.size(),
               " parameters, named like ", example_names(params),
               "; a pattern with * ? [ ] must match the whole name)");
  }
  int64_t count = 0;
  for (size_t i = 0; i < params.size(); ++i)
    if (frozen[i]) {
      params[i]->requires_grad = false;
      ++count;
    }
  return count;
}

}  // namespace snug
