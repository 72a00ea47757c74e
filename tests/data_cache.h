#pragma once
// Where scripts/setup.sh puts the real data files (torch-free, for the data-area tests):
// $FOXHUNT_DATA_DIR, else $XDG_CACHE_HOME/foxhunt, else ~/.cache/foxhunt.
#include <cstdlib>
#include <string>

namespace foxhunt::testing {

/// The data cache's path of `name`.
inline std::string data_cache_file(const std::string& name) {
  if (const char* d = std::getenv("FOXHUNT_DATA_DIR")) return std::string(d) + "/" + name;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string cache = xdg ? xdg : std::string(home ? home : "/root") + "/.cache";
  return cache + "/foxhunt/" + name;
}

/// The E-mini S&P 500 futures tape (mlfinpy 0.1.2's tick_data.csv): 500,000 prints,
/// DateTime,Price,Volume, 2013-09-01 17:00 to 2013-09-03 13:51.
inline std::string emini_tape_csv() {
  return data_cache_file("emini_tick_data.csv");
}

}  // namespace foxhunt::testing
