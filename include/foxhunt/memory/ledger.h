#pragma once
/// \file ledger.h
/// Exact CPU memory accounting in MLX's spirit: live and peak bytes, allocation counts, owner/tag
/// scopes, a hard cap that throws foxhunt::OutOfMemoryError, and explicit accounting for bytes
/// that bypass the allocator. Torch-free on purpose.
///
/// How it works: install_ledger() puts an accounting allocator over LibTorch's CPU allocator
/// (c10::SetCPUAllocator at priority kLedgerPriority). Each allocation gets a 64-byte header in
/// front of the data (keeps LibTorch's 64-byte alignment) that records its size and the scope that
/// made it, so the free is credited back exactly, to the right owner, from any thread.
///
/// What is counted ("live bytes"): the bytes LibTorch asked for (numel x element size, rounded the
/// way LibTorch rounds storage), not the 64-byte header, not malloc's own slack. Tensors created
/// before install_ledger() are never counted; foxhunt::runtime_init() installs it first thing.
/// Zero-byte allocations are not counted. Bytes that never pass through the CPU allocator
/// (torch::from_blob, QNNPACK/oneDNN prepacked weights and scratch, CUDA memory) are invisible to
/// the ledger: declare them with add_external() (reported apart, labelled kExternalLabel) or use
/// cuda_memory.h for CUDA.
///
/// Example:
///   foxhunt::memory::MemoryScope tft("tft");
///   auto before = foxhunt::memory::live_bytes();
///   auto t = torch::zeros({256, 1024});           // 1 MiB
///   // live_bytes() - before == 1048576, scope_stats("tft").live_bytes includes it

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/no_copy.h"

namespace foxhunt::memory {

/// Priority passed to c10::SetCPUAllocator; LibTorch's default allocator registers at 0 and a
/// later install at a lower priority is silently ignored.
inline constexpr std::uint8_t kLedgerPriority = 200;

/// Label used in every report for bytes declared with add_external().
inline constexpr const char* kExternalLabel = "external (not allocator-tracked)";

/// Process-wide counters of the accounting allocator.
struct LedgerStats {
  std::uint64_t live_bytes = 0;   ///< bytes currently allocated through the ledger
  std::uint64_t peak_bytes = 0;   ///< max of live_bytes since start or the last reset_peak()
  std::uint64_t alloc_count = 0;  ///< counted allocations since start
  std::uint64_t free_count = 0;   ///< counted frees since start
};

/// Counters of one owner scope. A scope's numbers include those of all its children
/// ("tft" includes "tft/optimizer"), so the top-level scopes partition the scoped bytes.
struct ScopeStats {
  std::string name;               ///< full path, e.g. "tft/optimizer"
  std::uint64_t live_bytes = 0;   ///< bytes allocated in this scope (or a child) still alive
  std::uint64_t peak_bytes = 0;   ///< max of live_bytes since creation or the last reset_peak()
  std::uint64_t alloc_count = 0;  ///< allocations made in this scope or a child
  std::uint64_t free_count = 0;   ///< frees of those allocations (wherever they happened)
};

/// Bytes declared by hand for memory the allocator never sees.
struct ExternalEntry {
  std::string tag;          ///< owner tag, e.g. "tft/int8-prepacked"
  std::uint64_t bytes = 0;  ///< bytes currently declared under the tag
};

/// One allocation the cap refused.
struct Refusal {
  std::uint64_t requested = 0;  ///< bytes asked for
  std::uint64_t live = 0;       ///< live + external bytes at the moment of the refusal
  std::uint64_t limit = 0;      ///< the cap in force
  std::string scope;            ///< innermost scope of the refused allocation ("" when none)
  std::string message;          ///< the full "[memory] out of memory: ..." text
};

// ---- installation ----------------------------------------------------------------------------

/// True once install_ledger() has run and LibTorch's CPU allocator is the ledger.
bool ledger_installed();
/// Installs the accounting allocator over LibTorch's CPU allocator. Idempotent and thread-safe,
/// but must run before any tensor exists to count everything (runtime_init() does it).
void install_ledger();

/// Turns accounting on or off for new allocations and returns the previous setting. While off,
/// allocations take the raw c10::alloc_cpu path (no header, no counters, no cap); frees of blocks
/// allocated while on are still credited. Meant for overhead measurements only.
bool set_accounting_enabled(bool enabled);
/// Whether new allocations are being counted.
bool accounting_enabled();

// ---- process-wide counters -------------------------------------------------------------------

/// All process-wide counters at once.
LedgerStats ledger_stats();
/// Bytes currently allocated through the ledger.
std::uint64_t live_bytes();
/// Max live bytes since start or the last reset_peak().
std::uint64_t peak_bytes();
/// Sets the peak to the current live bytes, process-wide and for every scope.
void reset_peak();

// ---- the hard cap ----------------------------------------------------------------------------

/// Sets the cap (0 = none) and returns the previous one. An allocation that would take
/// live_bytes() + external_bytes() over the cap throws foxhunt::OutOfMemoryError (LibTorch may
/// wrap it in c10::Error on the way out; see translate_oom). Lowering the cap below the current
/// live bytes frees nothing: it only refuses new allocations.
std::uint64_t set_limit(std::uint64_t bytes);
/// The cap in force (0 = none).
std::uint64_t get_limit();

/// RAII: sets a cap for its lifetime and restores the previous one.
class LimitGuard {
 public:
  /// Sets the cap to `bytes` (0 = none).
  explicit LimitGuard(std::uint64_t bytes) : previous_(set_limit(bytes)) {}
  ~LimitGuard() { set_limit(previous_); }
  FOXHUNT_NO_COPY(LimitGuard);
  /// The cap that will be restored.
  std::uint64_t previous() const { return previous_; }

 private:
  std::uint64_t previous_ = 0;
};

// ---- refusals and the typed error ------------------------------------------------------------

/// Number of allocations the cap has refused since start, process-wide.
std::uint64_t refusal_count();
/// The last refusal on the calling thread, if any since the last clear_last_refusal().
std::optional<Refusal> last_refusal();
/// Forgets the calling thread's last refusal.
void clear_last_refusal();

/// Drops what a backward that failed on this thread left queued in LibTorch's autograd engine
/// (its nodes' saved tensors and pending gradient buffers stay counted as live until the thread's
/// next backward otherwise) by running one trivial backward. rethrow_if_oom and translate_oom
/// call it for every out-of-memory error, so a refused step leaves the ledger at its base.
void release_failed_backward() noexcept;

/// If `error` is (or wraps) an out-of-memory condition — a ledger refusal that LibTorch re-threw
/// as c10::Error, or a CUDA caching-allocator c10::OutOfMemoryError — throws the equivalent
/// foxhunt::OutOfMemoryError (with requested/live/limit when known). Otherwise returns, and the
/// caller rethrows the original. A foxhunt::OutOfMemoryError is rethrown as is.
void rethrow_if_oom(std::exception_ptr error);

/// Runs `f()` and turns any out-of-memory failure inside it into foxhunt::OutOfMemoryError,
/// whatever LibTorch wrapped around it; other exceptions pass through unchanged.
/// Example: memory::translate_oom([&] { loss.backward(); });
template <typename F>
decltype(auto) translate_oom(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const OutOfMemoryError&) {
    release_failed_backward();
    throw;
  } catch (...) {
    rethrow_if_oom(std::current_exception());
    throw;
  }
}

// ---- owner scopes ----------------------------------------------------------------------------

/// RAII owner tag. Allocations made on this thread while the scope is the innermost one are
/// attributed to it (and, through the name hierarchy, to its parents). Nested scopes compose
/// their names: MemoryScope("tft") then MemoryScope("optimizer") is "tft/optimizer"; a name that
/// already contains '/' adds several levels. Frees are credited to the allocating scope wherever
/// they happen. Scopes are per thread: worker threads start with no scope. Scope counters live for
/// the whole process (a scope name is cheap to reuse).
class MemoryScope {
 public:
  /// Enters scope `name` (non-empty, no empty path components) under the current one.
  explicit MemoryScope(std::string_view name);
  ~MemoryScope();
  FOXHUNT_NO_COPY(MemoryScope);
  /// Full path of this scope, e.g. "tft/optimizer".
  const std::string& name() const;

 private:
  void* record_;    // the scope's counters (opaque: keeps the header torch- and detail-free)
  void* previous_;  // the scope that was current before this one
};

/// Full path of the calling thread's innermost scope ("" when none).
std::string current_scope();
/// Counters of scope `name` (full path). A name never used reports zeros.
ScopeStats scope_stats(std::string_view name);
/// Counters of every scope ever entered, sorted by name.
std::vector<ScopeStats> scope_snapshot();

// ---- bytes that bypass the allocator ---------------------------------------------------------

/// Declares `bytes` more under `tag` for memory the allocator never sees (from_blob buffers,
/// prepacked quantized weights). Counted by the cap, reported apart from live_bytes().
void add_external(std::string_view tag, std::uint64_t bytes);
/// Withdraws `bytes` from `tag`; throws foxhunt::InputError when more than declared.
void remove_external(std::string_view tag, std::uint64_t bytes);
/// Declares `bytes` more under `tag` like add_external(), but against the cap: when
/// live_bytes() + external_bytes() + `bytes` would exceed get_limit(), nothing is declared and
/// foxhunt::OutOfMemoryError is thrown (recorded as a refusal, like an allocator refusal). Used
/// for host buffers a trainer is about to allocate outside LibTorch (the DQN replay buffer, the
/// environments' copies of the market): declared first, so an over-budget buffer is refused
/// before it exists.
void reserve_external(std::string_view tag, std::uint64_t bytes);
/// Sum of all declared external bytes.
std::uint64_t external_bytes();
/// The declared external bytes per tag (tags at zero are omitted), sorted by tag.
std::vector<ExternalEntry> external_snapshot();

/// RAII form of reserve_external(): declares the bytes on construction (throwing
/// OutOfMemoryError over the cap) and withdraws them on destruction. Movable; 0 bytes declares
/// nothing.
class ExternalReservation {
 public:
  /// No reservation.
  ExternalReservation() = default;
  /// reserve_external(tag, bytes).
  ExternalReservation(std::string tag, std::uint64_t bytes) : tag_(std::move(tag)), bytes_(bytes) {
    if (bytes_ > 0) reserve_external(tag_, bytes_);
  }
  ~ExternalReservation() { release(); }
  ExternalReservation(ExternalReservation&& o) noexcept
      : tag_(std::move(o.tag_)), bytes_(std::exchange(o.bytes_, 0)) {}
  ExternalReservation& operator=(ExternalReservation&& o) noexcept {
    if (this != &o) {
      release();
      tag_ = std::move(o.tag_);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  FOXHUNT_NO_COPY(ExternalReservation);
  /// The tag ("" when none).
  const std::string& tag() const { return tag_; }
  /// Bytes declared (0 when none).
  std::uint64_t bytes() const { return bytes_; }

 private:
  void release() noexcept {
    if (bytes_ > 0) remove_external(tag_, bytes_);
    bytes_ = 0;
  }
  std::string tag_;
  std::uint64_t bytes_ = 0;
};

}  // namespace foxhunt::memory
