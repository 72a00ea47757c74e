#pragma once
/// \file device_profile.h
/// A catalog of accelerator cards, so a memory plan can be checked for a card you do not have
/// and enforced as a cap (memory::set_limit(profile.usable_bytes())) on the machine you do have.
/// Torch-free.
///
/// total_bytes is the memory the driver reports for the card (nvidia-smi's memory.total), not
/// the marketing figure (a "16 GB" T4 reports 15,360 MiB). reserve_bytes is what a LibTorch
/// process loses before its first tensor: the CUDA context, the loaded kernel modules (lazy
/// loading), cuBLAS/cuDNN handles and workspaces. We take 384 MiB for pre-Hopper cards and
/// 512 MiB for Hopper cards (larger context and cuBLAS workspaces), from the ~300-600 MiB a CUDA
/// 12/13 LibTorch process typically shows in nvidia-smi before allocating; a card driving a display
/// loses more, which a custom profile can express. usable_bytes = total_bytes - reserve_bytes.
///
/// Custom profiles come from a JSON file:
///   {"profiles": [{"name": "l4-24gb", "total_mib": 23034, "reserve_mib": 448,
///                  "description": "NVIDIA L4 24 GB"}]}
/// with sizes given either as *_bytes or *_mib (exactly one of each pair; reserve optional,
/// default 384 MiB).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace foxhunt::memory {

/// One card.
struct DeviceProfile {
  std::string name;                 ///< catalog key, e.g. "rtx3050ti-4gb"
  std::string description;          ///< human name, e.g. "NVIDIA GeForce RTX 3050 Ti Laptop 4 GB"
  std::uint64_t total_bytes = 0;    ///< memory the driver reports for the card
  std::uint64_t reserve_bytes = 0;  ///< CUDA context + driver + library reserve
  std::string source = "builtin";   ///< "builtin" or the JSON file it came from
  /// Bytes left for tensors and the allocator cache: total - reserve.
  std::uint64_t usable_bytes() const { return total_bytes - reserve_bytes; }
};

/// Default context reserve for custom profiles that give none (384 MiB).
inline constexpr std::uint64_t kDefaultReserveBytes = 384ull * 1024 * 1024;

/// The built-in catalog: rtx3050ti-4gb, t4-16gb, a10-24gb, a100-40gb, a100-80gb, h100-80gb,
/// h200-141gb, in that order.
const std::vector<DeviceProfile>& builtin_profiles();

/// Validates one profile given as JSON (see the file comment) and returns it. `where` names the
/// place in errors (e.g. "profiles.json: profiles[2]"). Throws InputError naming the field.
DeviceProfile profile_from_json(const nlohmann::json& j, const std::string& where);

/// Reads and validates a JSON profile file. Errors (unreadable file, bad JSON, missing or bad
/// fields, duplicate names, a name that shadows a built-in one) are InputError naming the file
/// and the entry.
std::vector<DeviceProfile> load_profiles(const std::string& path);

/// load_profiles on the file's text; `path` names it in errors (the fuzz target's entry).
std::vector<DeviceProfile> parse_profiles(const std::string& text, const std::string& path);

/// Adds custom profiles (e.g. from load_profiles) to the process-wide catalog. A name already in
/// the catalog is an InputError.
void register_profiles(const std::vector<DeviceProfile>& profiles);

/// Built-in profiles followed by the registered custom ones.
std::vector<DeviceProfile> profile_catalog();

/// The profile called `name` (case-sensitive) from profile_catalog(); InputError listing the
/// known names otherwise.
DeviceProfile find_profile(const std::string& name);

/// The reference target card (a 4 GB RTX 3050 Ti laptop GPU): the default budget everywhere.
inline constexpr const char* kReferenceProfile = "rtx3050ti-4gb";

/// A memory budget and where it came from: the one budget value of every options struct.
struct Budget {
  std::uint64_t bytes = 0;          ///< the budget
  std::string source = "custom";    ///< "<profile> usable", or who gave the bytes
  std::uint64_t reserve_bytes = 0;  ///< the profile's context reserve (0: not from a profile)

  /// The usable bytes of profile `name` (find_profile: InputError listing the known names).
  static Budget of_profile(const std::string& name);
  /// `bytes` given directly, by `source`.
  static Budget of_bytes(std::uint64_t bytes, std::string source = "custom");
};

/// JSON form: {name, description, total_bytes, reserve_bytes, usable_bytes, source}.
nlohmann::json to_json(const DeviceProfile& p);

}  // namespace foxhunt::memory
