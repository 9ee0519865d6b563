// The GPU's page backing for the paged arena (kernels/cuda/pages.cu; core/page_arena.h).
#pragma once

#include <cstdint>
#include <memory>

namespace snug {
class PageBacking;
namespace cuda {

// A backing of its own for one device on GPU `index` (device_bytes: its memory): two address
// ranges of twice that each, and the physical pages it makes, all given back by its destructor.
std::unique_ptr<PageBacking> make_page_backing(int index, int64_t device_bytes);

// Pages taken back from `b` (a CUDA backing) whose old addresses are still mapped because the GPU
// had not passed the work queued before their take-back when last looked at (tests).
int64_t old_pages(const PageBacking& b);

}  // namespace cuda
}  // namespace snug
