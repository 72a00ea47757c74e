#pragma once
/// \file precision.h
/// The numeric form of a model's weights as a typed key: fp32 (every catalog model as trained),
/// int8 (a converted INT8 form; a catalog entry lists its forms, models/precisions.h) and int8-qat
/// (an FP32 model training with fake quantization, models/tft_int8.h) and bf16 (BF16 weights with
/// FP32 accumulation, models/bf16.h). Code compares Precision values; the text ("fp32", "int8",
/// "int8-qat", "bf16") is written with to_string and read with
/// parse_precision at the boundary only (CLI flags, bundle headers, JSON). Torch-free.
///
/// Example:
///   const models::Precision p = models::parse_precision("int8", "budget");
///   if (p != models::Precision::kFp32) ...;     // typed comparison
///   fmt::format("{}", models::to_string(p));    // "int8"
#include <array>
#include <cstdint>
#include <iosfwd>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace foxhunt::models {

/// The numeric form of a model's weights.
enum class Precision : std::uint8_t {
  kFp32,     ///< "fp32": every catalog model as trained
  kInt8,     ///< "int8": a converted INT8 form (a catalog entry's quantized form)
  kInt8Qat,  ///< "int8-qat": an FP32 model training with fake quantization
  kBf16,     ///< "bf16": BF16 weights, FP32 accumulation (a catalog entry's form, models/bf16.h)
};

/// Every precision, in declaration order.
inline constexpr std::array<Precision, 4> kAllPrecisions = {Precision::kFp32, Precision::kInt8,
                                                            Precision::kInt8Qat, Precision::kBf16};

/// The text form: "fp32", "int8", "int8-qat" or "bf16" (bundle headers, JSON, tables, messages).
constexpr const char* to_string(Precision p) {
  constexpr const char* kNames[] = {"fp32", "int8", "int8-qat", "bf16"};  // in the enum's order
  const auto i = static_cast<size_t>(p);
  return i < std::size(kNames) ? kNames[i] : "?";
}

/// Parses "fp32", "int8", "int8-qat" or "bf16". InputError "[where] precision: expected fp32,
/// int8, int8-qat or bf16, got '...'" for anything else.
Precision parse_precision(std::string_view text, const char* where);

/// The precision `text` names, or nullopt (for callers that word their own error).
std::optional<Precision> try_parse_precision(std::string_view text);

/// The text forms of `items` joined by `separator`: ({kFp32, kInt8}, " or ") == "fp32 or int8".
std::string precisions_text(const std::vector<Precision>& items, const char* separator);

/// Writes to_string(p).
std::ostream& operator<<(std::ostream& os, Precision p);
/// JSON form: the string to_string(p).
void to_json(nlohmann::json& j, Precision p);
/// From a JSON string; InputError "[precision] ..." for another value or another text.
void from_json(const nlohmann::json& j, Precision& p);

}  // namespace foxhunt::models
