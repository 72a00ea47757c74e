#pragma once
/// \file device_probe.h
/// What the GPUs of this machine hold right now, asked of the NVIDIA driver: NVML loaded at run
/// time with dlopen (never a link-time dependency) and, as a fallback, `nvidia-smi`'s CSV output.
/// Both report "no GPU" as a normal result (ok = false with a reason), never as a crash or an
/// exception; only malformed nvidia-smi output is an error (InputError naming the line).
/// Torch-free.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foxhunt::memory {

/// Memory of one GPU as the driver reports it. Fields nvidia-smi prints as "[N/A]" or
/// "[Not Supported]" are empty.
struct GpuMemoryInfo {
  int index = 0;                             ///< position in the driver's enumeration
  std::string name;                          ///< e.g. "NVIDIA H200"
  std::optional<std::uint64_t> total_bytes;  ///< device memory
  std::optional<std::uint64_t> used_bytes;   ///< in use by all processes and the driver
  std::optional<std::uint64_t> free_bytes;   ///< not in use
};

/// Result of one probe.
struct DeviceProbe {
  std::string source;          ///< "nvml" or "nvidia-smi"
  bool ok = false;             ///< the driver answered (gpus may still be empty)
  std::string message;         ///< why not ok, e.g. "no NVIDIA driver (...)"; empty when ok
  std::string driver_version;  ///< NVML only (nvidia-smi's query does not include it)
  std::vector<GpuMemoryInfo> gpus;
};

/// Default NVML library name (the driver installs it; there is no link-time dependency).
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

/// The nvidia-smi query this module runs and parses.
inline constexpr const char* kNvidiaSmiQuery =
    "--query-gpu=name,memory.used,memory.free,memory.total --format=csv,noheader,nounits";

/// Asks NVML (dlopen'ed from `library`) for every GPU's name and memory and the driver version.
/// Without a driver: ok = false, message "no NVIDIA driver (...)". A library that lacks an entry
/// point or an NVML call that fails also gives ok = false with the NVML error text.
DeviceProbe probe_nvml(const std::string& library = kNvmlLibrary);

/// Parses the output of `nvidia-smi <kNvidiaSmiQuery>`: one line per GPU,
/// "name, used MiB, free MiB, total MiB". Blank lines are skipped; "[N/A]", "[Not Supported]"
/// and "N/A" give empty fields. Throws InputError "[nvidia-smi] line N: ..." for a wrong column
/// count, a non-numeric or negative value, an empty name, and for output with no GPU line.
std::vector<GpuMemoryInfo> parse_nvidia_smi_csv(std::string_view text);

/// Runs `nvidia-smi <kNvidiaSmiQuery>` when an executable nvidia-smi is on PATH (or at
/// `executable` when given) and parses its output. ok = false with "nvidia-smi not found" when
/// there is none, or with its exit status and output when it fails.
DeviceProbe probe_nvidia_smi(const std::string& executable = "");

/// NVML first; nvidia-smi when NVML is not ok. Returns the NVML result when both fail, with the
/// nvidia-smi reason appended to its message.
DeviceProbe probe_devices();

/// JSON form: {source, ok, message, driver_version, gpus: [{index, name, total_bytes,
/// used_bytes, free_bytes}]} with null for unknown fields.
nlohmann::json to_json(const DeviceProbe& probe);

}  // namespace foxhunt::memory
