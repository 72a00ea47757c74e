#pragma once
/// \file quant_report.h
/// The INT8 TFT memory benchmark (`foxhunt bench-memory`): the reference system's five INT8
/// memory checks, measured with the ledger on 3-D inputs [batch, window, features], and the QAT
/// training bytes per tag. Every figure is a ledger measurement, next to the closed form it is
/// checked against.

#include <cstdint>
#include <nlohmann/json.hpp>

#include "foxhunt/models/tft.h"

namespace foxhunt::jobs {

/// What the INT8 memory benchmark runs.
struct Int8MemoryOptions {
  models::TftOptions model;                ///< the TFT (default: the full-size model)
  int64_t inferences = 10000;              ///< batch-1 INT8 inferences of the leak check
  int64_t calibration_batches = 4;         ///< PTQ calibration batches of `big_batch` windows
  int64_t big_batch = 64;                  ///< the large inference batch
  uint64_t seed = 1;                       ///< weights and inputs
  int64_t int8_threshold_bytes = 1 << 20;  ///< check 2: the INT8 model's resident bytes cap
  int64_t qat_batch = 16;                  ///< QAT step batch for the training-bytes report
};

/// The five checks {"checks": [{name, passed, ...figures}], "passed": bool, "fp32": {...},
/// "int8": {...}, "not_in_ledger": {...}}: (1) FP32 baseline bytes (parameters, resident,
/// peak inference at batch 1 and big_batch), (2) INT8 resident bytes under the threshold and
/// equal to the layout's closed form, (3) INT8 below FP32 (codes <= 0.3x the fp32 bytes of the
/// same weights, resident <= 0.35x), (4) INT8 inference over 3-D windows at batch 1 and
/// big_batch (and a 2-D window refused as an input error), (5) no leak: ledger live bytes back
/// at the baseline exactly after `inferences` INT8 inferences. Installs the ledger if needed.
nlohmann::json tft_int8_memory_checks(const Int8MemoryOptions& o);

/// QAT training bytes per tag (fp32 master weights, gradients, Adam state, observers, the
/// forward's activations with and without fake quantization) for one step at qat_batch, and
/// the converted model's inference bytes.
nlohmann::json tft_qat_memory(const Int8MemoryOptions& o);

}  // namespace foxhunt::jobs
