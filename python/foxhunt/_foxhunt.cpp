// The `foxhunt._foxhunt` extension (nanobind): the C++ library's serving and job entry points
// for Python. Results cross as JSON text (each library result has one to_json) that the Python
// layer (foxhunt/__init__.py) turns into dicts and numpy arrays; errors become ValueError (bad
// input), MemoryError (a refused allocation) or RuntimeError.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <fstream>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/tape_bars.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/runtime_init.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/serving/tape_stream.h"

namespace nb = nanobind;
using namespace foxhunt;

namespace {

// "" = the ensemble directory's rule (DIR/rule.json, else the defaults).
std::optional<serving::DecisionRule> rule_of(const std::string& json) {
  if (json.empty()) return std::nullopt;
  serving::DecisionRule r;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("decision", std::string("rule: not valid JSON (") + e.what() + ")");
  }
  from_json(j, r);
  return r;
}

std::optional<memory::Budget> budget_of(const std::string& profile, double mib) {
  if (mib > 0)
    return memory::Budget::of_bytes(static_cast<uint64_t>(mib * 1048576.0), "budget_mib");
  if (!profile.empty()) return memory::Budget::of_profile(profile);
  return std::nullopt;
}

// Bars from parallel sequences; every sequence as long as `timestamps`.
std::vector<data::Bar> bars_of(const std::vector<int64_t>& t, const std::vector<double>& o,
                               const std::vector<double>& h, const std::vector<double>& l,
                               const std::vector<double>& c, const std::vector<double>& v) {
  const size_t n = t.size();
  FOXHUNT_CHECK(o.size() == n && h.size() == n && l.size() == n && c.size() == n && v.size() == n,
                "python",
                "bars: expected timestamp, open, high, low, close and volume of equal "
                "length, got ",
                n, ", ", o.size(), ", ", h.size(), ", ", l.size(), ", ", c.size(), ", ", v.size());
  std::vector<data::Bar> bars(n);
  for (size_t i = 0; i < n; ++i) bars[i] = {t[i], o[i], h[i], l[i], c[i], v[i]};
  return bars;
}

// The tape reader's options from on_bad ("refuse" or "drop").
data::TapeReadOptions tape_read_of(const std::string& on_bad) {
  FOXHUNT_CHECK(on_bad == "refuse" || on_bad == "drop", "python", "on_bad: expected 'refuse' or ",
                "'drop', got '", on_bad, "'");
  data::TapeReadOptions o;
  if (on_bad == "drop") o.on_bad = data::TapeBadPrintPolicy::kDrop;
  return o;
}

// One instrument's tape bars as JSON columns: OHLCV and the flow columns.
nlohmann::json bar_columns_json(const data::BarSeries& series,
                                const std::vector<data::BarFlow>& flow) {
  nlohmann::json j;
  for (const char* k :
       {"timestamp", "open", "high", "low", "close", "volume", "vwap", "prints", "buy_volume",
        "sell_volume", "duration", "realized_variance", "start_ns", "end_ns"})
    j[k] = nlohmann::json::array();
  for (size_t i = 0; i < flow.size(); ++i) {
    const auto& b = series.bars[i];
    const auto& f = flow[i];
    j["timestamp"].push_back(b.timestamp);
    j["open"].push_back(b.open);
    j["high"].push_back(b.high);
    j["low"].push_back(b.low);
    j["close"].push_back(b.close);
    j["volume"].push_back(b.volume);
    j["vwap"].push_back(f.vwap);
    j["prints"].push_back(f.prints);
    j["buy_volume"].push_back(f.buy_volume);
    j["sell_volume"].push_back(f.sell_volume);
    j["duration"].push_back(f.duration_seconds);
    j["realized_variance"].push_back(f.realized_variance);
    j["start_ns"].push_back(f.start_ns);
    j["end_ns"].push_back(f.end_ns);
  }
  return j;
}

// `foxhunt data bars` as a function: {spec, source, bars: columns} for one instrument, or
// {spec, source, symbols: {name: columns}} for a tape with a symbol column (time bars).
std::string tape_bars_json(const std::string& path, const std::string& spec,
                           const std::string& on_bad) {
  const auto bar_spec = data::parse_bar_spec(spec);
  const auto tape = data::load_tape_csv(path, tape_read_of(on_bad));
  nlohmann::json j = {{"spec", data::to_string(bar_spec)}, {"dropped", tape.dropped.total()}};
  if (tape.symbols.empty()) {
    const auto tb = data::build_tape_bars(tape, bar_spec);
    j["source"] = tb.bars.source;
    j["shifted_timestamps"] = tb.shifted_timestamps;
    j["bars"] = bar_columns_json(tb.bars, tb.flow);
    return j.dump();
  }
  const auto panel = data::build_tape_panel(tape, bar_spec);
  j["source"] = panel.panel.source;
  j["symbols"] = nlohmann::json::object();
  for (size_t s = 0; s < panel.panel.symbols.size(); ++s)
    j["symbols"][panel.panel.symbols[s].symbol] =
        bar_columns_json(panel.panel.symbols[s].series, panel.flow[s]);
  return j.dump();
}

class PyEnsemble {
 public:
  PyEnsemble(const std::string& dir, const std::string& device, const std::string& rule)
      : dir_(dir),
        e_(ensemble_of(dir, rule, models::to_torch(Device::parse(device, "device")), spec_)) {}
  // A tape through the ensemble (predict --ticks): a decision per closed bar, each with the
  // closing print's time and the latency from its arrival. `spec` "" = the bundles' recorded
  // spec; another is refused. A JSON array of to_json(BarDecision) with close_print_ns and
  // print_to_decision_ns.
  std::string run_tape(const std::string& path, const std::string& spec,
                       const std::string& on_bad) {
    std::ifstream in(path);
    FOXHUNT_CHECK(in.good(), "python", "tape: cannot open '", path, "'");
    serving::TapeStreamOptions o;
    o.source = path;
    o.read = tape_read_of(on_bad);
    o.symbol = e_.symbol();
    const std::optional<data::BarSpec> given =
        spec.empty() ? std::nullopt : std::optional<data::BarSpec>(data::parse_bar_spec(spec));
    FOXHUNT_CHECK(spec_ || given, "python", "the bundles in ", dir_,
                  " record no bar spec (trained on plain bars): expected bar='time:1m' or another "
                  "spec");
    if (spec_ && given)
      FOXHUNT_CHECK(*spec_ == *given, "bundle", "bar spec '", data::to_string(*given),
                    "' differs from '", data::to_string(*spec_), "' that the bundles in ", dir_,
                    " were trained on: expected the same spec");
    o.spec = spec_ ? *spec_ : *given;
    nlohmann::json out = nlohmann::json::array();
    serving::stream_tape(e_.desk(), in, o, serving::StreamOptions{},
                         [&](const std::vector<serving::SymbolBar>&,
                             const std::vector<serving::InstrumentDecision>& ds,
                             const serving::BarClose& close, int64_t latency_ns) {
                           auto j = serving::to_json(ds.front().decision);
                           j["close_print_ns"] = close.print_ns;
                           j["print_to_decision_ns"] = latency_ns;
                           out.push_back(std::move(j));
                         });
    return out.dump();
  }
  // The bar spec the bundles record ("" = plain bars).
  std::string bar_spec() const { return spec_ ? data::to_string(*spec_) : std::string(); }
  // Feeds the bars in order; returns a JSON array of to_json(BarDecision).
  std::string run(const std::vector<int64_t>& t, const std::vector<double>& o,
                  const std::vector<double>& h, const std::vector<double>& l,
                  const std::vector<double>& c, const std::vector<double>& v) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& bar : bars_of(t, o, h, l, c, v))
      out.push_back(serving::to_json(e_.on_bar(bar)));
    return out.dump();
  }
  std::vector<std::string> models() const { return e_.model_names(); }
  double position() const { return e_.position(); }

 private:
  // The ensemble of DIR's bundles (Ensemble::load), noting the bar spec they record in `spec`.
  static serving::Ensemble ensemble_of(const std::string& dir, const std::string& rule,
                                       const torch::Device& device,
                                       std::optional<data::BarSpec>& spec) {
    auto bundles = serving::load_ensemble_bundles(dir, device);
    spec = serving::recorded_bar_spec(bundles, dir);
    const auto r = rule_of(rule);
    return serving::Ensemble(std::move(bundles), r ? *r : serving::ensemble_rule(dir));
  }

  std::string dir_;
  std::optional<data::BarSpec> spec_;  // before e_: ensemble_of sets it
  serving::Ensemble e_;
};

class PyDesk {
 public:
  PyDesk(const std::string& dir, const std::string& device, const std::string& rule)
      : d_(serving::Desk::load(dir, rule_of(rule),
                               models::to_torch(Device::parse(device, "device")))) {}
  std::string on_timestamp(int64_t timestamp, const std::vector<std::string>& symbols,
                           const std::vector<double>& o, const std::vector<double>& h,
                           const std::vector<double>& l, const std::vector<double>& c,
                           const std::vector<double>& v) {
    const auto bars = bars_of(std::vector<int64_t>(symbols.size(), timestamp), o, h, l, c, v);
    std::vector<serving::SymbolBar> sb;
    for (size_t i = 0; i < bars.size(); ++i) sb.push_back({symbols[i], bars[i]});
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : d_.on_timestamp(timestamp, sb)) out.push_back(serving::to_json(d));
    return out.dump();
  }
  int64_t instruments() const { return d_.instruments(); }
  uint64_t state_bytes() const { return d_.state_bytes(); }

 private:
  serving::Desk d_;
};

std::string plan_json(const std::string& model, const std::string& device,
                      const std::string& profile, double budget_mib, int64_t seq_len) {
  plan::PlanOptions o;
  o.model = model;
  o.train.device = Device::parse(device, "device");
  o.train.seq_len = seq_len;
  o.budget = budget_of(profile, budget_mib)
                 .value_or(memory::Budget::of_profile(memory::kReferenceProfile));
  return plan::plan_batch(o).to_json().dump();
}

std::string budget_json(const std::string& device, const std::string& profile, double budget_mib,
                        double headroom_mib, bool views) {
  plan::BudgetOptions o;
  o.device = Device::parse(device, "device");
  if (auto b = budget_of(profile, budget_mib)) o.budget = *b;
  if (headroom_mib >= 0) o.headroom_bytes = static_cast<uint64_t>(headroom_mib * 1048576.0);
  o.deployment_views = views;
  return plan::validate_budget(o).to_json().dump();
}

std::string train_json(const std::string& model, const std::string& data, const std::string& out,
                       int64_t steps, int64_t epochs, int64_t seed, const std::string& device,
                       const std::string& env, int64_t eval_episodes, const std::string& ticks,
                       const std::string& bar, double periods_per_year) {
  jobs::TrainJob job;
  job.model = model;
  job.data = data;
  if (!ticks.empty()) {
    FOXHUNT_CHECK(!bar.empty(), "python", "ticks: expected a bar spec with it (bar='time:1m')");
    job.ticks = jobs::TapeSource{ticks, data::parse_bar_spec(bar), {}};
  }
  if (periods_per_year > 0) job.periods_per_year = periods_per_year;
  job.out_dir = out;
  job.steps = steps;
  job.epochs = epochs;
  if (seed >= 0) job.seed = static_cast<uint64_t>(seed);
  job.device = Device::parse(device, "device");
  job.progress = train::ProgressMode::kOff;
  job.eval_episodes = eval_episodes;
  if (model == "all") return jobs::to_json(jobs::run_train_all(job)).dump();
  job.env = env;
  return jobs::to_json(jobs::run_train_job(job)).dump();
}

// A class served from a bundle directory: Cls(bundles, device="cpu", rule="").
template <class T>
nb::class_<T> bundles_class(nb::module_& m, const char* name) {
  nb::class_<T> c(m, name);
  c.def(nb::init<const std::string&, const std::string&, const std::string&>(), nb::arg("bundles"),
        nb::arg("device") = "cpu", nb::arg("rule") = "");
  return c;
}

}  // namespace

NB_MODULE(_foxhunt, m) {
  m.doc() = "foxhunt's C++ library (serving, planner, budget, training); use the foxhunt package";
  runtime_init();  // the accounting allocator, before any tensor
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const InputError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.def("version", [] { return std::string(FOXHUNT_VERSION); });
  bundles_class<PyEnsemble>(m, "Ensemble")
      .def("run", &PyEnsemble::run, nb::call_guard<nb::gil_scoped_release>())
      .def("run_tape", &PyEnsemble::run_tape, nb::call_guard<nb::gil_scoped_release>())
      .def("bar_spec", &PyEnsemble::bar_spec)
      .def("models", &PyEnsemble::models)
      .def("position", &PyEnsemble::position);
  bundles_class<PyDesk>(m, "Desk")
      .def("on_timestamp", &PyDesk::on_timestamp, nb::call_guard<nb::gil_scoped_release>())
      .def("instruments", &PyDesk::instruments)
      .def("state_bytes", &PyDesk::state_bytes);
  m.def("plan", &plan_json, nb::call_guard<nb::gil_scoped_release>());
  m.def("budget", &budget_json, nb::call_guard<nb::gil_scoped_release>());
  m.def("train", &train_json, nb::call_guard<nb::gil_scoped_release>());
  m.def("tape_bars", &tape_bars_json, nb::call_guard<nb::gil_scoped_release>());
}
