#include "core/device.h"

#include <utility>

#include "core/error.h"

namespace snug {

namespace {
constexpr int64_t kGiB = int64_t{1} << 30;
// Nominal capacity of each card as its vendor names it (GB on the box = GiB of HBM/GDDR).
constexpr std::pair<const char*, int64_t> kDevicePresets[] = {
    {"t4-16gb", 16 * kGiB},      {"v100-16gb", 16 * kGiB},    {"v100-32gb", 32 * kGiB},
    {"rtx3090-24gb", 24 * kGiB}, {"rtx4090-24gb", 24 * kGiB}, {"a10-24gb", 24 * kGiB},
    {"l4-24gb", 24 * kGiB},      {"a100-40gb", 40 * kGiB},    {"a100-80gb", 80 * kGiB},
    {"h100-80gb", 80 * kGiB},    {"h200-141gb", 141 * kGiB},
};
}  // namespace

Device::Device(const Backend& backend, const OpTable* ops)
    : backend_(&backend), pool_(&backend), ops_(ops ? ops : &backend.ops()) {
  SNUG_CHECK(backend.backed() || ops_ == &backend.ops(), "a ", backend.name(),
             " device runs its own op table, not another");
  if (std::unique_ptr<PageBacking> pages = backend.page_backing())
    pool_.use_pages(std::move(pages));
}

int64_t parse_device_memory(const std::string& text) {
  for (const auto& [name, bytes] : kDevicePresets)
    if (text == name) return bytes;
  try {
    return parse_bytes(text);
  } catch (const Error& e) {
    const std::string why = e.what();
    if (why.find("out of range") != std::string::npos)
      throw Error("--device-memory '" + text + "': " + why);
    throw Error("--device-memory '" + text +
                "' is neither a size (16GiB, 24GB, 1e9) nor a preset (" +
                device_memory_presets_help() + ")");
  }
}

std::vector<std::pair<std::string, int64_t>> device_memory_presets() {
  std::vector<std::pair<std::string, int64_t>> v;
  for (const auto& [name, bytes] : kDevicePresets) v.emplace_back(name, bytes);
  return v;
}

bool is_device_memory_preset(const std::string& text) {
  for (const auto& [name, bytes] : kDevicePresets)
    if (text == name) return true;
  return false;
}

std::string device_memory_presets_help() {
  std::string s;
  for (const auto& [name, bytes] : kDevicePresets) {
    if (!s.empty()) s += ", ";
    s += name;
  }
  return s;
}

}  // namespace snug
