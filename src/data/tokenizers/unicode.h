// The Unicode steps of a tokenizer.json pipeline, on UTF-8 strings, through utf8proc (Debian
// libutf8proc-dev) rather than hand-written tables.
#pragma once

#include <string>
#include <string_view>

namespace snug::tok {

// Throws snug::Error starting with `what` and naming the byte offset when `text` is not valid
// UTF-8 (tokenizers takes Python str, which always is).
void check_utf8(std::string_view text, const std::string& what);

// Unicode Normalization Form C / D of valid UTF-8 `text` (U+0000 kept).
std::string nfc(std::string_view text);
std::string nfd(std::string_view text);

// The code points of valid UTF-8 `text`, and back.
std::u32string code_points(std::string_view text);
void append_utf8(char32_t cp, std::string& out);

// `bytes` as UTF-8 with every maximal ill-formed subsequence replaced by one U+FFFD, the policy
// of Rust's String::from_utf8_lossy that tokenizers' ByteLevel decoder ends with.
std::string utf8_lossy(std::string_view bytes);

// `s` for an error message: snug::excerpt (io/excerpt.h), at most 64 bytes cut on a character
// boundary and the length said (a hostile file's token can be arbitrarily long).
std::string shorten(std::string_view s);

}  // namespace snug::tok
