#pragma once
/// \file container.h
/// The on-disk container behind every foxhunt file that holds tensors (model and trainer
/// checkpoints): a JSON header plus named binary blobs, a format version and a CRC-32 over all
/// bytes, so that truncation and corruption are detected before anything is loaded.
///
/// Layout (little-endian):
///   "FOXHUNT\x01" | u32 format_version | u32 header_len | header JSON |
///   u32 blob_count | { u32 name_len | name | u64 blob_len | blob }* | u32 crc32(all previous)

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace foxhunt {

/// Current container format version; files with another version are rejected.
inline constexpr std::uint32_t kContainerFormatVersion = 1;

/// In-memory form of a container file.
struct Container {
  nlohmann::json header = nlohmann::json::object();  ///< metadata (kind, model, options, ...)
  std::map<std::string, std::string> blobs;          ///< named binary payloads
};

/// The deepest nesting of arrays and objects a header may have (a bundle's nests 4 deep): what
/// reads a header compares, copies and prints it recursively, so a deeper one (a few kilobytes
/// of "[[[[") would overflow the stack instead of being refused.
inline constexpr int kMaxHeaderDepth = 64;

/// Parses the JSON text of a container header; `source` names the file in errors. Throws
/// InputError("[checkpoint] ...") for text that is not JSON or nests deeper than
/// kMaxHeaderDepth (refused while parsing: nothing deeper is built).
nlohmann::json parse_header(const std::string& text, const std::string& source);

/// Serialises a container to bytes.
std::string encode_container(const Container& c);
/// Parses bytes; `source` names the file in errors. Throws InputError("[checkpoint] ...") for bad
/// magic, version, truncation, trailing bytes, CRC mismatch or a header parse_header refuses.
Container decode_container(const std::string& bytes, const std::string& source);
/// Writes a container atomically (temp + fsync + rename).
void write_container(const std::string& path, const Container& c);
/// Reads and validates a container file.
Container read_container(const std::string& path);

}  // namespace foxhunt
