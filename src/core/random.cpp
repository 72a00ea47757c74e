#include "foxhunt/core/random.h"

#include <sstream>

#include "foxhunt/core/error.h"

namespace foxhunt {

std::vector<int64_t> Rng::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<size_t>(i)], p[uniform_int(static_cast<uint64_t>(i) + 1)]);
  return p;
}

std::string Rng::state() const {
  std::ostringstream os;
  os << engine_;
  if (has_spare_) os << " spare " << std::hexfloat << spare_;
  return os.str();
}

void Rng::set_state(const std::string& s) {
  std::istringstream is(s);
  std::mt19937_64 g;
  is >> g;
  FOXHUNT_CHECK(!is.fail(), "rng", "checkpoint: unreadable random-stream state");
  std::string tag;
  double spare = 0.0;
  bool has_spare = false;
  if (is >> tag) {
    FOXHUNT_CHECK(tag == "spare", "rng", "checkpoint: unexpected '", tag, "' in a stream state");
    // operator>> does not parse hexfloat portably; strtod does.
    std::string text;
    is >> text;
    char* end = nullptr;
    spare = std::strtod(text.c_str(), &end);
    FOXHUNT_CHECK(!text.empty() && end != nullptr && *end == '\0', "rng",
                  "checkpoint: unreadable cached normal '", text, "'");
    has_spare = true;
  }
  engine_ = g;
  spare_ = spare;
  has_spare_ = has_spare;
}

uint64_t derive_seed(uint64_t base, uint64_t stream) {
  uint64_t z = base + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace foxhunt
