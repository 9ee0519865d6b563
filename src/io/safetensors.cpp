#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "core/host_staging.h"
#include "io/excerpt.h"
#include "io/finite.h"
#include "io/fnv1a.h"
#include "io/json_input.h"
#include "io/output_file.h"
#include "io/safetensors_stamp.h"

namespace snug {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts would need byte swaps");

namespace {

using nlohmann::json;

constexpr int64_t kMaxHeaderBytes = 100'000'000;  // as the reference implementation

// Element size of a safetensors dtype; 0 when the dtype is not one safetensors defines. Only the
// ones snug converts (F32, F16, BF16, F64, I64, I32, I8, U8) can be read; the others are accepted
// in a header so that a file holding, e.g., a BOOL buffer next to the weights still opens.
int64_t st_dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

const char* st_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i8:
      return "I8";
    case DType::u8:
      return "U8";
  }
  SNUG_ASSERT(false, "unknown dtype");
}

// A JSON non-negative integer as int64, or nullopt-like failure via the bool.
bool nonneg_i64(const json& j, int64_t& out) {
  if (j.is_number_unsigned()) {
    const uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) return false;
    out = v;
    return true;
  }
  return false;
}

// A JSON value for a message: a number as written, anything else by its type (a hostile header
// can make an array or a string arbitrarily large).
std::string brief(const json& j) {
  return j.is_number() ? j.dump() : std::string("<") + j.type_name() + ">";
}

void pread_all(int fd, void* dst, int64_t bytes, int64_t offset, const std::string& path,
               const std::string& name) {
  auto* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, static_cast<size_t>(bytes), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    SNUG_CHECK(n >= 0, path, ": reading tensor '", excerpt(name), "': ", std::strerror(errno));
    SNUG_CHECK(n > 0, path, ": reading tensor '", excerpt(name), "': unexpected end of file");
    p += n;
    bytes -= n;
    offset += n;
  }
}

// Reads `n` float elements of file type `file_dtype` ("F32", "F16", "BF16" or "F64") at `offset`
// into `dst` as `to`, a chunk at a time: no whole-tensor copy of the file's values, nor of them
// widened to fp32, ever exists (a 7B model's 131M-entry embedding would be 786 MB of both).
void pread_converted(int fd, const std::string& file_dtype, int64_t n, int64_t offset, void* dst,
                     DType to, const std::string& path, const std::string& name) {
  const bool f64 = file_dtype == "F64";
  const DType from = f64                   ? DType::f32
                     : file_dtype == "F32" ? DType::f32
                     : file_dtype == "F16" ? DType::f16
                                           : DType::bf16;
  const int64_t esize = f64 ? 8 : static_cast<int64_t>(dtype_size(from));
  constexpr int64_t kChunk = int64_t{1} << 20;  // elements per read
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(n, kChunk) * esize));
  std::vector<float> narrowed(f64 ? static_cast<size_t>(std::min(n, kChunk)) : 0);
  auto* out = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    pread_all(fd, buf.data(), m * esize, offset + i * esize, path, name);
    const void* src = buf.data();
    if (f64) {
      const auto* d = reinterpret_cast<const double*>(buf.data());
      for (int64_t j = 0; j < m; ++j) narrowed[static_cast<size_t>(j)] = static_cast<float>(d[j]);
      src = narrowed.data();
    }
    convert(src, from, out + i * static_cast<int64_t>(dtype_size(to)), to, static_cast<size_t>(m));
  }
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: a FIFO must be refused below, not waited on (no effect on a regular file).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  SNUG_CHECK(fd_ >= 0, path, ": cannot open safetensors file: ", std::strerror(errno));
  try {
    struct stat st {};
    SNUG_CHECK(::fstat(fd_, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
    SNUG_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
    const int64_t file_size = st.st_size;
    SNUG_CHECK(file_size >= 8, path, ": not a safetensors file: ", file_size,
               " bytes, too short for the 8-byte header length");
    uint64_t n_le = 0;
    pread_all(fd_, &n_le, 8, 0, path, "<header length>");
    SNUG_CHECK(n_le <= static_cast<uint64_t>(file_size - 8), path, ": header length ", n_le,
               " exceeds the file size (", file_size, " bytes): truncated or not safetensors");
    const auto header_len = static_cast<int64_t>(n_le);
    SNUG_CHECK(header_len <= kMaxHeaderBytes, path, ": header length ", header_len,
               " exceeds the limit of ", kMaxHeaderBytes, " bytes");
    SNUG_CHECK(header_len >= 2, path, ": header length ", header_len, " is too small for JSON");
    data_start_ = 8 + header_len;
    const int64_t data_size = file_size - data_start_;

    std::string text(static_cast<size_t>(header_len), '\0');
    pread_all(fd_, text.data(), header_len, 8, path, "<header>");
    const json header = parse_json_input(text, path + ": malformed safetensors JSON header");
    SNUG_CHECK(header.is_object(), path, ": safetensors header is not a JSON object");

    std::vector<std::pair<std::string, const Info*>> by_offset;
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const json& v = it.value();
      if (name == "__metadata__") {
        SNUG_CHECK(v.is_object(), path, ": __metadata__ is not a JSON object");
        for (auto m = v.begin(); m != v.end(); ++m) {
          SNUG_CHECK(m.value().is_string(), path, ": __metadata__ value of '", excerpt(m.key()),
                     "' is not a string");
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      // A header's names and strings are quoted as excerpts (io/excerpt.h): a megabyte name
      // makes a line of message, not a megabyte.
      const std::string where = detail::concat(path, ": tensor '", excerpt(name), "'");
      SNUG_CHECK(v.is_object(), where, ": entry is not a JSON object");
      SNUG_CHECK(v.contains("dtype") && v["dtype"].is_string(), where, ": missing string 'dtype'");
      SNUG_CHECK(v.contains("shape") && v["shape"].is_array(), where, ": missing array 'shape'");
      SNUG_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() &&
                     v["data_offsets"].size() == 2,
                 where, ": 'data_offsets' must be an array [begin, end]");
      Info inf;
      inf.dtype = v["dtype"].get<std::string>();
      const int64_t esize = st_dtype_size(inf.dtype);
      SNUG_CHECK(esize > 0, where, ": unknown dtype '", excerpt(inf.dtype), "'");
      // Messages quote what was parsed (inf.shape, the offsets as numbers), never the raw JSON:
      // a hostile header can make that arbitrarily large.
      int64_t numel = 1;
      size_t axis = 0;
      for (const json& d : v["shape"]) {
        int64_t dim = 0;
        SNUG_CHECK(nonneg_i64(d, dim), where, ": shape dimension ", axis,
                   " is not a non-negative integer");
        inf.shape.push_back(dim);
        SNUG_CHECK(!__builtin_mul_overflow(numel, dim, &numel), where, ": shape ",
                   shape_str(inf.shape), "... overflows 64 bits");
        ++axis;
      }
      int64_t nbytes = 0;
      SNUG_CHECK(!__builtin_mul_overflow(numel, esize, &nbytes), where, ": shape ",
                 shape_str(inf.shape), " overflows 64 bits");
      const json& off = v["data_offsets"];
      const std::string offsets = detail::concat("[", brief(off[0]), ",", brief(off[1]), "]");
      SNUG_CHECK(nonneg_i64(off[0], inf.begin) && nonneg_i64(off[1], inf.end), where,
                 ": data_offsets ", offsets, " are not non-negative integers");
      SNUG_CHECK(inf.begin <= inf.end, where, ": data_offsets ", offsets, " have begin > end");
      SNUG_CHECK(inf.end <= data_size, where, ": data_offsets ", offsets,
                 " out of range: the data section has ", data_size, " bytes");
      SNUG_CHECK(inf.end - inf.begin == nbytes, where, ": data_offsets ", offsets, " span ",
                 inf.end - inf.begin, " bytes but ", inf.dtype, " shape ", shape_str(inf.shape),
                 " needs ", nbytes);
      infos_.emplace(name, std::move(inf));
    }
    for (const auto& [name, inf] : infos_) by_offset.emplace_back(name, &inf);
    // Data order: by begin, an empty tensor before a non-empty one at the same offset.
    std::sort(by_offset.begin(), by_offset.end(), [](const auto& a, const auto& b) {
      if (a.second->begin != b.second->begin) return a.second->begin < b.second->begin;
      if (a.second->end != b.second->end) return a.second->end < b.second->end;
      return a.first < b.first;
    });
    // The tensors must tile the data section exactly, as the reference implementation requires:
    // bytes that no tensor indexes (a gap, a tail) would be read differently by other readers.
    int64_t pos = 0;
    const std::string* prev_name = nullptr;
    const Info* prev = nullptr;
    for (const auto& [name, cur] : by_offset) {
      if (prev != nullptr)
        SNUG_CHECK(cur->begin >= pos, path, ": tensors '", excerpt(*prev_name), "' [", prev->begin,
                   ", ", prev->end, ") and '", excerpt(name), "' [", cur->begin, ", ", cur->end,
                   ") overlap");
      SNUG_CHECK(cur->begin <= pos, path, ": ", cur->begin - pos,
                 " unindexed bytes at data offset ", pos, " (file offset ", data_start_ + pos,
                 "), before tensor '", excerpt(name), "'");
      pos = cur->end;
      prev_name = &name;
      prev = cur;
    }
    SNUG_CHECK(pos == data_size, path, ": ", data_size - pos,
               " bytes after the last tensor, at data offset ", pos, " (file offset ",
               data_start_ + pos, "); the data section has ", data_size, " bytes");
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsStamp safetensors_stamp(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO: refused
  SNUG_CHECK(fd >= 0, path, ": cannot open safetensors file: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  SNUG_CHECK(::fstat(fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  SNUG_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
  SafetensorsStamp s;
  s.size = st.st_size;
  SNUG_CHECK(s.size >= 8, path, ": not a safetensors file: ", s.size,
             " bytes, too short for the 8-byte header length");
  uint64_t n_le = 0;
  pread_all(fd, &n_le, 8, 0, path, "<header length>");
  SNUG_CHECK(n_le <= static_cast<uint64_t>(std::min<int64_t>(s.size - 8, kMaxHeaderBytes)), path,
             ": header length ", n_le, " does not fit the file (", s.size,
             " bytes) or the limit of ", kMaxHeaderBytes, " bytes");
  std::string bytes(8 + static_cast<size_t>(n_le), '\0');
  pread_all(fd, bytes.data(), static_cast<int64_t>(bytes.size()), 0, path, "<header>");
  s.header_fnv1a64 = fnv1a64(bytes);
  return s;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::pair<int64_t, std::string>> v;
  v.reserve(infos_.size());
  for (const auto& [name, inf] : infos_) v.emplace_back(inf.begin, name);
  std::sort(v.begin(), v.end());
  std::vector<std::string> out;
  out.reserve(v.size());
  for (auto& p : v) out.push_back(std::move(p.second));
  return out;
}

const SafetensorsFile::Info& SafetensorsFile::info(const std::string& name) const {
  auto it = infos_.find(name);
  SNUG_CHECK(it != infos_.end(), path_, ": no tensor named '", excerpt(name), "' (the file has ",
             infos_.size(), " tensors)");
  return it->second;
}

std::vector<uint8_t> SafetensorsFile::read_bytes(const std::string& name, const Info& inf) const {
  std::vector<uint8_t> buf(static_cast<size_t>(inf.end - inf.begin));
  pread_all(fd_, buf.data(), inf.end - inf.begin, data_start_ + inf.begin, path_, name);
  return buf;
}

std::vector<float> SafetensorsFile::read_f32(const std::string& name) const {
  const Info& inf = info(name);
  const int64_t bytes = inf.end - inf.begin;
  if (inf.dtype == "F32") {
    std::vector<float> out(static_cast<size_t>(bytes / 4));
    pread_all(fd_, out.data(), bytes, data_start_ + inf.begin, path_, name);
    return out;
  }
  if (inf.dtype == "F16" || inf.dtype == "BF16") {
    const size_t n = static_cast<size_t>(bytes / 2);
    std::vector<uint16_t> raw(n);
    pread_all(fd_, raw.data(), bytes, data_start_ + inf.begin, path_, name);
    std::vector<float> out(n);
    convert(raw.data(), inf.dtype == "F16" ? DType::f16 : DType::bf16, out.data(), DType::f32, n);
    return out;
  }
  if (inf.dtype == "F64") {
    const size_t n = static_cast<size_t>(bytes / 8);
    std::vector<double> raw(n);
    pread_all(fd_, raw.data(), bytes, data_start_ + inf.begin, path_, name);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(raw[i]);
    return out;
  }
  throw Error(detail::concat(path_, ": tensor '", excerpt(name), "' has dtype ", inf.dtype,
                             ", not a float dtype (F32, F16, BF16, F64)"));
}

std::vector<int32_t> SafetensorsFile::read_i32(const std::string& name) const {
  const Info& inf = info(name);
  const int64_t bytes = inf.end - inf.begin;
  if (inf.dtype == "I32") {
    std::vector<int32_t> out(static_cast<size_t>(bytes / 4));
    pread_all(fd_, out.data(), bytes, data_start_ + inf.begin, path_, name);
    return out;
  }
  if (inf.dtype == "I64") {
    const size_t n = static_cast<size_t>(bytes / 8);
    std::vector<int64_t> raw(n);
    pread_all(fd_, raw.data(), bytes, data_start_ + inf.begin, path_, name);
    std::vector<int32_t> out(n);
    for (size_t i = 0; i < n; ++i) {
      SNUG_CHECK(raw[i] >= std::numeric_limits<int32_t>::min() &&
                     raw[i] <= std::numeric_limits<int32_t>::max(),
                 path_, ": tensor '", excerpt(name), "' element ", i, " = ", raw[i],
                 " does not fit in int32");
      out[i] = static_cast<int32_t>(raw[i]);
    }
    return out;
  }
  throw Error(detail::concat(path_, ": tensor '", excerpt(name), "' has dtype ", inf.dtype,
                             ", not an integer dtype (I32, I64)"));
}

void SafetensorsFile::read_into(const std::string& name, Tensor& t) const {
  const Info& inf = info(name);
  SNUG_CHECK(t.defined(), path_, ": read_into('", excerpt(name),
             "'): destination tensor is undefined");
  const std::string what = detail::concat(path_, ": tensor '", excerpt(name), "'");
  check_shape(t, inf.shape, what.c_str());
  const bool file_float =
      inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16" || inf.dtype == "F64";
  const bool file_int = inf.dtype == "I32" || inf.dtype == "I64";
  const DType td = t.dtype();
  const bool t_float = td == DType::f32 || td == DType::f16 || td == DType::bf16;
  SNUG_CHECK((t_float && file_float) || (td == DType::i32 && file_int), what, ": cannot read ",
             inf.dtype, " into a ", dtype_name(td), " tensor");
  if (t.is_meta() || t.numel() == 0) return;
  // Into host memory: the tensor's own bytes where the host addresses its device's memory (cpu),
  // else a host staging copy uploaded at the end (core/host_staging.h).
  const HostStaging h(t, HostStaging::Use::write);
  if (std::string(st_dtype_name(td)) == inf.dtype) {
    // Same element type: straight into the bytes.
    pread_all(fd_, h.raw(), inf.end - inf.begin, data_start_ + inf.begin, path_, name);
  } else if (td == DType::i32) {
    const std::vector<int32_t> v = read_i32(name);
    std::memcpy(h.raw(), v.data(), v.size() * sizeof(int32_t));
  } else {
    pread_converted(fd_, inf.dtype, t.numel(), data_start_ + inf.begin, h.raw(), td, path_, name);
  }
  h.upload();
}

namespace {

// The header (padded to 8 bytes, as the reference writer does) for tensors of these names,
// dtypes and shapes stored back to back in that order.
std::string header_text(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                        const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  int64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    SNUG_CHECK(!e.name.empty() && e.name != "__metadata__", path, ": invalid tensor name '",
               excerpt(e.name), "'");
    SNUG_CHECK(!header.contains(e.name), path, ": duplicate tensor name '", excerpt(e.name), "'");
    json shape = json::array();
    for (int64_t d : e.shape) shape.push_back(d);
    header[e.name] = {{"dtype", st_dtype_name(e.dtype)},
                      {"shape", shape},
                      {"data_offsets", {offset, offset + e.nbytes()}}};
    offset += e.nbytes();
  }
  if (!metadata.empty()) {
    json m = json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

int64_t SafetensorsEntry::nbytes() const {
  return shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    SNUG_CHECK(t != nullptr && t->defined(), path, ": tensor '", excerpt(name), "' is undefined");
    SNUG_CHECK(!t->is_meta(), path, ": tensor '", excerpt(name),
               "' is on the meta device and has no data to save");
    entries.push_back({name, t->dtype(), t->shape()});
  }
  const std::string text = header_text(path, entries, metadata);
  const uint64_t n_le = text.size();

  // Beside the target, fsynced and renamed onto it (io/output_file.h).
  OutputFile out(path, path);
  out.write(&n_le, 8);
  out.write(text);
  for (const auto& [name, t] : tensors) {
    if (t->nbytes() == 0) continue;
    const HostStaging h(*t, HostStaging::Use::read);
    out.write(h.raw(), static_cast<size_t>(t->nbytes()));
  }
  out.commit();
}

void save_safetensors_streamed(const std::string& path,
                               const std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata,
                               const std::function<void(size_t, void*)>& fill) {
  const std::string text = header_text(path, entries, metadata);
  const uint64_t n_le = text.size();
  OutputFile out(path, path);
  out.write(&n_le, 8);
  out.write(text);
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto n = static_cast<size_t>(entries[i].nbytes());
    if (n == 0) continue;
    bytes.resize(n);
    fill(i, bytes.data());
    out.write(bytes.data(), n);
    // Give the buffer back when the next tensor is smaller, so that a shard's peak is one tensor.
    if (i + 1 < entries.size() && static_cast<size_t>(entries[i + 1].nbytes()) < n / 2) {
      bytes.clear();
      bytes.shrink_to_fit();
    }
  }
  out.commit();
}

// Refuses a non-finite value in weights just read: it would only surface steps later as a NaN
// loss, blamed on the learning rate.
void check_finite(const Tensor& t, const std::string& path, const std::string& name) {
  if (const std::optional<NonFinite> bad = first_non_finite(t))
    throw Error(detail::concat(path, ": tensor '", excerpt(name), "' holds ",
                               bad->nan ? "nan" : "inf", " at element ", bad->index,
                               "; initial weights must be finite"));
}

}  // namespace snug
