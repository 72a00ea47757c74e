#include "foxhunt/memory/device_profile.h"

#include <mutex>
#include <set>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"

namespace foxhunt::memory {

namespace {

DeviceProfile builtin(const char* name, const char* description, std::uint64_t total_mib,
                      std::uint64_t reserve_mib) {
  DeviceProfile p;
  p.name = name;
  p.description = description;
  p.total_bytes = total_mib * kMiB;
  p.reserve_bytes = reserve_mib * kMiB;
  p.source = "builtin";
  return p;
}

struct CustomProfiles {
  std::mutex mutex;
  std::vector<DeviceProfile> profiles;
};
CustomProfiles& custom() {
  static CustomProfiles c;
  return c;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

// Reads a size given as `<stem>_bytes` or `<stem>_mib` (exactly one); false when neither.
bool read_size(const nlohmann::json& j, const std::string& where, const std::string& stem,
               std::uint64_t& out) {
  const std::string kb = stem + "_bytes", km = stem + "_mib";
  const bool has_b = j.contains(kb), has_m = j.contains(km);
  FOXHUNT_CHECK(!(has_b && has_m), "profiles", where, ": give either '", kb, "' or '", km,
                "', not both");
  if (!has_b && !has_m) return false;
  const std::string& key = has_b ? kb : km;
  const auto& v = j.at(key);
  FOXHUNT_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0),
                "profiles", where, ": '", key, "': expected a non-negative integer, got ",
                v.dump());
  const std::uint64_t n = v.get<std::uint64_t>();
  if (has_m) {
    FOXHUNT_CHECK(n <= (std::uint64_t(1) << 40), "profiles", where, ": '", key,
                  "': expected at most 2^40 MiB, got ", n);
    out = n * kMiB;
  } else {
    out = n;
  }
  return true;
}

}  // namespace

const std::vector<DeviceProfile>& builtin_profiles() {
  // Totals as the driver reports them (nvidia-smi memory.total, MiB); reserve: 384 MiB before
  // Hopper, 512 MiB on Hopper (see device_profile.h).
  static const std::vector<DeviceProfile> catalog = {
      builtin("rtx3050ti-4gb", "NVIDIA GeForce RTX 3050 Ti Laptop GPU, 4 GB GDDR6", 4096, 384),
      builtin("t4-16gb", "NVIDIA T4, 16 GB GDDR6", 15360, 384),
      builtin("a10-24gb", "NVIDIA A10, 24 GB GDDR6", 23028, 384),
      builtin("a100-40gb", "NVIDIA A100 40 GB HBM2", 40960, 384),
      builtin("a100-80gb", "NVIDIA A100 80 GB HBM2e", 81920, 384),
      builtin("h100-80gb", "NVIDIA H100 80 GB HBM3", 81559, 512),
      builtin("h200-141gb", "NVIDIA H200 141 GB HBM3e", 143771, 512),
  };
  return catalog;
}

DeviceProfile profile_from_json(const nlohmann::json& j, const std::string& where) {
  FOXHUNT_CHECK(j.is_object(), "profiles", where, ": expected an object, got ", j.type_name());
  static const std::set<std::string> allowed = {"name",      "description",   "total_bytes",
                                                "total_mib", "reserve_bytes", "reserve_mib"};
  for (const auto& [key, value] : j.items())
    FOXHUNT_CHECK(allowed.count(key) == 1, "profiles", where, ": unknown key '", key,
                  "'; expected name, description, total_bytes|total_mib, "
                  "reserve_bytes|reserve_mib");
  DeviceProfile p;
  FOXHUNT_CHECK(j.contains("name") && j.at("name").is_string(), "profiles", where,
                ": 'name': expected a string");
  p.name = j.at("name").get<std::string>();
  FOXHUNT_CHECK(valid_name(p.name), "profiles", where, ": 'name': expected 1-64 characters of ",
                "[a-z0-9._-], got \"", p.name, "\"");
  if (j.contains("description")) {
    FOXHUNT_CHECK(j.at("description").is_string(), "profiles", where,
                  ": 'description': expected a string");
    p.description = j.at("description").get<std::string>();
  }
  FOXHUNT_CHECK(read_size(j, where, "total", p.total_bytes), "profiles", where,
                ": missing 'total_bytes' or 'total_mib'");
  FOXHUNT_CHECK(p.total_bytes > 0, "profiles", where, ": total: expected > 0 bytes, got 0");
  if (!read_size(j, where, "reserve", p.reserve_bytes)) p.reserve_bytes = kDefaultReserveBytes;
  FOXHUNT_CHECK(p.reserve_bytes < p.total_bytes, "profiles", where,
                ": reserve: expected less than the total (", p.total_bytes, " B), got ",
                p.reserve_bytes, " B");
  p.source = "custom";
  return p;
}

std::vector<DeviceProfile> load_profiles(const std::string& path) {
  return parse_profiles(read_file(path), path);
}

std::vector<DeviceProfile> parse_profiles(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("profiles", path + ": not valid JSON: " + e.what());
  }
  FOXHUNT_CHECK(j.is_object() && j.contains("profiles") && j.at("profiles").is_array(), "profiles",
                path, ": expected an object {\"profiles\": [...]}, got ",
                j.is_object() ? "an object without a 'profiles' array" : j.type_name());
  for (const auto& [key, value] : j.items())
    FOXHUNT_CHECK(key == "profiles", "profiles", path, ": unknown top-level key '", key, "'");
  std::vector<DeviceProfile> out;
  std::set<std::string> seen;
  for (const auto& p : builtin_profiles()) seen.insert(p.name);
  const auto& arr = j.at("profiles");
  FOXHUNT_CHECK(!arr.empty(), "profiles", path, ": 'profiles' is empty");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string where = detail::cat(path, ": profiles[", i, "]");
    DeviceProfile p = profile_from_json(arr[i], where);
    FOXHUNT_CHECK(seen.insert(p.name).second, "profiles", where, ": name '", p.name,
                  "' is already used by ", [&] {
                    for (const auto& b : builtin_profiles())
                      if (b.name == p.name) return std::string("a built-in profile");
                    return std::string("an earlier entry");
                  }());
    p.source = path;
    out.push_back(std::move(p));
  }
  return out;
}

void register_profiles(const std::vector<DeviceProfile>& profiles) {
  auto& c = custom();
  std::lock_guard<std::mutex> lock(c.mutex);
  std::set<std::string> names;
  for (const auto& p : builtin_profiles()) names.insert(p.name);
  for (const auto& p : c.profiles) names.insert(p.name);
  for (const auto& p : profiles) {
    FOXHUNT_CHECK(valid_name(p.name), "profiles", "register: invalid name \"", p.name, "\"");
    FOXHUNT_CHECK(p.total_bytes > 0 && p.reserve_bytes < p.total_bytes, "profiles", "register '",
                  p.name, "': expected 0 <= reserve < total, got reserve ", p.reserve_bytes,
                  " B, total ", p.total_bytes, " B");
    FOXHUNT_CHECK(names.insert(p.name).second, "profiles", "register: profile '", p.name,
                  "' already exists");
  }
  c.profiles.insert(c.profiles.end(), profiles.begin(), profiles.end());
}

std::vector<DeviceProfile> profile_catalog() {
  std::vector<DeviceProfile> out = builtin_profiles();
  auto& c = custom();
  std::lock_guard<std::mutex> lock(c.mutex);
  out.insert(out.end(), c.profiles.begin(), c.profiles.end());
  return out;
}

DeviceProfile find_profile(const std::string& name) {
  const auto catalog = profile_catalog();
  std::string known;
  for (const auto& p : catalog) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + p.name;
  }
  throw InputError("profiles", "unknown device profile '" + name + "'; known: " + known);
}

nlohmann::json to_json(const DeviceProfile& p) {
  return {{"name", p.name},
          {"description", p.description},
          {"total_bytes", p.total_bytes},
          {"reserve_bytes", p.reserve_bytes},
          {"usable_bytes", p.usable_bytes()},
          {"source", p.source}};
}

Budget Budget::of_profile(const std::string& name) {
  const auto p = find_profile(name);
  return {p.usable_bytes(), p.name + " usable", p.reserve_bytes};
}

Budget Budget::of_bytes(std::uint64_t bytes, std::string source) {
  return {bytes, std::move(source), 0};
}

}  // namespace foxhunt::memory
