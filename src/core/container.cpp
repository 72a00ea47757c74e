#include "foxhunt/core/container.h"

#include <cstring>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"

namespace foxhunt {

namespace {

constexpr char kMagic[8] = {'F', 'O', 'X', 'H', 'U', 'N', 'T', '\x01'};

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

class Reader {
 public:
  Reader(const std::string& bytes, size_t limit, std::string source)
      : b_(bytes), limit_(limit), source_(std::move(source)) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string bytes(uint64_t n, const char* what) {
    need(n, what);
    std::string s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }

 private:
  void need(uint64_t n, const char* what) {
    if (n > limit_ - pos_)
      throw InputError("checkpoint", "'" + source_ + "' is truncated: reading " + what + " needs " +
                                         std::to_string(n) + " bytes at offset " +
                                         std::to_string(pos_) + ", only " +
                                         std::to_string(limit_ - pos_) + " remain");
  }
  const std::string& b_;
  size_t limit_;
  size_t pos_ = 0;
  std::string source_;
};

}  // namespace

std::string encode_container(const Container& c) {
  std::string out(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kContainerFormatVersion);
  const std::string header = c.header.dump();
  put<uint32_t>(out, static_cast<uint32_t>(header.size()));
  out += header;
  put<uint32_t>(out, static_cast<uint32_t>(c.blobs.size()));
  for (const auto& [name, blob] : c.blobs) {
    put<uint32_t>(out, static_cast<uint32_t>(name.size()));
    out += name;
    put<uint64_t>(out, blob.size());
    out += blob;
  }
  put<uint32_t>(out, crc32(out.data(), out.size()));
  return out;
}

nlohmann::json parse_header(const std::string& text, const std::string& source) {
  bool too_deep = false;
  nlohmann::json j;
  try {
    // The parser itself is iterative; the callback drops any array or object opened at the
    // limit, so no deeper value is built.
    j = nlohmann::json::parse(text,
                              [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
                                if ((event == nlohmann::json::parse_event_t::object_start ||
                                     event == nlohmann::json::parse_event_t::array_start) &&
                                    depth >= kMaxHeaderDepth) {
                                  too_deep = true;
                                  return false;
                                }
                                return !too_deep;
                              });
  } catch (const std::exception& e) {
    throw InputError("checkpoint", "'" + source + "': header is not valid JSON: " + e.what());
  }
  if (too_deep)
    throw InputError("checkpoint", fmt::format("'{}': header nests arrays and objects deeper than "
                                               "{} levels; expected a header a foxhunt writer "
                                               "produced (4 levels)",
                                               source, kMaxHeaderDepth));
  return j;
}

Container decode_container(const std::string& bytes, const std::string& source) {
  const size_t min_size = sizeof(kMagic) + 4 + 4 + 4 + 4;
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    throw InputError("checkpoint", "'" + source +
                                       "' is not a foxhunt checkpoint (expected magic "
                                       "\"FOXHUNT\\x01\" at offset 0)");
  if (bytes.size() < min_size)
    throw InputError("checkpoint", "'" + source +
                                       "' is truncated: " + std::to_string(bytes.size()) +
                                       " bytes, expected at least " + std::to_string(min_size));
  Reader r(bytes, bytes.size() - 4, source);
  r.bytes(sizeof(kMagic), "magic");
  const auto version = r.get<uint32_t>("format version");
  if (version != kContainerFormatVersion)
    throw InputError("checkpoint", "'" + source + "' has format version " +
                                       std::to_string(version) + ", expected " +
                                       std::to_string(kContainerFormatVersion));
  // Verify the CRC before interpreting lengths, so corruption reads as corruption.
  uint32_t stored;
  std::memcpy(&stored, bytes.data() + bytes.size() - 4, 4);
  const uint32_t actual = crc32(bytes.data(), bytes.size() - 4);
  if (stored != actual) {
    throw InputError(
        "checkpoint",
        fmt::format("'{}' is corrupted or truncated (expected crc32 {:08x}, computed {:08x})",
                    source, stored, actual));
  }
  Container c;
  const auto header_len = r.get<uint32_t>("header length");
  const std::string header = r.bytes(header_len, "header");
  c.header = parse_header(header, source);
  const auto count = r.get<uint32_t>("blob count");
  for (uint32_t i = 0; i < count; ++i) {
    const auto name_len = r.get<uint32_t>("blob name length");
    std::string name = r.bytes(name_len, "blob name");
    const auto len = r.get<uint64_t>("blob length");
    c.blobs[name] = r.bytes(len, "blob");
  }
  if (r.pos() != bytes.size() - 4)
    throw InputError("checkpoint", "'" + source + "' has " +
                                       std::to_string(bytes.size() - 4 - r.pos()) +
                                       " unexpected trailing bytes");
  return c;
}

void write_container(const std::string& path, const Container& c) {
  write_file_atomic(path, encode_container(c));
}

Container read_container(const std::string& path) {
  return decode_container(read_file(path), path);
}

}  // namespace foxhunt
