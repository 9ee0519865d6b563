// The engine (snug_lib) and the commands (snug_cli) compile their files in batches of eight
// (src/CMakeLists.txt, UNITY_BUILD), so neighbours share a translation unit and, inside one
// enclosing namespace, one anonymous namespace. A name defined with internal linkage in two files
// of a batch then either fails the build (two constants, two types, one signature twice) or,
// worse, quietly becomes an overload of its neighbour's helper, which a call may choose instead
// of its own. Batches move whenever a file is added, so any two files may meet: this test holds
// every such name (a function, constant, variable or type defined at the top of an anonymous
// namespace, or `static` at namespace scope) unique in its enclosing namespace across the whole
// target, and names both files and lines. Aliases (`using T = ...`, `namespace fs = ...`) may
// repeat: the same alias twice is legal, and another type under one name fails the build.
//
// The scan reads clang-formatted code (definitions start at column 0, namespaces close with
// `}  // namespace`); it is a check of this tree's style, not a C++ parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {
namespace engine_unity_names_test {

namespace fs = std::filesystem;

struct Definition {
  std::string file;
  int line = 0;
  std::string kind;
};

// (enclosing namespace, name) -> where each file defines it.
using Names = std::map<std::pair<std::string, std::string>, std::vector<Definition>>;

// The name a column-0 line defines with internal linkage, and its kind; "" when none.
std::pair<std::string, std::string> defined_name(const std::string& s) {
  static const std::regex type(
      R"(^(?:template <.*>\s*)?(?:struct|class|enum(?: class)?|union)\s+(\w+))");
  static const std::regex constant(
      R"(^(?:(?:static|inline|constexpr|const|thread_local)\s+)+[\w:<>, *&]+?\b(\w+)(?:\[\w*\])*\s*(?:=|\{|;))");
  static const std::regex function(
      R"(^(?:template <.*>\s*)?(?:(?:static|inline|constexpr|\[\[nodiscard\]\]|\[\[maybe_unused\]\])\s+)*(?:[\w:<>,*&]+\s+)*?[*&]?(operator\S+?|~?\w+)\()");
  static const std::regex variable(
      R"(^(?:[\w:]+(?:<[^;=]*>)?[\s*&]+)+(\w+)(?:\[\w*\])*\s*(?:=|\{|;))");
  std::smatch m;
  if (std::regex_search(s, m, type)) return {m[1], "type"};
  const std::string head = s.substr(0, s.find('='));
  if (head.find('(') == std::string::npos && std::regex_search(s, m, constant))
    return {m[1], "constant"};
  if (std::regex_search(s, m, function)) {
    static const char* const kNotNames[] = {"if",     "for",      "while",   "switch",
                                            "sizeof", "decltype", "alignas", "static_assert"};
    for (const char* w : kNotNames)
      if (m[1] == w) return {};
    return {m[1], "function"};
  }
  if (std::regex_search(s, m, variable)) return {m[1], "variable"};
  return {};
}

// Adds what `text` (the file `label`) defines with internal linkage to `names`.
void scan(std::istream& text, const std::string& label, Names& names) {
  static const std::regex open(R"(^namespace\s*([\w:]*)\s*\{)");
  static const std::regex close(R"(^\}\s*//\s*namespace)");
  std::vector<std::string> stack;  // "" is an anonymous namespace
  std::string line;
  for (int n = 1; std::getline(text, line); ++n) {
    std::smatch m;
    if (std::regex_search(line, m, open)) {
      stack.push_back(m[1]);
      continue;
    }
    if (std::regex_search(line, close)) {
      if (!stack.empty()) stack.pop_back();
      continue;
    }
    const bool anonymous = std::find(stack.begin(), stack.end(), "") != stack.end();
    if (!anonymous && !line.starts_with("static ")) continue;
    if (line.empty() || std::string(" \t#/}").find(line[0]) != std::string::npos) continue;
    if (line.starts_with("using ") || line.starts_with("namespace ") || line.starts_with("return "))
      continue;
    const auto [name, kind] = defined_name(line);
    if (name.empty()) continue;
    std::string enclosing;
    for (const std::string& s : stack)
      if (!s.empty()) enclosing += (enclosing.empty() ? "" : "::") + s;
    names[{enclosing, name}].push_back({label, n, kind});
  }
}

// The names defined in more than one file, one line each.
std::vector<std::string> clashes(const Names& names) {
  std::vector<std::string> out;
  for (const auto& [key, defs] : names) {
    std::set<std::string> files;
    std::string where;
    for (const Definition& d : defs) {
      files.insert(d.file);
      where += " " + d.file + ":" + std::to_string(d.line) + " (" + d.kind + ")";
    }
    if (files.size() > 1) out.push_back(key.first + "::" + key.second + " defined in" + where);
  }
  return out;
}

TEST(UnityBatches, TheScanFindsEveryKindOfInternalName) {
  Names names;
  std::istringstream a(
      "namespace snug {\n\nnamespace {\n\nconstexpr int64_t kGrain = 8192;\nstruct Preset {\n"
      "  int x;\n};\nbool ends_with(const std::string& s, const std::string& t) {\n"
      "  return false;\n}\ntemplate <typename T>\nT twice(T x) {\n  return x + x;\n}\n"
      "std::mutex g_lock;\nusing TA = TrainingArguments;\nnamespace fs = std::filesystem;\n\n"
      "}  // namespace\n\nint public_one() {\n  return 1;\n}\n\n}  // namespace snug\n"
      "static int counter(int x) {\n  return x;\n}\n");
  scan(a, "a.cpp", names);
  std::vector<std::string> found;
  for (const auto& [key, defs] : names) found.push_back(key.first + "::" + key.second);
  const std::vector<std::string> expected = {"::counter",    "snug::Preset", "snug::ends_with",
                                             "snug::g_lock", "snug::kGrain", "snug::twice"};
  EXPECT_EQ(found, expected);

  std::istringstream b(
      "namespace snug::kernels {\nnamespace {\nconstexpr int64_t kGrain = 4096;\n}  // namespace\n"
      "}  // namespace snug::kernels\nnamespace snug {\nnamespace {\n"
      "bool ends_with(const char* s, const char* t) {\n  return true;\n}\n}  // namespace\n"
      "}  // namespace snug\n");
  scan(b, "b.cpp", names);
  const std::vector<std::string> both = clashes(names);
  ASSERT_EQ(both.size(), 1u);
  EXPECT_EQ(both[0], "snug::ends_with defined in a.cpp:9 (function) b.cpp:8 (function)");
}

TEST(UnityBatches, EveryInternalNameOfTheEngineIsUniqueInItsNamespace) {
  const fs::path src = fs::path(SNUG_SOURCE_DIR) / "src";
  // The two unity targets of src/CMakeLists.txt; cli/main.cpp is the executable's alone.
  Names engine, commands;
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file() || e.path().extension() != ".cpp") continue;
    const std::string rel = fs::relative(e.path(), src).generic_string();
    if (rel == "cli/main.cpp") continue;
    std::ifstream in(e.path());
    scan(in, rel, rel.starts_with("cli/") ? commands : engine);
    ++files;
  }
  ASSERT_GT(files, 200) << "found too few sources under " << src;
  EXPECT_GT(engine.size(), 300u) << "the scan found too few internal names: has the style moved?";
  for (const Names* names : {&engine, &commands})
    for (const std::string& c : clashes(*names))
      ADD_FAILURE() << c << ": two files of one unity target, so the name must differ (or the "
                    << "definition live once in a header)";
}

}  // namespace engine_unity_names_test
}  // namespace
