// Files snug writes for the user (reports, timelines, plots, safetensors, token files).
//
// The path names a target, resolved first: a symbolic link is followed (to its final target,
// also when that does not exist yet), so the link stays a link and its target gets the content.
//   - a regular file or nothing: the content goes to "<target>.tmp.<pid>" beside the target,
//     is fsynced and renamed onto it; readers see the old file or the new one, never a part.
//   - a directory: refused.
//   - anything else (a device such as /dev/null, a FIFO): written directly, neither replaced by
//     a regular file nor truncated (a FIFO without a reader is refused instead of waited on).
// On any failure, and when an OutputFile is destroyed without commit(), the temporary file is
// removed and the target is left as it was (a direct target may hold part of the content).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace snug {

class OutputFile {
 public:
  // what: how messages name the file, e.g. "report 'run.json'".
  OutputFile(const std::string& path, const std::string& what);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Makes the content durable and puts it in place. Throws snug::Error on failure.
  void commit();
  // The resolved target (the path after following symbolic links).
  const std::string& target() const { return target_; }
  // Where the bytes go before commit(): the temporary file, or the target when direct.
  const std::string& writing_to() const { return direct_ ? target_ : tmp_; }

 private:
  std::string what_;
  std::string target_;
  std::string tmp_;
  int fd_ = -1;
  bool direct_ = false;
  bool committed_ = false;
};

// The whole of `content` into `path`, as above.
void write_output_file(const std::string& path, std::string_view content, const std::string& what);

}  // namespace snug
