// Device profiles: the built-in catalog, JSON loading (good and bad), lookup errors.
#include "foxhunt/memory/device_profile.h"

#include <gtest/gtest.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"
#include "test_util.h"

namespace foxhunt::memory {
namespace {

using foxhunt::testing::TempDir;

using foxhunt::kMiB;

std::string load_error(const std::string& json) {
  TempDir dir;
  const auto path = dir.file("profiles.json");
  write_file_atomic(path, json);
  try {
    load_profiles(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceProfileTest, CatalogHasTheSevenCardsInOrder) {
  const auto& c = builtin_profiles();
  std::vector<std::string> names;
  for (const auto& p : c) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"rtx3050ti-4gb", "t4-16gb", "a10-24gb", "a100-40gb",
                                             "a100-80gb", "h100-80gb", "h200-141gb"}));
  for (const auto& p : c) {
    EXPECT_GT(p.total_bytes, p.reserve_bytes) << p.name;
    EXPECT_GE(p.reserve_bytes, 300 * kMiB) << p.name;
    EXPECT_LE(p.reserve_bytes, 600 * kMiB) << p.name;
    EXPECT_EQ(p.usable_bytes(), p.total_bytes - p.reserve_bytes) << p.name;
    EXPECT_EQ(p.source, "builtin");
    EXPECT_FALSE(p.description.empty());
  }
}

TEST(DeviceProfileTest, CatalogValues) {
  const auto laptop = find_profile("rtx3050ti-4gb");
  EXPECT_EQ(laptop.total_bytes, 4096 * kMiB);
  EXPECT_EQ(laptop.reserve_bytes, 384 * kMiB);
  EXPECT_EQ(laptop.usable_bytes(), 3712 * kMiB);
  EXPECT_EQ(find_profile("t4-16gb").total_bytes, 15360 * kMiB);
  EXPECT_EQ(find_profile("a100-80gb").total_bytes, 81920 * kMiB);
  EXPECT_EQ(find_profile("h100-80gb").reserve_bytes, 512 * kMiB);
  EXPECT_EQ(find_profile("h200-141gb").total_bytes, 143771 * kMiB);
  // Each card's reported total lies between 90% of its nominal size in GB and the same number
  // in GiB (drivers report a little less than the marketing figure, never more).
  for (const auto& p : builtin_profiles()) {
    const double gb = std::stod(p.name.substr(p.name.rfind('-') + 1));
    EXPECT_GE(static_cast<double>(p.total_bytes), 0.9 * gb * 1e9) << p.name;
    EXPECT_LE(static_cast<double>(p.total_bytes), gb * 1024.0 * 1024.0 * 1024.0) << p.name;
  }
}

TEST(DeviceProfileTest, UnknownNameListsTheKnownOnes) {
  try {
    find_profile("rtx4090");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rtx4090"), std::string::npos) << m;
    EXPECT_NE(m.find("rtx3050ti-4gb"), std::string::npos) << m;
    EXPECT_NE(m.find("h200-141gb"), std::string::npos) << m;
  }
}

TEST(DeviceProfileTest, BudgetOfAProfileIsItsUsableBytesWithItsReserve) {
  const auto p = find_profile(kReferenceProfile);
  const auto b = Budget::of_profile(kReferenceProfile);
  EXPECT_EQ(b.bytes, p.usable_bytes());
  EXPECT_EQ(b.source, std::string(kReferenceProfile) + " usable");
  EXPECT_EQ(b.reserve_bytes, p.reserve_bytes);
  EXPECT_GT(b.reserve_bytes, 0u);
  EXPECT_THROW(Budget::of_profile("rtx4090"), InputError);
  const auto given = Budget::of_bytes(1234, "--budget-mib");
  EXPECT_EQ(given.bytes, 1234u);
  EXPECT_EQ(given.source, "--budget-mib");
  EXPECT_EQ(given.reserve_bytes, 0u);
  EXPECT_EQ(Budget{}.source, "custom");
}

TEST(DeviceProfileTest, TheBudgetFlagsAreOneSetOnEveryCommand) {
  using foxhunt::testing::run_cli;
  // train and stress take the same three flags as plan and budget: --profiles registers a card,
  // --device-profile picks it, --budget-mib excludes it; a bad value is a usage error.
  TempDir dir;
  const auto cards = dir.file("cards.json");
  write_file_atomic(cards,
                    R"({"profiles": [{"name": "tiny-1mb", "total_mib": 1, "reserve_mib": 0}]})");
  for (const std::string cmd :
       {"train dqn --steps 10 --progress off", "stress --scenario concurrent --iterations 2"}) {
    auto r = run_cli(cmd + " --budget-mib -1");
    EXPECT_EQ(r.exit_code, 2) << cmd << r.err;
    EXPECT_NE(r.err.find("--budget-mib"), std::string::npos) << cmd << r.err;
    r = run_cli(cmd + " --budget-mib 4 --device-profile t4-16gb");
    EXPECT_EQ(r.exit_code, 2) << cmd << r.err;
    r = run_cli(cmd + " --device-profile nosuchcard");
    EXPECT_EQ(r.exit_code, 2) << cmd << r.err;
    EXPECT_NE(r.err.find("rtx3050ti-4gb"), std::string::npos) << cmd << r.err;
    // The registered 1 MiB card is found and enforced: the run runs out of memory (exit 1).
    const std::string out = cmd.rfind("train", 0) == 0 ? " --out " + dir.file("o") : "";
    r = run_cli(cmd + " --profiles " + cards + " --device-profile tiny-1mb" + out);
    EXPECT_EQ(r.exit_code, 1) << cmd << r.out << r.err;
    EXPECT_NE(r.err.find("out of memory"), std::string::npos) << cmd << r.err;
  }
}

TEST(DeviceProfileTest, LoadsAGoodFile) {
  TempDir dir;
  const auto path = dir.file("cards.json");
  write_file_atomic(path, R"({"profiles": [
      {"name": "l4-24gb", "description": "NVIDIA L4", "total_mib": 23034, "reserve_mib": 448},
      {"name": "tiny", "total_bytes": 1000000, "reserve_bytes": 1000},
      {"name": "defaults", "total_mib": 2048}]})");
  const auto ps = load_profiles(path);
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].name, "l4-24gb");
  EXPECT_EQ(ps[0].total_bytes, 23034 * kMiB);
  EXPECT_EQ(ps[0].reserve_bytes, 448 * kMiB);
  EXPECT_EQ(ps[0].source, path);
  EXPECT_EQ(ps[1].usable_bytes(), 999000u);
  EXPECT_EQ(ps[2].reserve_bytes, kDefaultReserveBytes);
  const auto j = to_json(ps[0]);
  EXPECT_EQ(j["usable_bytes"].get<std::uint64_t>(), (23034 - 448) * kMiB);
}

TEST(DeviceProfileTest, RegisteredProfilesAreFound) {
  DeviceProfile p;
  p.name = "profiletest-card";
  p.total_bytes = 8 * 1024 * kMiB;
  p.reserve_bytes = 256 * kMiB;
  p.source = "test";
  register_profiles({p});
  EXPECT_EQ(find_profile("profiletest-card").usable_bytes(), (8 * 1024 - 256) * kMiB);
  EXPECT_THROW(register_profiles({p}), InputError);  // already there
  DeviceProfile shadow = p;
  shadow.name = "t4-16gb";
  EXPECT_THROW(register_profiles({shadow}), InputError);
  EXPECT_EQ(profile_catalog().size(), builtin_profiles().size() + 1);
}

TEST(DeviceProfileTest, BadFilesAreClearErrors) {
  EXPECT_NE(load_error("{not json").find("not valid JSON"), std::string::npos);
  // A number JSON cannot hold is bad input too (found by fuzz/device_profiles.cpp: the parser's
  // out_of_range escaped as a raw JSON exception).
  EXPECT_NE(
      load_error(R"({"profiles": [{"name": "a", "total_mib": 1e999999}]})").find("not valid JSON"),
      std::string::npos);
  EXPECT_NE(load_error("[]").find("expected an object"), std::string::npos);
  EXPECT_NE(load_error(R"({"profiles": []})").find("empty"), std::string::npos);
  EXPECT_NE(load_error(R"({"profiles": [], "x": 1})").find("unknown top-level key 'x'"),
            std::string::npos);
  auto e = load_error(R"({"profiles": [{"name": "a", "total_mib": 1000}, {"total_mib": 5000}]})");
  EXPECT_NE(e.find("profiles[1]"), std::string::npos) << e;
  EXPECT_NE(e.find("'name'"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a"}]})");
  EXPECT_NE(e.find("missing 'total_bytes' or 'total_mib'"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a", "total_mib": -4}]})");
  EXPECT_NE(e.find("non-negative integer"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a", "total_mib": "4096"}]})");
  EXPECT_NE(e.find("'total_mib'"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a", "total_mib": 100, "total_bytes": 5}]})");
  EXPECT_NE(e.find("not both"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a", "total_mib": 256, "reserve_mib": 256}]})");
  EXPECT_NE(e.find("reserve: expected less than the total"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "Bad Name", "total_mib": 256}]})");
  EXPECT_NE(e.find("[a-z0-9._-]"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "a", "total_mib": 256, "vram": 1}]})");
  EXPECT_NE(e.find("unknown key 'vram'"), std::string::npos) << e;
  e = load_error(R"({"profiles": [{"name": "t4-16gb", "total_mib": 2048}]})");
  EXPECT_NE(e.find("built-in"), std::string::npos) << e;
  e = load_error(
      R"({"profiles": [{"name": "a", "total_mib": 1000}, {"name": "a", "total_mib": 2000}]})");
  EXPECT_NE(e.find("earlier entry"), std::string::npos) << e;
  EXPECT_THROW(load_profiles("/nonexistent/profiles.json"), InputError);
}

TEST(DeviceProfileTest, CliListsTheCatalog) {
  using foxhunt::testing::run_cli;
  auto r = run_cli("devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["profiles"].size(), builtin_profiles().size());
  EXPECT_EQ(j["profiles"][0]["name"], "rtx3050ti-4gb");
  EXPECT_EQ(j["profiles"][0]["usable_bytes"].get<std::uint64_t>(), 3712 * kMiB);

  r = run_cli("devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("h200-141gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4.00 GiB"), std::string::npos) << r.out;

  TempDir dir;
  const auto good = dir.file("cards.json");
  write_file_atomic(good, R"({"profiles": [{"name": "l4-24gb", "total_mib": 23034}]})");
  r = run_cli("devices --json --profiles " + good);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["profiles"].back()["name"], "l4-24gb");

  const auto bad = dir.file("bad.json");
  write_file_atomic(bad, R"({"profiles": [{"name": "x"}]})");
  r = run_cli("devices --profiles " + bad);
  EXPECT_EQ(r.exit_code, 2) << "bad input exits 2";
  EXPECT_NE(r.err.find("missing 'total_bytes' or 'total_mib'"), std::string::npos) << r.err;

  r = run_cli("devices --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--json"), std::string::npos);
}

}  // namespace
}  // namespace foxhunt::memory
