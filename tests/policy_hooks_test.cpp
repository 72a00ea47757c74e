// The hooks the RL trainers train a policy through (models/policy.h, Model::as_value_policy and
// as_actor_critic) and the catalog's sizing hooks: the trainers build the catalog's model, reach
// it through these alone, and refuse a model without them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/dqn.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/policy.h"
#include "foxhunt/models/ppo.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/ppo_trainer.h"
#include "test_util.h"

namespace foxhunt {
namespace {

class PolicyHooksTest : public foxhunt::testing::SeededTest {};

using testing::input_error;

TEST_F(PolicyHooksTest, EachModelExposesTheHooksOfItsTrainerOnly) {
  const auto states = torch::randn({5, 6});
  for (const auto& e : models::catalog()) {
    SCOPED_TRACE(e.name);
    const bool policy = e.family == models::Family::kPolicy;
    auto m =
        policy ? models::make_model(e.name, models::policy_options(e.name, {6, {16, 8}, 3}, "test"))
               : models::make_model(e.name, e.compact_model_options);
    auto* q = m->as_value_policy();
    auto* ac = m->as_actor_critic();
    EXPECT_EQ(q != nullptr, e.trainer == models::TrainerKind::kDqn);
    EXPECT_EQ(ac != nullptr, e.trainer == models::TrainerKind::kPpo);
    models::Batch b;
    b.inputs = {states};
    // The hooks compute what forward() computes, with autograd.
    if (q != nullptr) {
      auto values = q->action_values(states);
      EXPECT_TRUE(values.requires_grad());
      EXPECT_TRUE(torch::equal(values, m->forward(b)[0]));
    }
    if (ac != nullptr) {
      auto out = ac->policy_and_value(states);
      const auto fwd = m->forward(b);
      EXPECT_TRUE(out.logits.requires_grad());
      EXPECT_TRUE(torch::equal(out.logits, fwd[0]));
      EXPECT_TRUE(torch::equal(out.value, fwd[1]));
    }
  }
}

TEST_F(PolicyHooksTest, TheCatalogSizesEachPolicyAsItsOwnOptionsDo) {
  const models::PolicyShape shape{5, {7, 3}, 2};
  // The same JSON the trainers built from the options structs before (bit-identical models).
  EXPECT_EQ(models::policy_options("dqn", shape),
            models::to_json(models::DqnOptions().state_dim(5).hidden({7, 3}).actions(2)));
  EXPECT_EQ(models::policy_options("ppo", shape),
            models::to_json(models::PpoOptions().state_dim(5).hidden({7, 3}).actions(2)));
  for (const char* name : {"dqn", "ppo"}) {
    SCOPED_TRACE(name);
    const auto back = models::policy_shape(name, models::policy_options(name, shape));
    EXPECT_EQ(back.state_dim, 5);
    EXPECT_EQ(back.hidden, (std::vector<int64_t>{7, 3}));
    EXPECT_EQ(back.actions, 2);
    // Missing keys take the model's defaults (the 256-d trading state, 3 actions).
    const auto defaults = models::policy_shape(name, nullptr);
    EXPECT_EQ(defaults.state_dim, 256);
    EXPECT_EQ(defaults.actions, 3);
    EXPECT_THROW(models::policy_shape(name, {{"state_dimm", 4}}), InputError);
  }
  // A forecaster has no sizing hook: the error names it and the policies.
  const auto msg = input_error([&] { (void)models::policy_options("tft", shape, "here"); });
  EXPECT_NE(msg.find("[here]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'tft'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dqn, ppo"), std::string::npos) << msg;
  EXPECT_THROW(models::policy_shape("mamba2", nlohmann::json::object()), InputError);
  EXPECT_THROW(models::policy_options("nope", shape), InputError);
  // Each trainer kind's model and algorithm id (the "algo" its checkpoints carry).
  EXPECT_EQ(models::trainer_model(models::TrainerKind::kDqn).name, "dqn");
  EXPECT_EQ(models::trainer_model(models::TrainerKind::kPpo).name, "ppo");
  EXPECT_EQ(models::trainer_algo(models::TrainerKind::kDqn), "dqn");
  EXPECT_EQ(models::trainer_algo(models::TrainerKind::kPpo), "ppo");
  EXPECT_EQ(models::trainer_algo(models::TrainerKind::kForecast), "forecast");
}

TEST_F(PolicyHooksTest, TheTargetCopyEqualsTheOnlineNetAndDrawsAsCloneDoes) {
  const auto options = models::policy_options("dqn", {6, {16, 8}, 3});
  // What the DQN trainer did before the hooks: clone the module, then draw.
  torch::manual_seed(11);
  auto a = models::make_model("dqn", options);
  (void)a->module_ptr()->clone(torch::Device(torch::kCPU));
  const auto after_clone = torch::rand({8});
  // The hook: the same draws (seeded runs stay bit-identical).
  torch::manual_seed(11);
  auto online = models::make_model("dqn", options);
  auto target = online->as_value_policy()->clone_model(torch::Device(torch::kCPU));
  const auto after_hook = torch::rand({8});
  EXPECT_TRUE(torch::equal(after_clone, after_hook));
  // Cloning re-runs the module's reset(): it does draw (a copy drawing nothing would differ).
  torch::manual_seed(11);
  (void)models::make_model("dqn", options);
  EXPECT_FALSE(torch::equal(torch::rand({8}), after_hook));

  // Parameter for parameter equal, in storage of its own, and itself a value policy.
  ASSERT_NE(target->as_value_policy(), nullptr);
  EXPECT_EQ(target->name(), online->name());
  EXPECT_EQ(target->options_json(), online->options_json());
  auto po = online->module().named_parameters(), pt = target->module().named_parameters();
  ASSERT_EQ(po.size(), pt.size());
  for (size_t i = 0; i < po.size(); ++i) {
    EXPECT_EQ(po[i].key(), pt[i].key());
    EXPECT_TRUE(torch::equal(po[i].value(), pt[i].value())) << po[i].key();
    EXPECT_NE(po[i].value().data_ptr(), pt[i].value().data_ptr()) << po[i].key();
  }
  const auto states = torch::randn({4, 6});
  EXPECT_TRUE(torch::equal(online->as_value_policy()->action_values(states),
                           target->as_value_policy()->action_values(states)));
  // Training the online net leaves the copy as it was.
  {
    torch::NoGradGuard no_grad;
    for (auto& p : online->module().parameters()) p.add_(1.0);
  }
  EXPECT_FALSE(torch::equal(online->as_value_policy()->action_values(states),
                            target->as_value_policy()->action_values(states)));
  for (size_t i = 0; i < po.size(); ++i)
    EXPECT_FALSE(torch::equal(po[i].value(), pt[i].value())) << po[i].key();
}

TEST_F(PolicyHooksTest, TrainersBuildTheNamedModelAndRefuseOneWithoutTheirHooks) {
  const auto dqn = train::DqnTrainerOptions().hidden({8}).buffer_size(256).seed(2);
  const auto ppo = train::PpoTrainerOptions().hidden({8}).n_envs(2).seed(2);
  const auto envs = train::env_factory("cartpole");
  // Unnamed: the catalog's model of the trainer's kind; named: that model.
  train::DqnTrainer d(dqn, envs);
  EXPECT_EQ(d.model().name(), models::trainer_model(models::TrainerKind::kDqn).name);
  EXPECT_EQ(d.algo(), models::trainer_algo(models::TrainerKind::kDqn));
  EXPECT_EQ(d.q_network().get(), d.model().module_ptr().get());
  train::PpoTrainer p(ppo, envs, "ppo");
  EXPECT_EQ(p.model().name(), "ppo");
  EXPECT_EQ(p.algo(), "ppo");
  EXPECT_EQ(p.network().get(), p.model().module_ptr().get());

  // An actor-critic has no action values, a Q-network no policy logits and value.
  auto msg = input_error([&] { train::DqnTrainer t(dqn, envs, "ppo"); });
  EXPECT_NE(msg.find("[dqn_trainer]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'ppo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("as_value_policy"), std::string::npos) << msg;
  msg = input_error([&] { train::PpoTrainer t(ppo, envs, "dqn"); });
  EXPECT_NE(msg.find("[ppo_trainer]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'dqn'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("as_actor_critic"), std::string::npos) << msg;
  // A forecaster cannot even be sized by an RL trainer; an unknown name is refused too.
  msg = input_error([&] { train::DqnTrainer t(dqn, envs, "tft"); });
  EXPECT_NE(msg.find("'tft'"), std::string::npos) << msg;
  msg = input_error([&] { train::PpoTrainer t(ppo, envs, "mamba2"); });
  EXPECT_NE(msg.find("'mamba2'"), std::string::npos) << msg;
  EXPECT_THROW(train::DqnTrainer(dqn, envs, "nope"), InputError);
}

}  // namespace
}  // namespace foxhunt
