// The test binaries compile their files in batches of eight (tests/CMakeLists.txt, UNITY_BUILD),
// so eight files share one translation unit and one anonymous namespace. Each file therefore keeps
// its helpers and tests in a namespace of its own name inside the anonymous one:
//   namespace {
//   namespace <stem> {          // <folder>_<stem> where two folders hold the same file name
// An unqualified call then finds only its own file's helpers: a helper of the same name in a
// neighbour can neither clash nor, worse, be chosen silently as a better overload. This test holds
// every test file to that, naming the file and the line it expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {
namespace unity_batches_test {

namespace fs = std::filesystem;

// The four test binaries' globs in tests/CMakeLists.txt.
bool is_test_source(const fs::path& p) {
  const std::string name = p.filename().string();
  for (const char* end : {"_test.cpp", "_cudatest.cpp", "_slowtest.cpp", "_torchtest.cpp"})
    if (name.ends_with(end)) return true;
  return false;
}

TEST(UnityBatches, EveryTestFileKeepsItsCodeInANamespaceOfItsName) {
  const fs::path root = fs::path(SNUG_SOURCE_DIR) / "tests";
  std::vector<fs::path> files;
  std::map<std::string, int> stems;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file() && is_test_source(e.path())) {
      files.push_back(e.path());
      ++stems[e.path().stem().string()];
    }
  ASSERT_GT(files.size(), 100u) << "found too few test files under " << root;
  for (const auto& f : files) {
    const std::string stem = f.stem().string();
    const std::string expected =
        stems[stem] == 1 ? stem : f.parent_path().filename().string() + "_" + stem;
    std::ifstream in(f);
    std::string line, previous;
    int opened = 0, n = 0;
    for (; std::getline(in, line); ++n) {
      if (previous == "namespace {") {
        EXPECT_EQ(line, "namespace " + expected + " {")
            << fs::relative(f, root) << ":" << n + 1 << ": the anonymous namespace opened on the "
            << "line before should hold a namespace named after the file";
        ++opened;
      }
      previous = line;
    }
    EXPECT_GT(opened, 0) << fs::relative(f, root) << ": no `namespace {` followed by `namespace "
                         << expected << " {`";
  }
}

}  // namespace unity_batches_test
}  // namespace
