#include "foxhunt/models/summary.h"

#include "foxhunt/core/units.h"
#include "foxhunt/models/model.h"

namespace foxhunt::models {

// The JSON keys are the field names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ModelSummary, name, parameters, parameter_bytes, buffers,
                                   buffer_bytes, seq_len, inputs, options)

std::vector<ModelSummary> describe_models() {
  std::vector<ModelSummary> out;
  for (const auto& name : model_names()) {
    auto m = make_model(name);
    ModelSummary s;
    s.name = name;
    s.parameters = m->parameter_count();
    s.parameter_bytes = m->parameter_bytes();
    for (const auto& b : m->module().buffers()) s.buffers += b.numel();
    s.buffer_bytes = m->buffer_bytes();
    s.seq_len = m->default_seq_len();
    s.inputs = m->input_names();
    s.options = m->options_json();
    out.push_back(std::move(s));
  }
  return out;
}

nlohmann::json to_json(const ModelSummary& s) {
  return nlohmann::json(s);
}

}  // namespace foxhunt::models
