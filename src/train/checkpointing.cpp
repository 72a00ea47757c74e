#include "foxhunt/train/checkpointing.h"

#include <sstream>

#include "foxhunt/models/checkpoint.h"

namespace foxhunt::train {

std::string optimizer_to_bytes(torch::optim::Optimizer& opt) {
  return models::archive_to_bytes(opt);
}

void optimizer_from_bytes(torch::optim::Optimizer& opt, const std::string& bytes,
                          const std::string& source) {
  try {
    // Optimizer state lives where the parameters live (CUDA runs resume onto CUDA).
    torch::Device device(torch::kCPU);
    const auto& groups = opt.param_groups();
    if (!groups.empty() && !groups.front().params().empty())
      device = groups.front().params().front().device();
    std::istringstream is(bytes);
    torch::serialize::InputArchive archive;
    archive.load_from(is, device);
    opt.load(archive);
  } catch (const c10::Error& e) {
    throw InputError("checkpoint", "'" + source + "': optimizer state does not match (" +
                                       std::string(e.what_without_backtrace()) + ")");
  }
}

std::string torch_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor state;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  return std::string(reinterpret_cast<const char*>(state.data_ptr<uint8_t>()),
                     static_cast<size_t>(state.numel()));
}

void set_torch_rng_state(const std::string& bytes, const std::string& source) {
  auto gen = at::detail::getDefaultCPUGenerator();
  auto state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  try {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(state);
  } catch (const c10::Error& e) {
    throw InputError("checkpoint", "'" + source + "': bad random-generator state (" +
                                       std::string(e.what_without_backtrace()) + ")");
  }
}

Container trainer_container(models::Model& model, const std::string& algo,
                            const nlohmann::json& trainer) {
  Container c = models::model_container(model);
  c.header["kind"] = "trainer";
  nlohmann::json t = trainer;
  t["version"] = kTrainerCheckpointVersion;
  t["algo"] = algo;
  c.header["trainer"] = t;
  return c;
}

Container read_trainer_checkpoint(const std::string& path, const std::string& algo) {
  Container c = read_container(path);
  check_trainer_container(c, path, algo);
  return c;
}

void check_trainer_container(const Container& c, const std::string& path, const std::string& algo) {
  const auto& h = c.header;
  FOXHUNT_CHECK(h.value("kind", "") == "trainer" && h.contains("trainer"), "checkpoint", "'", path,
                "': expected a trainer checkpoint (kind \"trainer\"), got kind \"",
                h.value("kind", "?"), "\"");
  const auto& t = h["trainer"];
  FOXHUNT_CHECK(t.value("version", -1) == kTrainerCheckpointVersion, "checkpoint", "'", path,
                "': expected trainer checkpoint version ", kTrainerCheckpointVersion, ", got ",
                t.value("version", -1));
  FOXHUNT_CHECK(t.value("algo", "") == algo, "checkpoint", "'", path, "': expected a '", algo,
                "' trainer checkpoint, got '", t.value("algo", "?"), "'");
}

const std::string& require_blob(const Container& c, const std::string& name,
                                const std::string& source) {
  auto it = c.blobs.find(name);
  FOXHUNT_CHECK(it != c.blobs.end(), "checkpoint", "'", source, "': missing blob '", name, "'");
  return it->second;
}

}  // namespace foxhunt::train
