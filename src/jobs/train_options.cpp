// The typed inputs of a train job (jobs/train_job.h): the batch choice, trainer option patches and
// their one merge, and the header of a resumed checkpoint. JSON is read here, at the boundary
// (--options, the checkpoint file), and nowhere in the job itself.
#include <charconv>

#include "foxhunt/core/error.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/train/checkpointing.h"

namespace foxhunt::jobs {

namespace {

constexpr const char* kTrainOptionsComponent = "train";

// The reader of each trainer's options (missing keys keep the defaults; unknown keys and wrong
// types are InputErrors naming the trainer and the key).
train::DqnTrainerOptions options_from_json_as(const nlohmann::json& j,
                                              const train::DqnTrainerOptions*) {
  return train::dqn_trainer_options_from_json(j);
}
train::PpoTrainerOptions options_from_json_as(const nlohmann::json& j,
                                              const train::PpoTrainerOptions*) {
  return train::ppo_trainer_options_from_json(j);
}
train::ForecastTrainerOptions options_from_json_as(const nlohmann::json& j,
                                                   const train::ForecastTrainerOptions*) {
  return train::forecast_trainer_options_from_json(j);
}

}  // namespace

// ---- batch ------------------------------------------------------------------------------------

BatchChoice BatchChoice::parse(std::string_view text, const char* where) {
  if (text.empty()) return {};
  if (text == "auto") return automatic();
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  FOXHUNT_CHECK(ec == std::errc() && end == text.data() + text.size() && n > 0,
                kTrainOptionsComponent, where, ": expected a positive integer or 'auto', got '",
                std::string(text), "'");
  return {Kind::kFixed, n};
}

BatchChoice BatchChoice::fixed(int64_t n) {
  FOXHUNT_CHECK(n > 0, kTrainOptionsComponent, "batch: expected a positive integer, got ", n);
  return {Kind::kFixed, n};
}

std::string BatchChoice::str() const {
  if (kind == Kind::kFixed) return std::to_string(size);
  return kind == Kind::kAuto ? "auto" : "";
}

// ---- trainer options --------------------------------------------------------------------------

template <class Options>
OptionsPatch<Options> OptionsPatch<Options>::parse(const nlohmann::json& j, const char* where) {
  FOXHUNT_CHECK(j.is_object(), kTrainOptionsComponent, where, ": expected a JSON object, got ",
                j.type_name());
  OptionsPatch p;
  p.values_ = options_from_json_as(j, static_cast<const Options*>(nullptr));
  for (auto it = j.begin(); it != j.end(); ++it) p.names_.push_back(it.key());
  return p;
}

template <class Options>
Options OptionsPatch<Options>::applied_to(Options base) const {
  if (names_.empty()) return base;
  // The named fields copied through the options' own field list (their JSON form: the one place
  // each option is named), so no option is listed again here.
  nlohmann::json merged = to_json(base);
  const nlohmann::json given = to_json(values_);
  for (const auto& name : names_) merged[name] = given.at(name);
  return options_from_json_as(merged, static_cast<const Options*>(nullptr));
}

template <class Options>
Options merge_trainer_options(const Options& defaults, const std::optional<Options>& resumed,
                              const std::vector<OptionsPatch<Options>>& patches,
                              const TrainerFlags& flags) {
  Options o = resumed ? *resumed : defaults;
  for (const auto& p : patches) o = p.applied_to(std::move(o));
  if (flags.length > 0) {
    if constexpr (requires { o.total_steps(); })
      o.total_steps(flags.length);
    else
      o.epochs(flags.length);
  }
  if (flags.batch_size) {
    if constexpr (requires { o.batch_size(); })
      o.batch_size(*flags.batch_size);
    else
      FOXHUNT_INTERNAL_ASSERT(false, "a batch-size flag for a trainer without batch_size");
  }
  if (flags.seed) o.seed(*flags.seed);
  if (flags.device) {
    if constexpr (requires { o.device(); })
      o.device(*flags.device);
    else
      FOXHUNT_INTERNAL_ASSERT(false, "a device flag for a trainer without device");
  }
  return o;
}

template class OptionsPatch<train::DqnTrainerOptions>;
template class OptionsPatch<train::PpoTrainerOptions>;
template class OptionsPatch<train::ForecastTrainerOptions>;
template train::DqnTrainerOptions merge_trainer_options(
    const train::DqnTrainerOptions&, const std::optional<train::DqnTrainerOptions>&,
    const std::vector<OptionsPatch<train::DqnTrainerOptions>>&, const TrainerFlags&);
template train::PpoTrainerOptions merge_trainer_options(
    const train::PpoTrainerOptions&, const std::optional<train::PpoTrainerOptions>&,
    const std::vector<OptionsPatch<train::PpoTrainerOptions>>&, const TrainerFlags&);
template train::ForecastTrainerOptions merge_trainer_options(
    const train::ForecastTrainerOptions&, const std::optional<train::ForecastTrainerOptions>&,
    const std::vector<OptionsPatch<train::ForecastTrainerOptions>>&, const TrainerFlags&);

// ---- resumed checkpoint -----------------------------------------------------------------------

ResumedCheckpoint read_resumed_checkpoint(const Container& c, const std::string& path,
                                          models::TrainerKind kind) {
  train::check_trainer_container(c, path, models::trainer_algo(kind));
  const auto& h = c.header;
  const auto& t = h.at("trainer");
  FOXHUNT_CHECK(t.contains("options"), "checkpoint", "'", path, "': trainer options missing");
  ResumedCheckpoint r;
  r.path = path;
  r.model = h.value("model", std::string());
  r.model_options = h.value("options", nlohmann::json::object());
  const auto& options = t.at("options");
  switch (kind) {
    case models::TrainerKind::kDqn:
      r.trainer_options = train::dqn_trainer_options_from_json(options);
      break;
    case models::TrainerKind::kPpo:
      r.trainer_options = train::ppo_trainer_options_from_json(options);
      break;
    case models::TrainerKind::kForecast:
      r.trainer_options = train::forecast_trainer_options_from_json(options);
      break;
  }
  auto extra = t.value("extra", nlohmann::json::object());
  if (!extra.is_object()) extra = nlohmann::json::object();
  r.batch_size = extra.value("batch_size", int64_t{64});
  r.world_size = extra.value("world_size", int64_t{1});
  auto data = extra.value("data", nlohmann::json::object());
  if (!data.is_object()) data = nlohmann::json::object();
  const auto source = data.value("source", std::string());
  // The embedded synthetic series is named "synthetic...", not a file.
  r.data_path = source.rfind("synthetic", 0) == 0 ? std::string() : source;
  r.target_vol_feature = data.value("target_vol_feature", std::string());
  return r;
}

}  // namespace foxhunt::jobs
