// The built-in corpus: deterministic English-like text generated in code (no files), so that
// `snug train --data builtin` works anywhere and a small byte-level model can visibly learn it.
//
// A fixed grammar of templated sentences over a small vocabulary (about 160 words), driven by
// SplitMix64 with a fixed seed: the text is identical on every platform, pure 7-bit ASCII,
// about 300 KB, lowercase words with capitalised sentence starts and short paragraphs.
#pragma once

#include <cstdint>
#include <string>

namespace snug {

// Size in bytes the generator stops at (it finishes the paragraph in progress).
inline constexpr int64_t kBuiltinCorpusTargetBytes = 300 * 1000;

// The corpus text (computed once, then returned from a cache).
const std::string& builtin_corpus_text();

}  // namespace snug
