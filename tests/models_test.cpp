// Tests shared by all registered models: counts, validation, checkpoints; DQN/PPO specifics.
#include <gtest/gtest.h>

#include <fstream>

#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/dqn.h"
#include "foxhunt/models/json_get.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/ppo.h"
#include "foxhunt/models/summary.h"
#include "test_util.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::TempDir;

TEST(DqnTest, DefaultParameterCountIsClosedForm) {
  DqnOptions o;
  EXPECT_EQ(parameter_count(o), 41347);
  DqnNet net(o);
  int64_t n = 0;
  for (auto& p : net->parameters()) n += p.numel();
  EXPECT_EQ(n, 41347);
  auto m = make_model("dqn");
  EXPECT_EQ(m->parameter_count(), 41347);
  EXPECT_EQ(m->parameter_bytes(), 4 * 41347);
}

TEST(DqnTest, CustomOptionsCount) {
  DqnOptions o;
  o.state_dim(4).hidden({256, 256}).actions(2);
  DqnNet net(o);
  int64_t n = 0;
  for (auto& p : net->parameters()) n += p.numel();
  EXPECT_EQ(n, parameter_count(o));
  EXPECT_EQ(n, 4 * 256 + 256 + 256 * 256 + 256 + 256 * 2 + 2);
}

TEST(PpoTest, DefaultParameterCountIsClosedForm) {
  PpoOptions o;
  EXPECT_EQ(parameter_count(o), 82564);
  auto m = make_model("ppo");
  EXPECT_EQ(m->parameter_count(), 82564);
  EXPECT_EQ(m->parameter_bytes(), 4 * 82564);
}

TEST(PpoTest, OrthogonalInitGains) {
  torch::manual_seed(0);
  ActorCritic ac(PpoOptions{});
  // Orthogonal rows/cols: W W^T = gain^2 I on the smaller side.
  auto w = ac->policy->layers.back()->weight;  // [3, 64]
  auto wwt = torch::mm(w, w.t());
  EXPECT_TRUE(torch::allclose(wwt, 0.01 * 0.01 * torch::eye(3), 1e-6, 1e-8));
  EXPECT_EQ(ac->value->layers[0]->bias.abs().sum().item<double>(), 0.0);
}

TEST(PpoTest, ClippedObjectiveMatchesHandComputation) {
  PolicyOutput out;
  out.logits = torch::tensor({{0.0, std::log(3.0)}}, torch::kDouble);  // p = [0.25, 0.75]
  out.value = torch::tensor({1.0}, torch::kDouble);
  auto actions = torch::tensor({1}, torch::kLong);
  auto old_lp = torch::tensor({std::log(0.5)}, torch::kDouble);  // ratio = 1.5
  auto adv = torch::tensor({2.0}, torch::kDouble);
  auto ret = torch::tensor({3.0}, torch::kDouble);
  // policy: -min(1.5*2, 1.2*2) = -2.4; value: 0.5*(1-3)^2 = 2; entropy term 0.
  auto loss = ppo_loss(out, actions, old_lp, adv, ret, 0.2, 0.5, 0.0);
  EXPECT_NEAR(loss.item<double>(), -2.4 + 2.0, 1e-12);
  const double h = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  auto loss_ent = ppo_loss(out, actions, old_lp, adv, ret, 0.2, 0.5, 0.1);
  EXPECT_NEAR(loss_ent.item<double>(), -2.4 + 2.0 - 0.1 * h, 1e-12);
}

TEST(RegistryTest, UnknownModelNamesKnownOnes) {
  try {
    make_model("lstm");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dqn"), std::string::npos);
  }
}

TEST(RegistryTest, UnknownOptionRejected) {
  EXPECT_THROW(make_model("dqn", {{"state_dimm", 3}}), InputError);
  EXPECT_THROW(make_model("ppo", {{"hidden", "wide"}}), InputError);
}

TEST(RegistryTest, OptionsRoundTripThroughJson) {
  for (const auto& name : model_names()) {
    auto m = make_model(name);
    auto m2 = make_model(name, m->options_json());
    EXPECT_EQ(m2->options_json(), m->options_json()) << name;
    EXPECT_EQ(m2->parameter_count(), m->parameter_count()) << name;
  }
}

// ---- every registered model ------------------------------------------------------------------

class AllModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { torch::manual_seed(7); }
};

TEST_P(AllModelsTest, ForwardShapesAndFinite) {
  auto m = make_model(GetParam());
  m->module().eval();
  for (int64_t b : {1, 5}) {
    auto batch = m->example_batch(b, 0, torch::kCPU, 3);
    auto outs = m->forward(batch);
    auto shapes = m->output_shapes(b, m->default_seq_len());
    ASSERT_EQ(outs.size(), shapes.size());
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_EQ(outs[i].sizes().vec(), shapes[i]);
      EXPECT_TRUE(torch::isfinite(outs[i]).all().item<bool>());
    }
  }
}

TEST_P(AllModelsTest, LossIsFiniteScalarWithGradients) {
  auto m = make_model(GetParam());
  m->module().train();
  auto batch = m->example_batch(4, 0, torch::kCPU, 3);
  auto loss = m->loss(batch);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  int64_t with_grad = 0;
  for (auto& p : m->module().parameters()) with_grad += p.grad().defined();
  EXPECT_GT(with_grad, 0);
}

TEST_P(AllModelsTest, RejectsWrongRankSizeDtypeAndNaN) {
  auto m = make_model(GetParam());
  auto good = m->example_batch(2, 0, torch::kCPU, 3);
  for (size_t i = 0; i < good.inputs.size(); ++i) {
    const auto& t = good.inputs[i];
    const std::string input = m->input_names()[i];
    {  // wrong rank
      auto bad = good;
      bad.inputs[i] = t.unsqueeze(0);
      try {
        m->forward(bad);
        ADD_FAILURE() << input << ": rank not rejected";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("expected rank"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("got rank"), std::string::npos) << e.what();
      }
    }
    if (t.dim() >= 2) {  // wrong trailing size
      auto bad = good;
      auto sizes = t.sizes().vec();
      sizes.back() += 1;
      bad.inputs[i] = torch::zeros(sizes, t.options());
      EXPECT_THROW(m->forward(bad), InputError) << input;
    }
    {  // wrong dtype
      auto bad = good;
      bad.inputs[i] = t.is_floating_point() ? t.to(torch::kInt32) : t.to(torch::kFloat);
      EXPECT_THROW(m->forward(bad), InputError) << input;
    }
    if (t.is_floating_point()) {  // NaN
      auto bad = good;
      bad.inputs[i] = t.clone();
      bad.inputs[i].view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
      try {
        m->forward(bad);
        ADD_FAILURE() << input << ": NaN not rejected";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("finite"), std::string::npos) << e.what();
      }
    }
  }
  // Wrong number of inputs.
  auto bad = good;
  bad.inputs.push_back(good.inputs[0]);
  EXPECT_THROW(m->forward(bad), InputError);
}

TEST_P(AllModelsTest, SaveLoadIsBitIdentical) {
  TempDir dir;
  auto m = make_model(GetParam());
  m->module().eval();
  const auto path = dir.file(GetParam() + ".ckpt");
  save_model(*m, path);
  auto loaded = load_model(path, torch::kCPU, GetParam());
  loaded->module().eval();
  auto batch = m->example_batch(3, 0, torch::kCPU, 11);
  torch::NoGradGuard ng;
  auto a = m->forward(batch);
  auto b = loaded->forward(batch);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
  EXPECT_EQ(loaded->options_json(), m->options_json());
}

TEST_P(AllModelsTest, TruncatedOrFlippedCheckpointRejected) {
  TempDir dir;
  auto m = make_model(GetParam());
  const auto path = dir.file("m.ckpt");
  save_model(*m, path);
  const auto bytes = read_file(path);
  write_file_atomic(path, bytes.substr(0, bytes.size() / 2));
  try {
    load_model(path);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[checkpoint]"), std::string::npos);
  }
  for (size_t pos : {size_t{20}, bytes.size() / 2, bytes.size() - 10}) {
    auto bad = bytes;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x01);
    write_file_atomic(path, bad);
    EXPECT_THROW(load_model(path), InputError) << "flip at " << pos;
  }
}

TEST_P(AllModelsTest, WrongModelCheckpointRejected) {
  TempDir dir;
  auto m = make_model(GetParam());
  const auto path = dir.file("m.ckpt");
  save_model(*m, path);
  const std::string other = GetParam() == "dqn" ? "ppo" : "dqn";
  try {
    load_model(path, torch::kCPU, other);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a '" + other + "' checkpoint"),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, AllModelsTest, ::testing::ValuesIn(model_names()),
                         [](const auto& info) { return info.param; });

TEST(ModelsSummaryTest, HumanBytes) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(3.0 * 1024 * 1024 * 1024), "3.00 GiB");
}

TEST(HostValidatedInputsTest, CpuTensorsAreAlwaysScanned) {
  auto dqn = make_model("dqn");
  auto x = torch::zeros({1, 256});
  x[0][3] = std::nanf("");
  EXPECT_FALSE(HostValidatedInputs::active());
  {
    HostValidatedInputs scope;
    EXPECT_TRUE(HostValidatedInputs::active());
    EXPECT_THROW(dqn->forward({{x}, {}}), InputError);  // a CPU tensor: still scanned
    { HostValidatedInputs nested; }
    EXPECT_TRUE(HostValidatedInputs::active());  // restored by the nested scope
  }
  EXPECT_FALSE(HostValidatedInputs::active());
  EXPECT_THROW(dqn->forward({{x}, {}}), InputError);
}

TEST(HostValidatedInputsTest, DeviceTensorsSkipTheScanInsideTheScope_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  if (!models::cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto dqn = make_model("dqn");
  dqn->to(torch::kCUDA);
  auto x = torch::zeros({1, 256});
  x[0][3] = std::nanf("");
  x = x.to(torch::kCUDA);
  EXPECT_THROW(dqn->forward({{x}, {}}), InputError);  // scanned on the device
  HostValidatedInputs scope;
  EXPECT_NO_THROW(dqn->forward({{x}, {}}));  // no device scan, no sync
}

}  // namespace
}  // namespace foxhunt::models

namespace foxhunt::models {
namespace {

// Options of the wrong JSON type are named with their key and what was expected, in words.
TEST(OptionsJsonTest, WrongTypesAreSaidInWords) {
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const nlohmann::json j = {{"hidden", 1.5}, {"lr", "x"}, {"on", 1}, {"name", 3}, {"n", 4}};
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  EXPECT_EQ(message([&] { json_get(j, "tft", "hidden", i); }),
            "[tft] option 'hidden': expected an integer, got number 1.5");
  EXPECT_EQ(i, 0);  // unchanged: 1.5 is not silently truncated
  EXPECT_EQ(message([&] { json_get(j, "dqn_trainer", "lr", d); }),
            "[dqn_trainer] option 'lr': expected a number, got string \"x\"");
  EXPECT_EQ(message([&] { json_get(j, "c", "on", b); }),
            "[c] option 'on': expected true or false, got number 1");
  EXPECT_EQ(message([&] { json_get(j, "c", "name", s); }),
            "[c] option 'name': expected a string, got number 3");
  json_get(j, "c", "n", d);  // an integer is a number
  EXPECT_EQ(d, 4.0);
  json_get(j, "c", "n", i);
  EXPECT_EQ(i, 4);
  json_get(j, "c", "absent", i);  // missing keys keep the value
  EXPECT_EQ(i, 4);
  // Out of the field's range, and numbers inside arrays: refused before get<T>(), whose
  // conversion would be undefined behaviour (found by fuzz/options_json.cpp under UBSan).
  const nlohmann::json big = {{"v", {3, 4.6e80}}, {"w", {3, 2.5}}, {"f", 1e300},
                              {"u", -1},          {"n", 70000},    {"ok", {1, 2}}};
  std::vector<int64_t> v = {7};
  EXPECT_EQ(message([&] { json_get(big, "c", "v", v); }),
            "[c] option 'v': expected an array of an integer, got array [3,4.6e+80]");
  EXPECT_EQ(message([&] { json_get(big, "c", "w", v); }),
            "[c] option 'w': expected an array of an integer, got array [3,2.5]");
  EXPECT_EQ(v, std::vector<int64_t>{7});
  float f = 0;
  EXPECT_EQ(message([&] { json_get(big, "c", "f", f); }),
            "[c] option 'f': expected a number within the range of float, got number 1e+300");
  uint64_t u = 0;
  EXPECT_EQ(message([&] { json_get(big, "c", "u", u); }),
            "[c] option 'u': expected an integer in [0, 18446744073709551615], got number -1");
  int16_t small = 0;
  EXPECT_EQ(message([&] { json_get(big, "c", "n", small); }),
            "[c] option 'n': expected an integer in [-32768, 32767], got number 70000");
  json_get(big, "c", "ok", v);
  EXPECT_EQ(v, (std::vector<int64_t>{1, 2}));
  // Through a model's options: the same words.
  EXPECT_NE(message([] {
              make_model("tft", {{"hidden", 1.5}});
            }).find("option 'hidden': expected an integer, got number 1.5"),
            std::string::npos);
}

}  // namespace
}  // namespace foxhunt::models
