#pragma once
/// \file device.h
/// Where a job runs: the CPU or one CUDA device. The one device value of every options struct,
/// parsed once from "cpu", "cuda" or "cuda:N" (the CLI's --device, JSON options); the layers with
/// torch turn it into a torch::Device with models::to_torch. Torch-free.
#include <iosfwd>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace foxhunt {

/// The CPU or CUDA device N. A plain "cuda" keeps "no index" (index() == -1: the current CUDA
/// device, which data-parallel ranks replace by their own); `ordinal()` is then 0.
class Device {
 public:
  /// The CPU.
  constexpr Device() = default;
  /// Parses `text` as parse(text, "device") does: implicit, so that `options.device = "cuda"`
  /// reads as the flag does. InputError for anything else.
  Device(const char* text);         // NOLINT(google-explicit-constructor)
  Device(const std::string& text);  // NOLINT(google-explicit-constructor)

  /// "cpu", "cuda" or "cuda:N" (N >= 0); InputError "[component] device: expected cpu, cuda or
  /// cuda:N, got '...'" otherwise.
  static Device parse(const std::string& text, const char* component);
  /// The CPU.
  static constexpr Device cpu() { return Device(); }
  /// CUDA device `index` (-1: the current one).
  static constexpr Device cuda(int index = -1) {
    Device d;
    d.cuda_ = true;
    d.index_ = index < 0 ? -1 : index;
    return d;
  }

  /// True for a CUDA device.
  constexpr bool is_cuda() const { return cuda_; }
  /// True for the CPU.
  constexpr bool is_cpu() const { return !cuda_; }
  /// The CUDA index as given (-1 for a plain "cuda"; -1 on the CPU).
  constexpr int index() const { return index_; }
  /// The CUDA device index to address (0 for a plain "cuda"; -1 on the CPU).
  constexpr int ordinal() const { return cuda_ ? (index_ < 0 ? 0 : index_) : -1; }
  /// The same device with its index made explicit ("cuda" -> "cuda:0"): what a measurement
  /// reports it ran on.
  constexpr Device resolved() const { return cuda_ ? cuda(ordinal()) : cpu(); }
  /// "cpu", "cuda" or "cuda:N".
  std::string str() const;

  /// Same kind and index ("cuda" and "cuda:0" differ; compare resolved() for the card).
  friend constexpr bool operator==(const Device& a, const Device& b) {
    return a.cuda_ == b.cuda_ && a.index_ == b.index_;
  }

 private:
  bool cuda_ = false;
  int index_ = -1;
};

/// Writes str().
std::ostream& operator<<(std::ostream& os, const Device& d);
/// JSON form: the string str().
void to_json(nlohmann::json& j, const Device& d);
/// From a JSON string ("cpu", "cuda", "cuda:N"); InputError otherwise.
void from_json(const nlohmann::json& j, Device& d);

}  // namespace foxhunt
