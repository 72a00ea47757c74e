#include "foxhunt/models/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"

namespace foxhunt::models {

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; a big-endian host needs byte swapping");

namespace {

constexpr const char* kSafetensorsComponent = "safetensors";
constexpr const char* kMetadataKey = "__metadata__";
/// The reference implementation's limit on the header size.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

struct DtypeInfo {
  const char* name;
  torch::ScalarType type;
};

// The supported dtypes, in the order error messages list them.
constexpr DtypeInfo kDtypes[] = {
    {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
    {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

std::string supported_dtypes() {
  std::string s;
  for (const auto& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

void check_name(const std::string& name, std::set<std::string>& seen) {
  FOXHUNT_CHECK(!name.empty(), kSafetensorsComponent, "expected a non-empty tensor name, got ''");
  FOXHUNT_CHECK(name != kMetadataKey, kSafetensorsComponent,
                "expected a tensor name other than the reserved '", kMetadataKey, "', got '", name,
                "'");
  FOXHUNT_CHECK(seen.insert(name).second, kSafetensorsComponent,
                "expected unique tensor names, got '", name, "' twice");
}

// The header JSON, parsed with a check for duplicate keys at every level (nlohmann silently keeps
// the last one).
nlohmann::json parse_header(const std::string& text, const std::string& source) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  nlohmann::json::parser_callback_t cb = [&](int, nlohmann::json::parse_event_t event,
                                             nlohmann::json& parsed) {
    switch (event) {
      case nlohmann::json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case nlohmann::json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case nlohmann::json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
            duplicate.empty())
          duplicate = parsed.get<std::string>();
        break;
      default:
        break;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, cb);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(kSafetensorsComponent,
                     source + ": expected a valid JSON header, got: " + e.what());
  }
  FOXHUNT_CHECK(duplicate.empty(), kSafetensorsComponent, source,
                ": expected unique keys in the header, got '", duplicate, "' twice");
  FOXHUNT_CHECK(header.is_object(), kSafetensorsComponent, source,
                ": expected the header to be a JSON object, got ", header.type_name());
  return header;
}

struct Entry {
  std::string name;
  torch::ScalarType dtype;
  std::vector<int64_t> shape;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Entry parse_entry(const std::string& source, const std::string& name, const nlohmann::json& j,
                  std::uint64_t data_size) {
  const std::string where = source + ": tensor '" + name + "'";
  FOXHUNT_CHECK(j.is_object(), kSafetensorsComponent, where, ": expected an object, got ",
                j.type_name());
  for (const auto& [key, value] : j.items())
    FOXHUNT_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", kSafetensorsComponent,
                  where, ": expected only the keys dtype, shape, data_offsets, got '", key, "'");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    FOXHUNT_CHECK(j.contains(key), kSafetensorsComponent, where, ": expected a '", key,
                  "' entry, got none");

  Entry e;
  e.name = name;
  const auto& dt = j.at("dtype");
  FOXHUNT_CHECK(dt.is_string(), kSafetensorsComponent, where,
                ": expected dtype to be a string, got ", dt.type_name());
  const std::string dname = dt.get<std::string>();
  const auto* info = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                  [&](const DtypeInfo& d) { return dname == d.name; });
  FOXHUNT_CHECK(info != std::end(kDtypes), kSafetensorsComponent, where, ": expected dtype one of ",
                supported_dtypes(), ", got '", dname, "'");
  e.dtype = info->type;

  const auto& shape = j.at("shape");
  FOXHUNT_CHECK(shape.is_array(), kSafetensorsComponent, where,
                ": expected shape to be an array, got ", shape.type_name());
  std::uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : shape) {
    FOXHUNT_CHECK(d.is_number_unsigned(), kSafetensorsComponent, where,
                  ": expected shape entries to be non-negative integers, got ", d.dump());
    const auto v = d.get<std::uint64_t>();
    FOXHUNT_CHECK(v <= static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max()),
                  kSafetensorsComponent, where, ": expected a dimension below 2^63, got ", v);
    overflow = overflow || __builtin_mul_overflow(numel, v, &numel);
    e.shape.push_back(static_cast<int64_t>(v));
  }
  const auto elsize = static_cast<std::uint64_t>(c10::elementSize(e.dtype));
  std::uint64_t nbytes = 0;
  overflow = overflow || __builtin_mul_overflow(numel, elsize, &nbytes);
  FOXHUNT_CHECK(!overflow, kSafetensorsComponent, where,
                ": expected a byte size below 2^64, got shape ", shape_text(e.shape));

  const auto& off = j.at("data_offsets");
  FOXHUNT_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() &&
                    off[1].is_number_unsigned(),
                kSafetensorsComponent, where,
                ": expected data_offsets to be [begin, end] with non-negative integers, got ",
                off.dump());
  e.begin = off[0].get<std::uint64_t>();
  e.end = off[1].get<std::uint64_t>();
  FOXHUNT_CHECK(e.begin <= e.end, kSafetensorsComponent, where,
                ": expected data_offsets begin <= end, got [", e.begin, ", ", e.end, "]");
  FOXHUNT_CHECK(e.end <= data_size, kSafetensorsComponent, where,
                ": expected data_offsets inside the data section of ", data_size, " bytes, got [",
                e.begin, ", ", e.end, "]");
  FOXHUNT_CHECK(e.end - e.begin == nbytes, kSafetensorsComponent, where, ": expected ", nbytes,
                " bytes for ", dname, " ", shape_text(e.shape), ", got data_offsets [", e.begin,
                ", ", e.end, "] (", e.end - e.begin, " bytes)");
  return e;
}

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType dtype) {
  for (const auto& d : kDtypes)
    if (d.type == dtype) return d.name;
  FOXHUNT_CHECK(false, kSafetensorsComponent, "expected dtype one of ", supported_dtypes(),
                ", got ", c10::toString(dtype));
  return {};
}

std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::set<std::string> seen;
  std::vector<torch::Tensor> cpu;
  cpu.reserve(tensors.size());
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    check_name(name, seen);
    FOXHUNT_CHECK(t.defined(), kSafetensorsComponent, "tensor '", name,
                  "': expected a defined tensor");
    const std::string dtype = safetensors_dtype_name(t.scalar_type());
    auto c = t.detach().to(torch::kCPU).contiguous();
    const auto nbytes = static_cast<std::uint64_t>(c.nbytes());
    header[name] = {
        {"dtype", dtype}, {"shape", c.sizes().vec()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    cpu.push_back(std::move(c));
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(kSafetensorsComponent,
                     std::string("expected UTF-8 names and metadata, got: ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + offset);
  const std::uint64_t n = text.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);  // little-endian (static_assert above)
  out += text;
  for (const auto& c : cpu)
    if (c.nbytes() > 0) out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  return out;
}

SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source) {
  FOXHUNT_CHECK(bytes.size() >= 8, kSafetensorsComponent, source,
                ": expected at least 8 bytes (the header length), got ", bytes.size());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof n);
  FOXHUNT_CHECK(n <= kMaxHeaderBytes, kSafetensorsComponent, source,
                ": expected a header length of at most ", kMaxHeaderBytes, " bytes, got ", n);
  FOXHUNT_CHECK(n <= bytes.size() - 8, kSafetensorsComponent, source,
                ": expected a header length within the file (", bytes.size() - 8,
                " bytes after the length), got ", n);
  const std::string text = bytes.substr(8, n);
  FOXHUNT_CHECK(!text.empty() && text.front() == '{', kSafetensorsComponent, source,
                ": expected the header to start with '{', got ",
                text.empty() ? std::string("an empty header") : "'" + text.substr(0, 1) + "'");
  const nlohmann::json header = parse_header(text, source);
  const std::uint64_t data_size = bytes.size() - 8 - n;

  SafetensorsFile file;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      FOXHUNT_CHECK(value.is_object(), kSafetensorsComponent, source, ": expected ", kMetadataKey,
                    " to be an object, got ", value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        FOXHUNT_CHECK(mv.is_string(), kSafetensorsComponent, source, ": expected ", kMetadataKey,
                      " value of '", mk, "' to be a string, got ", mv.dump());
        file.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(source, key, value, data_size));
  }

  // Every byte of the data section belongs to exactly one tensor. Ties (empty tensors at the
  // same offset) are ordered by name so the result does not depend on the JSON key order.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin
                              : (a.end != b.end ? a.end < b.end : a.name < b.name);
  });
  std::uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const auto& e : entries) {
    FOXHUNT_CHECK(e.begin >= pos, kSafetensorsComponent, source, ": expected tensor '", e.name,
                  "' to start at or after byte ", pos, " (the end of '", prev ? prev->name : "",
                  "'), got data_offsets [", e.begin, ", ", e.end, "] (overlap)");
    FOXHUNT_CHECK(e.begin == pos, kSafetensorsComponent, source, ": expected tensor '", e.name,
                  "' to start at byte ", pos, ", got ", e.begin, " (a hole of ", e.begin - pos,
                  " bytes in the data section)");
    pos = e.end;
    prev = &e;
  }
  FOXHUNT_CHECK(pos == data_size, kSafetensorsComponent, source, ": expected a data section of ",
                pos, " bytes (the end of the last tensor), got ", data_size, " (", data_size - pos,
                " trailing bytes)");

  const char* data = bytes.data() + 8 + n;
  for (const auto& e : entries) {
    auto t = torch::empty(e.shape, torch::TensorOptions().dtype(e.dtype));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    if (e.dtype == torch::kBool) {
      const auto* p = reinterpret_cast<const unsigned char*>(data + e.begin);
      const bool ok = std::all_of(p, p + (e.end - e.begin), [](unsigned char b) { return b <= 1; });
      FOXHUNT_CHECK(ok, kSafetensorsComponent, source, ": expected BOOL tensor '", e.name,
                    "' to hold only bytes 0 and 1, got other values");
    }
    file.tensors.emplace_back(e.name, std::move(t));
  }
  return file;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::string bytes;
  try {
    bytes = encode_safetensors(tensors, metadata);
  } catch (const InputError& e) {
    throw InputError(kSafetensorsComponent, path + ": " + e.message());
  }
  write_file_atomic(path, bytes);
}

SafetensorsFile load_safetensors(const std::string& path) {
  return decode_safetensors(read_file(path), path);
}

NamedTensors module_tensors(torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& p : module.named_parameters(/*recurse=*/true))
    out.emplace_back(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out.emplace_back(b.key(), b.value());
  return out;
}

void load_module_tensors(torch::nn::Module& module, const SafetensorsFile& file,
                         const std::string& source) {
  std::unordered_map<std::string, torch::Tensor> targets;
  std::vector<std::string> order;  // module order, for the "missing" list
  for (auto& [name, t] : module_tensors(module)) {
    targets.emplace(name, t);
    order.push_back(name);
  }

  std::set<std::string> seen;
  std::vector<std::string> unexpected;
  std::vector<std::string> mismatched;
  for (const auto& [name, t] : file.tensors) {
    FOXHUNT_CHECK(seen.insert(name).second, kSafetensorsComponent, source,
                  ": expected unique tensor names, got '", name, "' twice");
    auto it = targets.find(name);
    if (it == targets.end()) {
      unexpected.push_back(name);
      continue;
    }
    const auto& dst = it->second;
    FOXHUNT_CHECK(t.defined(), kSafetensorsComponent, source, ": tensor '", name,
                  "': expected a defined tensor");
    if (t.sizes() != dst.sizes() || t.scalar_type() != dst.scalar_type())
      mismatched.push_back(name + ": expected " + c10::toString(dst.scalar_type()) + " " +
                           shape_text(dst.sizes().vec()) + ", got " +
                           c10::toString(t.scalar_type()) + " " + shape_text(t.sizes().vec()));
  }
  std::vector<std::string> missing;
  for (const auto& name : order)
    if (!seen.count(name)) missing.push_back(name);

  if (!missing.empty() || !unexpected.empty()) {
    std::string msg = source + ": expected the module's " + std::to_string(order.size()) +
                      " tensor names, got " + std::to_string(file.tensors.size()) + " tensors;";
    if (!missing.empty()) msg += " missing: " + quoted_list(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected: " + quoted_list(unexpected) + ";";
    msg.pop_back();
    throw InputError(kSafetensorsComponent, msg);
  }
  if (!mismatched.empty()) {
    std::string msg = source + ": expected the module's dtypes and shapes, got " +
                      std::to_string(mismatched.size()) + " mismatches: ";
    for (size_t i = 0; i < mismatched.size(); ++i) msg += (i ? "; " : "") + mismatched[i];
    throw InputError(kSafetensorsComponent, msg);
  }

  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : file.tensors) targets.at(name).copy_(t);
}

}  // namespace foxhunt::models
