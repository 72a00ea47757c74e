// safetensors: bit-exact round trips, DQN export/import, rejection of every corruption class,
// load_module_tensors checks, and a cross-check with Python's safetensors (tests/python/).
#include "foxhunt/models/safetensors.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <functional>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/models/model.h"
#include "test_util.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::SeededTest;
using foxhunt::testing::TempDir;

class SafetensorsTest : public SeededTest {};

/// The raw bytes of a tensor (CPU, contiguous).
std::string bytes_of(const torch::Tensor& t) {
  auto c = t.detach().to(torch::kCPU).contiguous();
  return c.nbytes() ? std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()) : "";
}

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * s.size());
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

/// Tensors of every supported dtype, a 0-d, two empty and a non-contiguous one.
NamedTensors sample_tensors() {
  const float inf = std::numeric_limits<float>::infinity();
  auto f32 = torch::randn({2, 3});
  f32[0][0] = std::nanf("");
  f32[0][1] = -0.0f;
  f32[1][2] = -inf;
  return {
      {"f32", f32},
      {"f64", torch::randn({4}, torch::kFloat64)},
      {"f16", torch::randn({3, 1}).to(torch::kFloat16)},
      {"bf16", torch::randn({5}).to(torch::kBFloat16)},
      {"i64", torch::tensor({std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                             std::numeric_limits<int64_t>::max()})
                  .reshape({2, 2})},
      {"i32", torch::randint(-1000000, 1000000, {2, 2, 2}, torch::kInt32)},
      {"i16", torch::randint(-30000, 30000, {3}, torch::kInt16)},
      {"i8", torch::randint(-128, 128, {6}, torch::kInt8)},
      {"u8", torch::randint(0, 256, {7}, torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(3.25f)},
      {"empty", torch::zeros({0, 3})},
      {"empty_i64", torch::zeros({0}, torch::kInt64)},
      {"transposed", torch::arange(12, torch::kFloat32).reshape({3, 4}).t()},
  };
}

void expect_same(const NamedTensors& expected, const NamedTensors& got) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].first);
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_EQ(got[i].second.scalar_type(), expected[i].second.scalar_type());
    EXPECT_EQ(got[i].second.sizes(), expected[i].second.sizes());
    EXPECT_TRUE(got[i].second.is_contiguous());
    EXPECT_EQ(bytes_of(got[i].second), bytes_of(expected[i].second));
  }
}

/// The header length, header JSON and data section of a file.
struct Parts {
  nlohmann::json header;
  std::string data;
};

Parts split(const std::string& bytes) {
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

/// Writes a file from a raw header text (unpadded) and a data section.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  const std::uint64_t n = header.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  write_file_atomic(path, bytes + header + data);
}

/// Writes a valid two-tensor file ("a": F32 [2], "b": F32 [2, 2]), then lets `tamper` edit its
/// header and data before writing it back.
template <typename F>
void tampered(const std::string& path, F tamper) {
  save_safetensors(path, {{"a", torch::randn({2})}, {"b", torch::randn({2, 2})}}, {{"k", "v"}});
  Parts p = split(read_file(path));
  ASSERT_EQ(p.header["a"]["data_offsets"], nlohmann::json({0, 8}));
  ASSERT_EQ(p.header["b"]["data_offsets"], nlohmann::json({8, 24}));
  tamper(p.header, p.data);
  write_raw(path, p.header.dump(), p.data);
}

/// Expects load_safetensors(path) to throw InputError whose message contains `part`.
void expect_rejected(const std::string& path, const std::string& part) {
  const std::string what = foxhunt::testing::input_error([&] { load_safetensors(path); });
  ASSERT_FALSE(what.empty()) << "expected InputError containing '" << part << "'";
  EXPECT_EQ(what.rfind("[safetensors] " + path + ": ", 0), 0u) << what;
  EXPECT_NE(what.find("expected"), std::string::npos) << what;
  EXPECT_NE(what.find(part), std::string::npos) << what;
}

// A valid one-tensor file at `path`, then `mutate` applied to its bytes.
void write_tampered(const std::string& path, const std::function<void(std::string&)>& mutate) {
  save_safetensors(path, {{"a", torch::ones({2})}});
  auto bytes = read_file(path);
  mutate(bytes);
  write_file_atomic(path, bytes);
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeAndShapeBitExact) {
  TempDir dir;
  const auto path = dir.file("t.safetensors");
  const auto tensors = sample_tensors();
  save_safetensors(path, tensors);
  const auto bytes = read_file(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "header padded to a multiple of 8";
  EXPECT_EQ(bytes[8], '{');
  std::uint64_t data = 0;
  for (const auto& [name, t] : tensors) data += t.nbytes();
  EXPECT_EQ(bytes.size(), 8 + n + data);

  const auto file = load_safetensors(path);
  expect_same(tensors, file.tensors);
  EXPECT_TRUE(file.metadata.empty());
  EXPECT_EQ(file.tensors[10].second.dim(), 0);  // "scalar" stays 0-d
  EXPECT_EQ(file.tensors[11].second.sizes(), (std::vector<int64_t>{0, 3}));
}

TEST_F(SafetensorsTest, MetadataRoundTrips) {
  TempDir dir;
  const auto path = dir.file("m.safetensors");
  const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                   {"model", "dqn"},
                                                   {"options", R"({"hidden":[128,64]})"},
                                                   {"empty", ""},
                                                   {"unicode", "fünf \"quoted\"\n"}};
  save_safetensors(path, {{"x", torch::ones({2})}}, meta);
  const auto file = load_safetensors(path);
  EXPECT_EQ(file.metadata, meta);
  ASSERT_EQ(file.tensors.size(), 1u);
  EXPECT_EQ(file.tensors[0].first, "x");
  // No tensors at all is a valid (8 + header) file.
  save_safetensors(path, {}, meta);
  EXPECT_TRUE(load_safetensors(path).tensors.empty());
  EXPECT_EQ(load_safetensors(path).metadata, meta);
}

TEST_F(SafetensorsTest, SaveRejectsBadNamesAndDtypes) {
  TempDir dir;
  const auto path = dir.file("bad.safetensors");
  const auto x = torch::ones({2});
  EXPECT_THROW(save_safetensors(path, {{"a", x}, {"a", x}}), InputError);
  EXPECT_THROW(save_safetensors(path, {{"__metadata__", x}}), InputError);
  EXPECT_THROW(save_safetensors(path, {{"", x}}), InputError);
  EXPECT_THROW(save_safetensors(path, {{"u", torch::Tensor()}}), InputError);
  EXPECT_THROW(save_safetensors(path, {{"c", torch::ones({2}, torch::kComplexFloat)}}), InputError);
  EXPECT_THROW(save_safetensors(path, {{"bad\xff", x}}), InputError);
  EXPECT_FALSE(std::filesystem::exists(path));
  try {
    save_safetensors(path, {{"a", x}, {"a", x}});
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "[safetensors] " + path + ": expected unique tensor names, got 'a' twice");
  }
}

TEST_F(SafetensorsTest, SaveIsAtomic) {
  TempDir dir;
  const auto path = dir.file("a.safetensors");
  save_safetensors(path, {{"old", torch::ones({3})}});
  testing_hooks::fail_before_rename = true;
  EXPECT_THROW(save_safetensors(path, {{"new", torch::zeros({5})}}), Error);
  testing_hooks::fail_before_rename = false;
  const auto file = load_safetensors(path);
  ASSERT_EQ(file.tensors.size(), 1u);
  EXPECT_EQ(file.tensors[0].first, "old");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
}

TEST_F(SafetensorsTest, DqnExportImportGivesIdenticalForward) {
  TempDir dir;
  const auto path = dir.file("dqn.safetensors");
  auto a = models::make_model("dqn");
  a->module().eval();
  const auto names = module_tensors(a->module());
  ASSERT_EQ(names.size(), 6u);
  EXPECT_EQ(names[0].first, "q.fc0.weight");
  EXPECT_EQ(names[5].first, "q.fc2.bias");
  save_safetensors(path, names, {{"model", "dqn"}});

  auto b = models::make_model("dqn");
  b->module().eval();
  const auto batch = a->example_batch(8, 0, torch::kCPU, 7);
  const auto qa = a->forward(batch)[0];
  ASSERT_FALSE(torch::equal(qa, b->forward(batch)[0])) << "fresh model should differ";
  load_module_tensors(b->module(), load_safetensors(path), path);
  const auto qb = b->forward(batch)[0];
  EXPECT_EQ(bytes_of(qa), bytes_of(qb));
  for (const auto& [name, t] : module_tensors(b->module())) EXPECT_TRUE(t.requires_grad()) << name;
}

// ---- corruption classes: each rejected with InputError naming the file ----------------------

TEST_F(SafetensorsTest, RejectsFileShorterThanEightBytes) {
  TempDir dir;
  const auto path = dir.file("short.safetensors");
  write_file_atomic(path, std::string("\x10\0\0\0\0", 5));
  expect_rejected(path, "at least 8 bytes (the header length), got 5");
  write_file_atomic(path, "");
  expect_rejected(path, "got 0");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  TempDir dir;
  const auto path = dir.file("long.safetensors");
  write_tampered(path, [](std::string& bytes) {
    const std::uint64_t n = bytes.size();  // 8 more than what follows the length
    std::memcpy(bytes.data(), &n, 8);
  });
  expect_rejected(path, "header length within the file");
}

TEST_F(SafetensorsTest, RejectsHeaderLengthOver100MB) {
  TempDir dir;
  const auto path = dir.file("huge.safetensors");
  const std::uint64_t n = 100'000'001;
  write_tampered(path, [n](std::string& bytes) { std::memcpy(bytes.data(), &n, sizeof(n)); });
  expect_rejected(path, "header length of at most 100000000 bytes, got 100000001");
}

TEST_F(SafetensorsTest, RejectsInvalidJson) {
  TempDir dir;
  const auto path = dir.file("json.safetensors");
  write_tampered(path, [](std::string& bytes) {
    bytes[9] = '!';  // just after the opening '{'
  });
  expect_rejected(path, "valid JSON header");
  write_raw(path, "[1, 2]", "");
  expect_rejected(path, "start with '{', got '['");
  write_raw(path, "", "");
  expect_rejected(path, "an empty header");
}

TEST_F(SafetensorsTest, RejectsUnknownDtype) {
  TempDir dir;
  const auto path = dir.file("dtype.safetensors");
  tampered(path, [](nlohmann::json& h, std::string&) { h["a"]["dtype"] = "F8_E4M3"; });
  expect_rejected(path,
                  "tensor 'a': expected dtype one of F64, F32, F16, BF16, I64, I32, I16, I8, "
                  "U8, BOOL, got 'F8_E4M3'");
}

TEST_F(SafetensorsTest, RejectsShapeOffsetMismatch) {
  TempDir dir;
  const auto path = dir.file("shape.safetensors");
  tampered(path, [](nlohmann::json& h, std::string&) { h["b"]["shape"] = {2, 3}; });
  expect_rejected(path, "tensor 'b': expected 24 bytes for F32 [2, 3], got data_offsets [8, 24]");
  tampered(path, [](nlohmann::json& h, std::string&) { h["a"]["dtype"] = "F64"; });
  expect_rejected(path, "expected 16 bytes for F64 [2]");
  tampered(path, [](nlohmann::json& h, std::string&) { h["a"]["shape"] = {-2}; });
  expect_rejected(path, "non-negative integers, got -2");
  tampered(path, [](nlohmann::json& h, std::string&) { h["a"].erase("shape"); });
  expect_rejected(path, "expected a 'shape' entry");
}

TEST_F(SafetensorsTest, RejectsOverlappingOffsets) {
  TempDir dir;
  const auto path = dir.file("overlap.safetensors");
  // b claims [4, 20): its first 4 bytes are also a's last 4.
  tampered(path, [](nlohmann::json& h, std::string& d) {
    h["b"]["data_offsets"] = {4, 20};
    d.resize(20);
  });
  expect_rejected(path, "expected tensor 'b' to start at or after byte 8");
}

TEST_F(SafetensorsTest, RejectsOutOfRangeOffsets) {
  TempDir dir;
  const auto path = dir.file("range.safetensors");
  tampered(path, [](nlohmann::json& h, std::string&) { h["b"]["data_offsets"] = {16, 32}; });
  expect_rejected(path, "data_offsets inside the data section of 24 bytes, got [16, 32]");
  tampered(path, [](nlohmann::json& h, std::string&) { h["a"]["data_offsets"] = {8, 0}; });
  expect_rejected(path, "begin <= end");
  tampered(path, [](nlohmann::json& h, std::string& d) { d.resize(20); });
  expect_rejected(path, "data section of 20 bytes, got [8, 24]");
}

TEST_F(SafetensorsTest, RejectsTrailingBytesAndHoles) {
  TempDir dir;
  const auto path = dir.file("holes.safetensors");
  tampered(path, [](nlohmann::json&, std::string& d) { d += "junk"; });
  expect_rejected(path,
                  "data section of 24 bytes (the end of the last tensor), got 28 (4 trailing");
  tampered(path, [](nlohmann::json& h, std::string& d) {
    h["b"]["data_offsets"] = {12, 28};
    d.resize(28);
  });
  expect_rejected(path, "expected tensor 'b' to start at byte 8, got 12 (a hole of 4 bytes");
  tampered(path, [](nlohmann::json& h, std::string& d) {
    h["a"]["data_offsets"] = {16, 24};
    h["b"]["data_offsets"] = {0, 16};
  });
  EXPECT_NO_THROW(load_safetensors(path)) << "any order of entries that tiles the data is valid";
}

TEST_F(SafetensorsTest, RejectsDuplicateNames) {
  TempDir dir;
  const auto path = dir.file("dup.safetensors");
  write_raw(path,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            std::string(8, '\0'));
  expect_rejected(path, "unique keys in the header, got 'a' twice");
}

TEST_F(SafetensorsTest, RejectsBadMetadataAndBoolBytes) {
  TempDir dir;
  const auto path = dir.file("meta.safetensors");
  tampered(path, [](nlohmann::json& h, std::string&) { h["__metadata__"]["n"] = 3; });
  expect_rejected(path, "__metadata__ value of 'n' to be a string, got 3");
  write_raw(path, R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02");
  expect_rejected(path, "only bytes 0 and 1");
  write_raw(path, R"({"b":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2],"x":1}})", "\x01\x00");
  expect_rejected(path, "only the keys dtype, shape, data_offsets, got 'x'");
}

// ---- load_module_tensors ---------------------------------------------------------------------

/// Expects load_module_tensors to throw InputError containing every part, module unchanged.
void expect_module_rejects(const SafetensorsFile& file, const std::vector<std::string>& parts) {
  auto m = models::make_model("dqn");
  std::vector<std::string> before;
  for (const auto& [name, t] : module_tensors(m->module())) before.push_back(bytes_of(t));
  try {
    load_module_tensors(m->module(), file, "src.safetensors");
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("[safetensors] src.safetensors: expected", 0), 0u) << what;
    for (const auto& p : parts) EXPECT_NE(what.find(p), std::string::npos) << p << " in " << what;
  }
  const auto after = module_tensors(m->module());
  for (size_t i = 0; i < after.size(); ++i)
    EXPECT_EQ(bytes_of(after[i].second), before[i]) << after[i].first << " was modified";
}

SafetensorsFile dqn_file() {
  auto m = models::make_model("dqn");
  SafetensorsFile f;
  for (const auto& [name, t] : module_tensors(m->module())) f.tensors.emplace_back(name, t.clone());
  return f;
}

TEST_F(SafetensorsTest, LoadModuleTensorsRejectsWrongNames) {
  auto f = dqn_file();
  f.tensors[1].first = "q.fc0.b";          // q.fc0.bias missing, q.fc0.b unexpected
  f.tensors.erase(f.tensors.begin() + 5);  // q.fc2.bias missing
  f.tensors.emplace_back("extra", torch::ones({1}));
  expect_module_rejects(f,
                        {"missing: 'q.fc0.bias', 'q.fc2.bias'", "unexpected: 'q.fc0.b', 'extra'"});
  auto g = dqn_file();
  g.tensors.push_back(g.tensors[0]);
  expect_module_rejects(g, {"unique tensor names, got 'q.fc0.weight' twice"});
}

TEST_F(SafetensorsTest, LoadModuleTensorsRejectsWrongShapesAndDtypes) {
  auto f = dqn_file();
  // Valid tensors first, so a half-done copy would show in the module.
  f.tensors[4].second = torch::zeros({3, 65});
  f.tensors[5].second = f.tensors[5].second.to(torch::kFloat64);
  expect_module_rejects(f,
                        {"2 mismatches", "q.fc2.weight: expected Float [3, 64], got Float [3, 65]",
                         "q.fc2.bias: expected Float [3], got Double [3]"});
}

// ---- Python's safetensors reads what we write, and we read what it writes ---------------------

TEST_F(SafetensorsTest, PythonReadsTheFile) {
  const char* no_python = std::getenv("FOXHUNT_NO_PYTHON");
  if (no_python && std::string(no_python) == "1") GTEST_SKIP() << "FOXHUNT_NO_PYTHON=1";
  const std::string python = FOXHUNT_SOURCE_DIR "/.venv/bin/python";
  const std::string script = FOXHUNT_SOURCE_DIR "/tests/python/check_safetensors.py";
  ASSERT_TRUE(std::filesystem::exists(python))
      << python << " is missing: run scripts/setup.sh (or set FOXHUNT_NO_PYTHON=1 to skip)";

  TempDir dir;
  auto dqn = models::make_model("dqn");
  dqn->module().eval();
  NamedTensors tensors = module_tensors(dqn->module());
  for (auto& t : sample_tensors()) tensors.push_back(std::move(t));
  const std::map<std::string, std::string> meta = {{"model", "dqn"}, {"format", "pt"}};
  save_safetensors(dir.file("cpp.safetensors"), tensors, meta);

  nlohmann::json expected;
  expected["metadata"] = meta;
  for (const auto& [name, t] : tensors)
    expected["tensors"][name] = {{"dtype", safetensors_dtype_name(t.scalar_type())},
                                 {"shape", t.sizes().vec()},
                                 {"hex", hex(bytes_of(t))}};
  const auto batch = dqn->example_batch(4, 0, torch::kCPU, 11);
  const auto q = dqn->forward(batch)[0];
  auto rows = [](const torch::Tensor& t) {
    nlohmann::json j = nlohmann::json::array();
    auto a = t.accessor<float, 2>();
    for (int64_t i = 0; i < t.size(0); ++i) {
      nlohmann::json r = nlohmann::json::array();
      for (int64_t k = 0; k < t.size(1); ++k) r.push_back(static_cast<double>(a[i][k]));
      j.push_back(r);
    }
    return j;
  };
  expected["dqn"] = {{"input", rows(batch.inputs[0])}, {"output", rows(q)}};
  write_file_atomic(dir.file("expected.json"), expected.dump());

  const std::string cmd = "'" + python + "' '" + script + "' '" + dir.file("cpp.safetensors") +
                          "' '" + dir.file("expected.json") + "' '" + dir.file("py.safetensors") +
                          "'";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << " -> status " << status;

  // The file Python's save_file wrote (its own order and alignment) reads back bit-exact here.
  const auto back = load_safetensors(dir.file("py.safetensors"));
  EXPECT_EQ(back.metadata, meta);
  ASSERT_EQ(back.tensors.size(), tensors.size());
  std::map<std::string, torch::Tensor> by_name(back.tensors.begin(), back.tensors.end());
  for (const auto& [name, t] : tensors) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_EQ(by_name[name].scalar_type(), t.scalar_type()) << name;
    EXPECT_EQ(by_name[name].sizes(), t.sizes()) << name;
    EXPECT_EQ(bytes_of(by_name[name]), bytes_of(t)) << name;
  }
}

}  // namespace
}  // namespace foxhunt::models
