// foxhunt validate (harness/validate.h) and the output-path checks that run before any work: a
// report that cannot be written fails the run; a --report path with a file in the way is refused
// up front by validate, stress and backtest; stress refuses a bad server option before its first
// scenario.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/harness/validate.h"
#include "test_util.h"

namespace foxhunt::harness {
namespace {

using foxhunt::testing::run_cli;
using foxhunt::testing::TempDir;

TEST(OutputDir, ExistingFilesAndMissingParentsAreRefusedUpFront) {
  TempDir tmp;
  const std::string file = tmp.file("a_file");
  std::ofstream(file) << "x";
  check_output_dir(tmp.path().string(), "--report");         // an existing directory
  check_output_dir(tmp.file("new/deeper/dir"), "--report");  // created later
  foxhunt::testing::expect_input_error([&] { check_output_dir(file, "--report"); }, "io",
                                       {"--report", file, "got an existing file"});
  foxhunt::testing::expect_input_error([&] { check_output_dir(file + "/sub", "--report"); }, "io",
                                       {"cannot be created", "is not a directory"});
  foxhunt::testing::expect_input_error([&] { check_output_dir("", "--report"); }, "io",
                                       {"empty path"});
}

TEST(Validate, AReportThatCannotBeWrittenFailsTheRun) {
  TempDir tmp;
  ValidateOptions o;
  for (const auto& [name, step] : validate_steps())
    if (name != "models") o.skip.push_back(name);
  o.report_dir = tmp.file("report");
  std::ostringstream log;
  {
    const auto ok = run_validate(o, log);
    EXPECT_TRUE(ok.ok()) << log.str();
    EXPECT_TRUE(ok.report_error.empty());
    EXPECT_FALSE(ok.report_path.empty());
  }
  testing_hooks::fail_before_rename = true;  // every atomic write fails before its rename
  const auto failed = run_validate(o, log);
  testing_hooks::fail_before_rename = false;
  EXPECT_TRUE(failed.steps.at(0).ok);
  EXPECT_FALSE(failed.report_error.empty());
  EXPECT_FALSE(failed.ok());
  EXPECT_FALSE(failed.to_json().at("ok").get<bool>());
  // A file where the report directory should be: refused before any step runs.
  const std::string file = tmp.file("in_the_way");
  std::ofstream(file) << "x";
  o.report_dir = file;
  EXPECT_THROW(run_validate(o, log), InputError);
}

TEST(Validate, CliChecksOutputPathsAndOptionsBeforeTheWork) {
  TempDir tmp;
  const std::string file = tmp.file("in_the_way");
  std::ofstream(file) << "x";
  const auto v = run_cli("validate --report " + file);
  EXPECT_EQ(v.exit_code, 2) << v.err;
  EXPECT_NE(v.err.find("got an existing file"), std::string::npos) << v.err;
  EXPECT_EQ(v.out.find("== models"), std::string::npos) << "ran before refusing: " << v.out;
  const auto s = run_cli("stress --scenario concurrent --iterations 5 --report " + file);
  EXPECT_EQ(s.exit_code, 2) << s.err;
  EXPECT_EQ(s.err.find("== concurrent"), std::string::npos) << "ran before refusing: " << s.err;
  // A bad server option stops the run before its first scenario.
  const auto r = run_cli("stress --scenario concurrent,server --iterations 5 --rate -3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("rate: expected arrivals per second > 0, got -3"), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("== concurrent"), std::string::npos) << "ran before refusing: " << r.err;
  const auto b =
      run_cli("backtest --bundles " + tmp.file("none") + " --data " + file + " --report " + file);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find("--report"), std::string::npos) << b.err;
  // An unknown --skip step is refused, naming the steps, before any step runs.
  const auto k = run_cli("validate --skip modles");
  EXPECT_EQ(k.exit_code, 2) << k.err;
  EXPECT_NE(k.err.find("skip 'modles': expected a step name: models, train"), std::string::npos)
      << k.err;
  EXPECT_EQ(k.out.find("== models"), std::string::npos) << "ran before refusing: " << k.out;
}

TEST(Validate, RangeChecksSayWhatWasExpectedInOneShortLine) {
  const auto r = run_cli("train dqn --steps -5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--steps: expected a number > 0, got '-5'"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 160u) << r.err;  // not DBL_MAX written out in 309 digits
  // A negative seed used to wrap around to 2^64 - 1 silently.
  const auto n = run_cli("train dqn --seed -1");
  EXPECT_EQ(n.exit_code, 2);
  EXPECT_NE(n.err.find("--seed: expected a number >= 0, got '-1'"), std::string::npos) << n.err;
  EXPECT_EQ(run_cli("data generate --seed -3 --out x.csv").exit_code, 2);
}

}  // namespace
}  // namespace foxhunt::harness
