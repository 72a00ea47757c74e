#include "foxhunt/memory/ledger.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>

#include "foxhunt/core/log.h"
#include "foxhunt/core/units.h"

namespace foxhunt::memory {

namespace {

// ---- scope records ---------------------------------------------------------------------------

// Counters of one scope path. Records are created on first use and never destroyed, so a block
// header can keep a raw pointer to the record that must be credited when the block is freed.
struct ScopeRecord {
  std::string name;
  ScopeRecord* parent = nullptr;  // "net" for "net/optimizer"; null for a top-level scope
  std::atomic<std::uint64_t> live{0};
  std::atomic<std::uint64_t> peak{0};
  std::atomic<std::uint64_t> allocs{0};
  std::atomic<std::uint64_t> frees{0};
};

struct ScopeRegistry {
  std::mutex mutex;
  std::map<std::string, std::unique_ptr<ScopeRecord>, std::less<>> records;
};

// Leaked on purpose: blocks freed during static destruction still credit their scope.
ScopeRegistry& scope_registry() {
  static auto* r = new ScopeRegistry;
  return *r;
}

// Returns the record of `path`, creating it and its ancestors. Caller holds the mutex.
ScopeRecord* get_or_create_locked(ScopeRegistry& reg, const std::string& path) {
  auto it = reg.records.find(path);
  if (it != reg.records.end()) return it->second.get();
  ScopeRecord* parent = nullptr;
  const auto slash = path.rfind('/');
  if (slash != std::string::npos) parent = get_or_create_locked(reg, path.substr(0, slash));
  auto rec = std::make_unique<ScopeRecord>();
  rec->name = path;
  rec->parent = parent;
  ScopeRecord* raw = rec.get();
  reg.records.emplace(path, std::move(rec));
  return raw;
}

thread_local ScopeRecord* t_current_scope = nullptr;

// ---- process-wide counters (constant-initialised: usable before main) -----------------------

constinit std::atomic<std::uint64_t> g_live{0};
constinit std::atomic<std::uint64_t> g_peak{0};
constinit std::atomic<std::uint64_t> g_allocs{0};
constinit std::atomic<std::uint64_t> g_frees{0};
constinit std::atomic<std::uint64_t> g_limit{0};
constinit std::atomic<std::uint64_t> g_external{0};
constinit std::atomic<std::uint64_t> g_refusals{0};
constinit std::atomic<bool> g_enabled{true};
constinit std::atomic<bool> g_installed{false};

void update_peak(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t p = peak.load(std::memory_order_relaxed);
  while (value > p && !peak.compare_exchange_weak(p, value, std::memory_order_relaxed)) {
  }
}

// ---- refusals --------------------------------------------------------------------------------

// Every refusal message contains this; it survives LibTorch's re-wrapping into c10::Error.
constexpr std::string_view kOomMarker = "[memory] out of memory";

thread_local std::optional<Refusal> t_last_refusal;

struct GlobalRefusal {
  std::mutex mutex;
  std::optional<Refusal> last;
};
GlobalRefusal& global_refusal() {
  static auto* g = new GlobalRefusal;
  return *g;
}

[[noreturn]] void refuse(std::uint64_t requested, std::uint64_t in_use, std::uint64_t limit,
                         std::string_view what = "allocation") {
  Refusal r;
  r.requested = requested;
  r.live = in_use;
  r.limit = limit;
  r.scope = t_current_scope ? t_current_scope->name : "";
  r.message = detail::cat("out of memory: ", what, " of ", human_bytes(double(requested)), " (",
                          requested, " B)", r.scope.empty() ? "" : " in scope '", r.scope,
                          r.scope.empty() ? "" : "'", " refused: ", human_bytes(double(in_use)),
                          " (", in_use, " B) in use would exceed the cap of ",
                          human_bytes(double(limit)), " (", limit, " B)");
  g_refusals.fetch_add(1, std::memory_order_relaxed);
  {
    auto& g = global_refusal();
    std::lock_guard<std::mutex> lock(g.mutex);
    g.last = r;
  }
  t_last_refusal = r;
  throw OutOfMemoryError("memory", r.message, requested, in_use, limit);
}

// Adds `n` to the live bytes, refusing when the cap would be exceeded. Exact under concurrency:
// with a cap, the check and the add are one CAS, so the cap is never overshot.
void reserve(std::uint64_t n) {
  const std::uint64_t limit = g_limit.load(std::memory_order_relaxed);
  std::uint64_t now;
  if (limit == 0) {
    now = g_live.fetch_add(n, std::memory_order_relaxed) + n;
  } else {
    std::uint64_t cur = g_live.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t in_use = cur + g_external.load(std::memory_order_relaxed);
      if (in_use > limit || n > limit - in_use) refuse(n, in_use, limit);
      if (g_live.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed)) break;
    }
    now = cur + n;
  }
  update_peak(g_peak, now);
  g_allocs.fetch_add(1, std::memory_order_relaxed);
}

// ---- the allocator ---------------------------------------------------------------------------

constexpr std::uint64_t kMagic = 0x466f786875e7a11cULL;

// Sits in front of every counted block. 64 bytes keep the data at LibTorch's 64-byte alignment.
struct BlockHeader {
  std::uint64_t magic;
  std::uint64_t size;
  ScopeRecord* scope;
  std::uint64_t pad[5];
};
static_assert(sizeof(BlockHeader) == 64, "the header must keep 64-byte alignment");
constexpr std::size_t kHeader = sizeof(BlockHeader);

void ledger_delete(void* data) {
  if (data == nullptr) return;
  auto* h = reinterpret_cast<BlockHeader*>(static_cast<char*>(data) - kHeader);
  if (h->magic != kMagic) {
    // A deleter cannot throw; a wrong magic means memory corruption or a foreign pointer. The
    // report is formatted on the stack (the heap may be what is corrupt); log() does not throw.
    // Inline storage: this short message never reaches the heap.
    fmt::basic_memory_buffer<char, 96> text;
    fmt::format_to(std::back_inserter(text), "ledger_delete: bad block header at {} (bug)",
                   static_cast<const void*>(data));
    foxhunt::log(LogLevel::kError, "memory", std::string_view(text.data(), text.size()));
    std::abort();
  }
  const std::uint64_t n = h->size;
  for (ScopeRecord* r = h->scope; r != nullptr; r = r->parent) {
    r->live.fetch_sub(n, std::memory_order_relaxed);
    r->frees.fetch_add(1, std::memory_order_relaxed);
  }
  g_live.fetch_sub(n, std::memory_order_relaxed);
  g_frees.fetch_add(1, std::memory_order_relaxed);
  h->magic = 0;
  c10::free_cpu(h);
}

class LedgerAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &ledger_delete, cpu};
    if (!g_enabled.load(std::memory_order_relaxed)) {
      void* p = c10::alloc_cpu(n);
      return {p, p, &c10::free_cpu, cpu};
    }
    reserve(n);
    void* base = nullptr;
    try {
      base = c10::alloc_cpu(n + kHeader);
    } catch (...) {
      g_live.fetch_sub(n, std::memory_order_relaxed);
      g_allocs.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
    auto* h = static_cast<BlockHeader*>(base);
    h->magic = kMagic;
    h->size = n;
    h->scope = t_current_scope;
    for (ScopeRecord* r = h->scope; r != nullptr; r = r->parent) {
      update_peak(r->peak, r->live.fetch_add(n, std::memory_order_relaxed) + n);
      r->allocs.fetch_add(1, std::memory_order_relaxed);
    }
    void* data = static_cast<char*>(base) + kHeader;
    return {data, data, &ledger_delete, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &ledger_delete; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

ScopeStats to_stats(const ScopeRecord& r) {
  ScopeStats s;
  s.name = r.name;
  s.live_bytes = r.live.load(std::memory_order_relaxed);
  s.peak_bytes = r.peak.load(std::memory_order_relaxed);
  s.alloc_count = r.allocs.load(std::memory_order_relaxed);
  s.free_count = r.frees.load(std::memory_order_relaxed);
  return s;
}

void check_scope_name(std::string_view name) {
  FOXHUNT_CHECK(!name.empty(), "memory", "scope name: expected a non-empty name, got \"\"");
  FOXHUNT_CHECK(
      name.front() != '/' && name.back() != '/' && name.find("//") == std::string_view::npos,
      "memory", "scope name: expected components separated by single '/', got \"", name, "\"");
}

// ---- external bytes --------------------------------------------------------------------------

struct ExternalRegistry {
  std::mutex mutex;
  std::map<std::string, std::uint64_t, std::less<>> bytes;
};
ExternalRegistry& external_registry() {
  static auto* r = new ExternalRegistry;
  return *r;
}

}  // namespace

// ---- installation ----------------------------------------------------------------------------

bool ledger_installed() {
  return g_installed.load(std::memory_order_acquire);
}

void install_ledger() {
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* allocator = new LedgerAllocator;  // owned by LibTorch's registry for good
    c10::SetCPUAllocator(allocator, kLedgerPriority);
    if (c10::GetCPUAllocator() != allocator)
      FOXHUNT_FAIL("memory",
                   "could not install the accounting allocator: another CPU allocator was "
                   "registered with a priority above ",
                   int(kLedgerPriority));
    g_installed.store(true, std::memory_order_release);
  });
}

bool set_accounting_enabled(bool enabled) {
  return g_enabled.exchange(enabled);
}
bool accounting_enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

// ---- counters --------------------------------------------------------------------------------

LedgerStats ledger_stats() {
  LedgerStats s;
  s.live_bytes = g_live.load(std::memory_order_relaxed);
  s.peak_bytes = g_peak.load(std::memory_order_relaxed);
  s.alloc_count = g_allocs.load(std::memory_order_relaxed);
  s.free_count = g_frees.load(std::memory_order_relaxed);
  return s;
}

std::uint64_t live_bytes() {
  return g_live.load(std::memory_order_relaxed);
}
std::uint64_t peak_bytes() {
  return g_peak.load(std::memory_order_relaxed);
}

void reset_peak() {
  g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
  auto& reg = scope_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  for (auto& [name, r] : reg.records) r->peak.store(r->live.load(std::memory_order_relaxed));
}

// ---- cap -------------------------------------------------------------------------------------

std::uint64_t set_limit(std::uint64_t bytes) {
  return g_limit.exchange(bytes);
}
std::uint64_t get_limit() {
  return g_limit.load(std::memory_order_relaxed);
}

// ---- refusals --------------------------------------------------------------------------------

std::uint64_t refusal_count() {
  return g_refusals.load(std::memory_order_relaxed);
}
std::optional<Refusal> last_refusal() {
  return t_last_refusal;
}
void clear_last_refusal() {
  t_last_refusal.reset();
}

void release_failed_backward() noexcept {
  // LibTorch's autograd engine leaves the tasks a failed backward had queued (the nodes, with
  // their saved tensors, and the gradient buffers waiting for them) in the calling thread's ready
  // queue; the thread's next backward pops and drops them. Without this, an out-of-memory error
  // in one branch of a backward (PPO's value head while the policy head waits) left ~0.4 MB
  // counted as live until the next training step, and a planner measurement taken in between
  // started from a wrong base.
  try {
    at::AutoGradMode grad(true);
    auto t = torch::ones({1}, torch::requires_grad());
    (t * 2.0).sum().backward();
  } catch (...) {  // a refusal of these few bytes under the cap: nothing more to release
  }
}

void rethrow_if_oom(std::exception_ptr error) {
  if (!error) return;
  try {
    std::rethrow_exception(error);
  } catch (const OutOfMemoryError&) {
    release_failed_backward();
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    // The CUDA caching allocator's own OOM: the device (or setMemoryFraction's cap) is full.
    release_failed_backward();
    throw OutOfMemoryError("cuda", std::string("out of memory: ") + e.what_without_backtrace(), 0,
                           0, 0);
  } catch (const std::exception& e) {
    const std::string_view what = e.what();
    if (what.find(kOomMarker) == std::string_view::npos) return;
    release_failed_backward();
    // A ledger refusal re-thrown by LibTorch: recover the exact numbers from the record whose
    // message it carries (this thread's first; a refusal on an intra-op thread is global).
    std::optional<Refusal> r = t_last_refusal;
    if (!r || what.find(r->message) == std::string_view::npos) {
      auto& g = global_refusal();
      std::lock_guard<std::mutex> lock(g.mutex);
      r = g.last;
    }
    if (r && what.find(r->message) != std::string_view::npos)
      throw OutOfMemoryError("memory", r->message, r->requested, r->live, r->limit);
    const auto pos = what.find(kOomMarker) + std::string_view("[memory] ").size();
    const auto end = what.find('\n', pos);
    throw OutOfMemoryError("memory", std::string(what.substr(pos, end - pos)), 0, 0, get_limit());
  } catch (...) {
    return;
  }
}

// ---- scopes ----------------------------------------------------------------------------------

MemoryScope::MemoryScope(std::string_view name) {
  check_scope_name(name);
  std::string path =
      t_current_scope ? t_current_scope->name + "/" + std::string(name) : std::string(name);
  auto& reg = scope_registry();
  ScopeRecord* rec;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    rec = get_or_create_locked(reg, path);
  }
  previous_ = t_current_scope;
  record_ = rec;
  t_current_scope = rec;
}

MemoryScope::~MemoryScope() {
  t_current_scope = static_cast<ScopeRecord*>(previous_);
}

const std::string& MemoryScope::name() const {
  return static_cast<ScopeRecord*>(record_)->name;
}

std::string current_scope() {
  return t_current_scope ? t_current_scope->name : std::string();
}

ScopeStats scope_stats(std::string_view name) {
  auto& reg = scope_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.records.find(name);
  if (it == reg.records.end()) {
    ScopeStats s;
    s.name = std::string(name);
    return s;
  }
  return to_stats(*it->second);
}

std::vector<ScopeStats> scope_snapshot() {
  auto& reg = scope_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<ScopeStats> out;
  out.reserve(reg.records.size());
  for (const auto& [name, r] : reg.records) out.push_back(to_stats(*r));
  return out;  // std::map keeps them sorted by name
}

// ---- external --------------------------------------------------------------------------------

void add_external(std::string_view tag, std::uint64_t bytes) {
  FOXHUNT_CHECK(!tag.empty(), "memory", "add_external: expected a non-empty tag");
  auto& reg = external_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.bytes.find(tag);
  if (it == reg.bytes.end()) it = reg.bytes.emplace(std::string(tag), 0).first;
  it->second += bytes;
  g_external.fetch_add(bytes, std::memory_order_relaxed);
}

void reserve_external(std::string_view tag, std::uint64_t bytes) {
  FOXHUNT_CHECK(!tag.empty(), "memory", "reserve_external: expected a non-empty tag");
  auto& reg = external_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  const std::uint64_t limit = g_limit.load(std::memory_order_relaxed);
  if (limit > 0) {
    const std::uint64_t in_use =
        g_live.load(std::memory_order_relaxed) + g_external.load(std::memory_order_relaxed);
    if (in_use > limit || bytes > limit - in_use)
      refuse(bytes, in_use, limit, detail::cat("external buffer '", tag, "'"));
  }
  auto it = reg.bytes.find(tag);
  if (it == reg.bytes.end()) it = reg.bytes.emplace(std::string(tag), 0).first;
  it->second += bytes;
  g_external.fetch_add(bytes, std::memory_order_relaxed);
}

void remove_external(std::string_view tag, std::uint64_t bytes) {
  auto& reg = external_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.bytes.find(tag);
  const std::uint64_t have = it == reg.bytes.end() ? 0 : it->second;
  FOXHUNT_CHECK(bytes <= have, "memory", "remove_external('", tag, "'): expected at most ", have,
                " B (declared), got ", bytes, " B");
  if (it == reg.bytes.end()) return;  // removing 0 from an unknown tag
  it->second -= bytes;
  if (it->second == 0) reg.bytes.erase(it);
  g_external.fetch_sub(bytes, std::memory_order_relaxed);
}

std::uint64_t external_bytes() {
  return g_external.load(std::memory_order_relaxed);
}

std::vector<ExternalEntry> external_snapshot() {
  auto& reg = external_registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<ExternalEntry> out;
  for (const auto& [tag, n] : reg.bytes) out.push_back({tag, n});
  return out;
}

}  // namespace foxhunt::memory
