#pragma once
/// \file safetensors.h
/// Reads and writes the safetensors format (github.com/huggingface/safetensors), the weights
/// interchange format of the Python ecosystem:
///   8 bytes   little-endian uint64 N, the header length
///   N bytes   JSON header {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
///             ..., "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
///   rest      the data section: raw little-endian tensor bytes; offsets are relative to it,
///             every byte belongs to exactly one tensor (no holes, no overlaps, no trailing bytes)
/// Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
/// Example:
///   save_safetensors("dqn.safetensors", module_tensors(model.module()), {{"model", "dqn"}});
///   load_module_tensors(fresh.module(), load_safetensors("dqn.safetensors"), "dqn.safetensors");

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace foxhunt::models {

/// Named tensors in a fixed order (the order they are written in, and read back in).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// The contents of a safetensors file: its tensors (CPU, contiguous, in data-offset order) and
/// its free-form string metadata (the "__metadata__" header entry; empty when absent).
struct SafetensorsFile {
  /// Tensors in data-offset order (for files written by save_safetensors: the order given).
  NamedTensors tensors;
  /// The "__metadata__" entry: string keys to string values.
  std::map<std::string, std::string> metadata;
};

/// Encodes `tensors` and `metadata` as safetensors bytes. Each tensor is detached, moved to CPU
/// and made contiguous; data is laid out in the order given. Throws foxhunt::InputError
/// ("[safetensors] ...") for an undefined tensor, an unsupported dtype, an empty, duplicate or
/// reserved ("__metadata__") name, or strings that are not valid UTF-8.
std::string encode_safetensors(const NamedTensors& tensors,
                               const std::map<std::string, std::string>& metadata = {});

/// Decodes safetensors bytes, validating everything before any tensor is returned: the header
/// length (at most 100 MB and inside the buffer), the JSON (an object, no duplicate keys),
/// every entry (known dtype, non-negative shape, numel x element size == end - begin) and the
/// data section (offsets in range, no overlap, no hole, no trailing bytes). `source` names the
/// bytes in errors: foxhunt::InputError("[safetensors] SOURCE: expected ..., got ...").
SafetensorsFile decode_safetensors(const std::string& bytes, const std::string& source);

/// Writes `tensors` and `metadata` to `path` atomically (temp file + fsync + rename), see
/// encode_safetensors. Throws foxhunt::InputError for bad tensors or names and foxhunt::Error
/// ("[io] ...") when the file cannot be written; `path` then keeps its previous contents.
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads and validates the safetensors file at `path` (see decode_safetensors). Throws
/// foxhunt::InputError naming the file; nothing is returned half-loaded.
SafetensorsFile load_safetensors(const std::string& path);

/// The parameters then the buffers of `module`, recursively, under the names LibTorch gives
/// them (e.g. "q.fc0.weight"). The tensors share storage with the module (no copy).
NamedTensors module_tensors(torch::nn::Module& module);

/// Copies each tensor of `file` into the parameter or buffer of `module` with the same name
/// (onto that tensor's device), under torch::NoGradGuard. Every check runs before any copy:
/// duplicate names in `file`, names missing from `file` or unexpected in it (all listed), and a
/// shape or dtype that differs from the module's (all listed). Throws
/// foxhunt::InputError("[safetensors] SOURCE: ...") and leaves `module` unchanged on failure.
void load_module_tensors(torch::nn::Module& module, const SafetensorsFile& file,
                         const std::string& source);

/// The safetensors name of a dtype ("F32", "BF16", "BOOL", ...). Throws foxhunt::InputError for
/// a dtype the format (or this implementation) does not support.
std::string safetensors_dtype_name(torch::ScalarType dtype);

}  // namespace foxhunt::models
