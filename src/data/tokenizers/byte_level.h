// The byte-level alphabet of GPT-2-style tokenizers: every byte 0..255 maps to one printable
// code point, so that any byte string becomes a string of "visible" characters a BPE vocabulary
// can hold (a space is 'Ġ' U+0120, a newline 'Ċ' U+010A). The table is the fact from
// tokenizers' byte_level.rs (bytes_char): the 188 printable bytes 0x21-0x7E, 0xA1-0xAC,
// 0xAE-0xFF map to the code point of the same value; the other 68, in increasing order, to
// U+0100 + n.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace snug::tok {

// Appends the byte-level characters (UTF-8) of every byte of `bytes` to `out`.
void bytes_to_byte_level(std::string_view bytes, std::string& out);

// Appends the bytes that the byte-level characters of `token` stand for to `out` and returns
// true; a token with any character outside the alphabet appends its own UTF-8 bytes instead and
// returns false (what tokenizers' ByteLevel decoder does).
bool byte_level_to_bytes(std::string_view token, std::string& out);

}  // namespace snug::tok
