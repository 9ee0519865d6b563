#include "io/json_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

using nlohmann::json;

namespace {

// nlohmann's message ends with "last read: '<everything since the token began>'", which for a
// 10 MB string is 10 MB: only its end, where the error is, is kept.
std::string bounded_json_error(const std::string& m) {
  const std::string mark = "last read: '";
  const size_t at = m.find(mark);
  if (at == std::string::npos) return excerpt(m, 512);
  std::string read = m.substr(at + mark.size());
  if (!read.empty() && read.back() == '\'') read.pop_back();
  return excerpt(m.substr(0, at), 512) + mark + excerpt_tail(read, 80) + "'";
}

}  // namespace

json parse_json_input(std::string_view text, const std::string& what, int max_depth) {
  // One key set per open container (arrays keep an empty one), so that a duplicate is caught in
  // the object it repeats in.
  std::vector<std::set<std::string>> open;
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        SNUG_CHECK(depth < max_depth, what, ": JSON nested deeper than ", max_depth, " levels");
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key: {
        SNUG_CHECK(!open.empty(), what, ": JSON key outside an object");
        const std::string& key = parsed.get_ref<const std::string&>();
        SNUG_CHECK(open.back().insert(key).second, what, ": duplicate JSON key '", excerpt(key),
                   "'");
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    throw Error(detail::concat(what, ": not valid JSON: ", bounded_json_error(e.what())));
  }
}

std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  SNUG_CHECK(fd >= 0, what, ": cannot open: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  SNUG_CHECK(::fstat(fd, &st) == 0, what, ": cannot stat: ", std::strerror(errno));
  SNUG_CHECK(S_ISREG(st.st_mode), what, ": not a regular file");
  SNUG_CHECK(st.st_size <= max_bytes, what, ": ", st.st_size, " bytes, more than the limit of ",
             max_bytes);
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    SNUG_CHECK(n >= 0, what, ": read failed: ", std::strerror(errno));
    if (n == 0) break;  // shrank since fstat: parse what is there
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

}  // namespace snug
