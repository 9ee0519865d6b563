// The layer order of docs/design.md ("Layers"), held against the code: every `#include "x/..."`
// in src/ names a header of the including file's own layer or of a layer below it in that table
// (layers sharing a row may include each other). The table is read from the document itself, so
// it stays the one statement of the order; a directory of src/ without a row fails too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {
namespace layering_test {

namespace fs = std::filesystem;

const fs::path kRoot = SNUG_SOURCE_DIR;

// Includes that point up today, each with the change that removes it. An entry that no longer
// matches an include fails the test, so the list shrinks as they go.
// None today: the last one (core/device.cpp -> kernels/op_table.h) went when a device became its
// backend, injected from above (kernels/backends.h).
const std::set<std::pair<std::string, std::string>> kAllowedUpward = {};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Layer directory -> row of the table (0 = top).
std::map<std::string, int> layer_rows() {
  std::istringstream doc(read_file(kRoot / "docs/design.md"));
  std::map<std::string, int> rows;
  std::string line;
  bool in_section = false;
  int row = 0;
  const std::regex dir("`([a-z_]+)/`");
  while (std::getline(doc, line)) {
    if (line.rfind("## ", 0) == 0) {
      if (in_section) break;
      in_section = line.rfind("## Layers", 0) == 0;
      continue;
    }
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    for (std::sregex_iterator m(first_cell.begin(), first_cell.end(), dir), end; m != end; ++m)
      rows[(*m)[1].str()] = row;
    ++row;
  }
  return rows;
}

struct Include {
  std::string file;    // "kernels/quant_ops.h", relative to src/
  int line;            // 1-based
  std::string target;  // "core/quant_format.h"
};

std::vector<Include> src_includes() {
  std::vector<Include> out;
  const std::regex inc(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "src")) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".inc")) continue;
    std::istringstream text(read_file(e.path()));
    std::string line;
    std::smatch m;
    for (int n = 1; std::getline(text, line); ++n)
      if (std::regex_search(line, m, inc))
        out.push_back({fs::relative(e.path(), kRoot / "src").generic_string(), n, m[1].str()});
  }
  std::sort(out.begin(), out.end(), [](const Include& a, const Include& b) {
    return a.file < b.file || (a.file == b.file && a.line < b.line);
  });
  return out;
}

std::string first_dir(const std::string& path) {
  const size_t slash = path.find('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

TEST(Layering, TheDesignTableNamesEveryDirectoryOfSrc) {
  const std::map<std::string, int> rows = layer_rows();
  EXPECT_GE(rows.size(), 13u) << "the Layers table of docs/design.md was not read";
  for (const auto& e : fs::directory_iterator(kRoot / "src"))
    if (e.is_directory()) {
      const std::string name = e.path().filename().string();
      EXPECT_EQ(rows.count(name), 1u)
          << "src/" << name << "/ has no row in docs/design.md's Layers table";
    }
}

TEST(Layering, EveryIncludeInSrcPointsDownTheLayerOrder) {
  const std::map<std::string, int> rows = layer_rows();
  const std::vector<Include> includes = src_includes();
  ASSERT_GT(includes.size(), 500u) << "src/ was not read";
  std::set<std::pair<std::string, std::string>> allowance_used;
  std::vector<std::string> upward;
  for (const Include& i : includes) {
    const std::string from = first_dir(i.file), to = first_dir(i.target);
    if (to.empty() || rows.count(to) == 0 || rows.count(from) == 0) continue;  // same folder
    if (rows.at(to) >= rows.at(from)) continue;
    if (kAllowedUpward.count({i.file, i.target}) != 0) {
      allowance_used.insert({i.file, i.target});
      continue;
    }
    upward.push_back("src/" + i.file + ":" + std::to_string(i.line) + " includes \"" + i.target +
                     "\": " + from + "/ is below " + to + "/ in docs/design.md");
  }
  EXPECT_THAT(upward, testing::IsEmpty());
  for (const auto& a : kAllowedUpward)
    EXPECT_EQ(allowance_used.count(a), 1u)
        << "src/" << a.first << " no longer includes " << a.second
        << ": remove its entry from kAllowedUpward (tests/layering_test.cpp)";
}

}  // namespace layering_test
}  // namespace
