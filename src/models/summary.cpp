#include "foxhunt/models/summary.h"

#include <cstdio>

#include "foxhunt/models/model.h"

namespace foxhunt::models {

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
  return {{"name", s.name},
          {"parameters", s.parameters},
          {"parameter_bytes", s.parameter_bytes},
          {"buffers", s.buffers},
          {"buffer_bytes", s.buffer_bytes},
          {"seq_len", s.seq_len},
          {"inputs", s.inputs},
          {"options", s.options}};
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while ((v >= 1024.0 || v <= -1024.0) && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof(buf), "%.0f B", v);
  else
    std::snprintf(buf, sizeof(buf), "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace foxhunt::models
