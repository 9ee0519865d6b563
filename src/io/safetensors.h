// safetensors (https://github.com/huggingface/safetensors) reading and writing.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header
//   {"<name>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}            (metadata optional, strings only)
// then the data section; offsets are relative to its start, tensors are row-major little-endian.
//
// SafetensorsFile validates the whole header when it opens the file (sizes, offsets, dtypes,
// overlaps) and reads tensor bytes on demand, so opening a multi-GB checkpoint costs only the
// header. Every error is a snug::Error naming the file and, where there is one, the tensor.
//
// save_safetensors writes atomically: to "<path>.tmp.<pid>", fsync, then rename over <path>, so a
// crash leaves either the old file or the complete new one, never a truncated one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace snug {

class SafetensorsFile {
 public:
  struct Info {
    std::string
        dtype;  // safetensors spelling: "F32", "F16", "BF16", "F64", "I64", "I32", "I8", "U8"
    std::vector<int64_t> shape;
    int64_t begin = 0;  // byte offsets into the data section, [begin, end)
    int64_t end = 0;
  };

  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Tensor names in data order (sorted by begin offset, then name).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return infos_.count(name) != 0; }
  // Throws naming the tensor and the file when there is no such tensor.
  const Info& info(const std::string& name) const;
  std::map<std::string, std::string> metadata() const { return metadata_; }

  // F32, F16, BF16 or F64 tensor as float (F64 rounded to nearest).
  std::vector<float> read_f32(const std::string& name) const;
  // I32 or I64 tensor as int32 (I64 values outside the int32 range throw).
  std::vector<int32_t> read_i32(const std::string& name) const;
  // Copies tensor `name` into `t`, which must already have the file's shape. A float tensor in
  // the file goes into an f32, f16 or bf16 `t` (converted, rounding to nearest even); an integer
  // one into an i32 `t`. Nothing is read when `t` is on the meta device (shapes still checked).
  void read_into(const std::string& name, Tensor& t) const;

 private:
  std::vector<uint8_t> read_bytes(const std::string& name, const Info& inf) const;

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;  // 8 + header length
  std::unordered_map<std::string, Info> infos_;
  std::map<std::string, std::string> metadata_;
};

// Writes the tensors (f32, f16, bf16, i32, i8, u8; cpu only, not meta) under their names, in the
// given order, with optional string metadata. Names must be unique, non-empty and not
// "__metadata__". Atomic (see above).
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// One tensor of a streamed write (save_safetensors_streamed): name, dtype and shape; its bytes
// are produced when the writer reaches it.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  int64_t nbytes() const;
};

// save_safetensors for data that is not held as Tensors all at once (a model written in another
// dtype, dequantized or merged, shard by shard): the header comes from `entries`, then for each
// entry in order `fill(i, dst)` writes its nbytes() bytes (little-endian, row-major) into a host
// buffer that the writer owns, and the writer appends them. Only one tensor's bytes are held at
// a time. Atomic like save_safetensors.
void save_safetensors_streamed(const std::string& path,
                               const std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata,
                               const std::function<void(size_t, void*)>& fill);

// Refuses a non-finite value in weights just read (naming `path`, the tensor `name` and the
// element): it would only surface steps later as a NaN loss, blamed on the learning rate.
// Nothing to check on meta (no values).
void check_finite(const Tensor& t, const std::string& path, const std::string& name);

}  // namespace snug
