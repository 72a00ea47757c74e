#include "foxhunt/memory/device_probe.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"

namespace foxhunt::memory {

namespace {

// ---- NVML: the few entry points we call, declared here (no nvml.h on these machines) ---------

using nvmlReturn_t = int;  // NVML_SUCCESS = 0
constexpr nvmlReturn_t kNvmlSuccess = 0;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlMemory_t {  // nvmlMemory_st (v1): bytes
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned kNameBuffer = 96;     // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kVersionBuffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE

struct NvmlApi {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*get_count)(unsigned*);
  nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*driver_version)(char*, unsigned);
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
};

template <typename Fn>
bool load_symbol(void* lib, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return fn != nullptr;
}

std::string nvml_error(const NvmlApi& api, const char* call, nvmlReturn_t rc) {
  const char* text = api.error_string ? api.error_string(rc) : nullptr;
  return detail::cat(call, " failed: ", text ? text : "unknown error", " (code ", rc, ")");
}

// ---- nvidia-smi parsing ----------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Parses one memory field in MiB; empty for "[N/A]", "[Not Supported]" and similar statuses.
std::optional<std::uint64_t> parse_mib(std::string_view field, std::size_t line_no,
                                       const char* column, std::string_view line) {
  const auto f = trim(field);
  if (f == "N/A" || (f.size() >= 2 && f.front() == '[' && f.back() == ']')) return std::nullopt;
  double value = 0;
  const auto* end = f.data() + f.size();
  auto [ptr, ec] = std::from_chars(f.data(), end, value);
  FOXHUNT_CHECK(!f.empty() && ec == std::errc() && ptr == end && std::isfinite(value) && value >= 0,
                "nvidia-smi", "line ", line_no, ": ", column,
                ": expected a non-negative number of MiB or [N/A], got '", f, "' in '", line, "'");
  FOXHUNT_CHECK(value * static_cast<double>(kMiB) < 1.8e19, "nvidia-smi", "line ", line_no, ": ",
                column, ": value out of range: '", f, "'");
  return static_cast<std::uint64_t>(std::llround(value * static_cast<double>(kMiB)));
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string_view rest(path);
  while (true) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    std::string candidate(dir.empty() ? std::string_view(".") : dir);
    candidate.append("/").append(name);
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return "";
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

DeviceProbe probe_nvml(const std::string& library) {
  DeviceProbe r;
  r.source = "nvml";
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    r.message = detail::cat("no NVIDIA driver (", library, " could not be loaded",
                            err ? std::string(": ") + err : std::string(), ")");
    return r;
  }
  NvmlApi api{};
  std::string missing;
  load_symbol(lib, "nvmlInit_v2", api.init, missing);
  load_symbol(lib, "nvmlDeviceGetCount_v2", api.get_count, missing);
  load_symbol(lib, "nvmlDeviceGetHandleByIndex_v2", api.get_handle, missing);
  load_symbol(lib, "nvmlDeviceGetMemoryInfo", api.get_memory, missing);
  load_symbol(lib, "nvmlDeviceGetName", api.get_name, missing);
  load_symbol(lib, "nvmlSystemGetDriverVersion", api.driver_version, missing);
  load_symbol(lib, "nvmlShutdown", api.shutdown, missing);
  load_symbol(lib, "nvmlErrorString", api.error_string, missing);
  if (!missing.empty()) {
    r.message = detail::cat("not a usable NVML library (", library, " lacks ", missing, ")");
    ::dlclose(lib);
    return r;
  }
  nvmlReturn_t rc = api.init();
  if (rc != kNvmlSuccess) {
    r.message = "no NVIDIA driver (" + nvml_error(api, "nvmlInit_v2", rc) + ")";
    ::dlclose(lib);
    return r;
  }
  std::array<char, kVersionBuffer> version{};
  if (api.driver_version(version.data(), kVersionBuffer) == kNvmlSuccess)
    r.driver_version = version.data();
  unsigned count = 0;
  rc = api.get_count(&count);
  if (rc != kNvmlSuccess) {
    r.message = nvml_error(api, "nvmlDeviceGetCount_v2", rc);
  } else {
    r.ok = true;
    for (unsigned i = 0; i < count && r.ok; ++i) {
      nvmlDevice_t dev = nullptr;
      nvmlMemory_t mem{};
      std::array<char, kNameBuffer> name{};
      if ((rc = api.get_handle(i, &dev)) != kNvmlSuccess) {
        r.ok = false;
        r.message = nvml_error(api, "nvmlDeviceGetHandleByIndex_v2", rc);
      } else if ((rc = api.get_memory(dev, &mem)) != kNvmlSuccess) {
        r.ok = false;
        r.message = nvml_error(api, "nvmlDeviceGetMemoryInfo", rc);
      } else {
        GpuMemoryInfo g;
        g.index = static_cast<int>(i);
        if (api.get_name(dev, name.data(), kNameBuffer) == kNvmlSuccess) g.name = name.data();
        g.total_bytes = mem.total;
        g.used_bytes = mem.used;
        g.free_bytes = mem.free;
        r.gpus.push_back(std::move(g));
      }
    }
  }
  api.shutdown();
  ::dlclose(lib);
  return r;
}

std::vector<GpuMemoryInfo> parse_nvidia_smi_csv(std::string_view text) {
  std::vector<GpuMemoryInfo> gpus;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const auto line = trim(raw);
    if (line.empty()) continue;
    std::vector<std::string_view> fields;
    std::string_view rest = line;
    while (true) {
      const auto comma = rest.find(',');
      fields.push_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    FOXHUNT_CHECK(fields.size() == 4, "nvidia-smi", "line ", line_no,
                  ": expected 4 comma-separated fields (name, memory.used, memory.free, "
                  "memory.total), got ",
                  fields.size(), ": '", line, "'");
    GpuMemoryInfo g;
    g.index = static_cast<int>(gpus.size());
    g.name = std::string(trim(fields[0]));
    FOXHUNT_CHECK(!g.name.empty(), "nvidia-smi", "line ", line_no,
                  ": expected a GPU name in the first field, got an empty one: '", line, "'");
    g.used_bytes = parse_mib(fields[1], line_no, "memory.used", line);
    g.free_bytes = parse_mib(fields[2], line_no, "memory.free", line);
    g.total_bytes = parse_mib(fields[3], line_no, "memory.total", line);
    gpus.push_back(std::move(g));
  }
  FOXHUNT_CHECK(!gpus.empty(), "nvidia-smi",
                "empty output: expected one line per GPU (name, memory.used, memory.free, "
                "memory.total), got ",
                line_no, " blank line(s)");
  return gpus;
}

DeviceProbe probe_nvidia_smi(const std::string& executable) {
  DeviceProbe r;
  r.source = "nvidia-smi";
  const std::string exe = executable.empty() ? find_on_path("nvidia-smi") : executable;
  if (exe.empty() || !is_executable_file(exe)) {
    r.message = executable.empty() ? "nvidia-smi not found (not on PATH)"
                                   : "nvidia-smi not found (" + executable + " is not executable)";
    return r;
  }
  const std::string cmd = shell_quote(exe) + " " + kNvidiaSmiQuery + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    r.message = "could not run " + exe;
    return r;
  }
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code != 0) {
    auto first = out.substr(0, out.find('\n'));
    r.message = detail::cat(exe, " exited with status ", code, first.empty() ? "" : ": ", first);
    return r;
  }
  try {
    r.gpus = parse_nvidia_smi_csv(out);
    r.ok = true;
  } catch (const InputError& e) {
    r.message = e.what();
  }
  return r;
}

DeviceProbe probe_devices() {
  DeviceProbe nvml = probe_nvml();
  if (nvml.ok) return nvml;
  DeviceProbe smi = probe_nvidia_smi();
  if (smi.ok) return smi;
  nvml.message += "; " + smi.message;
  return nvml;
}

nlohmann::json to_json(const DeviceProbe& probe) {
  auto opt = [](const std::optional<std::uint64_t>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : probe.gpus)
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"total_bytes", opt(g.total_bytes)},
                    {"used_bytes", opt(g.used_bytes)},
                    {"free_bytes", opt(g.free_bytes)}});
  return {{"source", probe.source},
          {"ok", probe.ok},
          {"message", probe.message},
          {"driver_version", probe.driver_version},
          {"gpus", gpus}};
}

}  // namespace foxhunt::memory
