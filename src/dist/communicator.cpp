// c10d behind foxhunt::dist::Communicator. ProcessGroupGloo's header is guarded by USE_C10D_GLOO,
// which the wheel's CMake config does not define; the pinned wheel is built with Gloo (its
// headers come from Debian's libgloo-dev, see scripts/setup.sh).
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include "foxhunt/dist/communicator.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <netdb.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "foxhunt/core/hash.h"
#include "nccl_backend.h"

namespace foxhunt::dist {

namespace {
constexpr const char* kCommunicatorComponent = "dist";

std::chrono::milliseconds timeout_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// The first line of a c10d message (they carry C++ stack traces after it).
std::string first_line(const char* what) {
  std::string s(what);
  const auto nl = s.find('\n');
  if (nl != std::string::npos) s.resize(nl);
  return s;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// Refuses a host that does not resolve (getaddrinfo, as the rendezvous will), before c10d is
// touched: its TCPStore client would retry and warn for the whole timeout first.
void check_resolves(const std::string& host, const std::string& text, const std::string& flag) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (found) ::freeaddrinfo(found);
  FOXHUNT_CHECK(rc == 0, kCommunicatorComponent, flag, ": host '", host, "' of '", text,
                "' does not resolve (", ::gai_strerror(rc),
                "); expected the name or address of rank 0's machine");
}
}  // namespace

// ---- options ----------------------------------------------------------------------------------

std::pair<std::string, int> parse_host_port(const std::string& text, const std::string& flag) {
  std::string host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    FOXHUNT_CHECK(close != std::string::npos && close + 1 < text.size() && text[close + 1] == ':',
                  kCommunicatorComponent, flag, ": expected [IPv6]:PORT, got '", text, "'");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    FOXHUNT_CHECK(colon != std::string::npos && colon > 0, kCommunicatorComponent, flag,
                  ": expected HOST:PORT (e.g. 127.0.0.1:29500), got '", text, "'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  FOXHUNT_CHECK(!host.empty() && end && *end == '\0' && p >= 1 && p <= 65535,
                kCommunicatorComponent, flag,
                ": expected HOST:PORT with a port in [1, 65535], got '", text, "'");
  return {host, static_cast<int>(p)};
}

void validate(const DistOptions& o) {
  FOXHUNT_CHECK(o.world_size() >= 1, kCommunicatorComponent, "world_size: expected >= 1, got ",
                o.world_size());
  FOXHUNT_CHECK(o.rank() >= 0 && o.rank() < o.world_size(), kCommunicatorComponent,
                "rank: expected a rank in [0, ", o.world_size(), "), got ", o.rank());
  check_resolves(parse_host_port(o.master(), "master").first, o.master(), "master");
  FOXHUNT_CHECK(o.backend() == "auto" || o.backend() == "gloo" || o.backend() == "nccl",
                kCommunicatorComponent, "backend: expected auto, gloo or nccl, got '", o.backend(),
                "'");
  FOXHUNT_CHECK(o.timeout_s() > 0 && std::isfinite(o.timeout_s()), kCommunicatorComponent,
                "timeout_s: expected a positive number of seconds, got ", o.timeout_s());
  FOXHUNT_CHECK(o.bucket_mib() > 0 && std::isfinite(o.bucket_mib()), kCommunicatorComponent,
                "bucket_mib: expected > 0, got ", o.bucket_mib());
  FOXHUNT_CHECK(o.check_interval() >= 0, kCommunicatorComponent,
                "check_interval: expected >= 0, got ", o.check_interval());
}

nlohmann::json to_json(const DistOptions& o) {
  return {{"world_size", o.world_size()},
          {"rank", o.rank()},
          {"master", o.master()},
          {"backend", o.backend()},
          {"timeout_s", o.timeout_s()},
          {"bucket_mib", o.bucket_mib()},
          {"check_interval", o.check_interval()}};
}

std::string resolve_backend(const std::string& backend, const torch::Device& device) {
  if (backend != "auto") return backend;
  return device.is_cuda() ? "nccl" : "gloo";
}

// ---- communicator -----------------------------------------------------------------------------

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> group;
  torch::Device device = torch::kCPU;
};

void PendingWork::wait() {
  if (!wait_) return;
  auto w = std::move(wait_);
  wait_ = nullptr;
  w();
}

Communicator::Communicator(DistOptions o, std::string backend, std::unique_ptr<Impl> impl)
    : o_(std::move(o)), backend_(std::move(backend)), impl_(std::move(impl)) {}

Communicator::~Communicator() = default;

void Communicator::guarded(const char* what, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommunicationError(
        kCommunicatorComponent,
        foxhunt::detail::cat("rank ", o_.rank(), " of ", o_.world_size(), ": ", what,
                             " failed (a peer exited, or did not answer within timeout_s ",
                             o_.timeout_s(), " s): ", first_line(e.what())));
  }
}

std::shared_ptr<Communicator> Communicator::connect(const DistOptions& o,
                                                    const torch::Device& device) {
  validate(o);
  const std::string backend = resolve_backend(o.backend(), device);
  FOXHUNT_CHECK(backend != "nccl" || device.is_cuda(), kCommunicatorComponent,
                "backend nccl needs a CUDA device; on the CPU use gloo");
  const auto [host, port] = parse_host_port(o.master(), "master");
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  const int rank = static_cast<int>(o.rank()), size = static_cast<int>(o.world_size());
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(port);
    so.isServer = rank == 0;
    so.numWorkers = static_cast<size_t>(size);
    so.waitWorkers = true;
    so.timeout = timeout_ms(o.timeout_s());
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, so);
  } catch (const std::exception& e) {
    throw CommunicationError(
        kCommunicatorComponent,
        foxhunt::detail::cat("rank ", rank, " of ", size, ": rendezvous at ", o.master(),
                             " did not complete within timeout_s ", o.timeout_s(), " s (",
                             rank == 0 ? "not every rank connected" : "rank 0 not reachable",
                             "): ", first_line(e.what())));
  }
  try {
    if (backend == "gloo") {
      auto opts = c10d::ProcessGroupGloo::Options::create();
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      if (ifname && *ifname)
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(host))
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(
            host == "localhost" ? "127.0.0.1" : host));
      else
        opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      opts->timeout = timeout_ms(o.timeout_s());
      impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, rank, size, opts);
    } else {
      impl->group = detail::make_nccl_backend(impl->store, rank, size, timeout_ms(o.timeout_s()));
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw CommunicationError(
        kCommunicatorComponent,
        foxhunt::detail::cat("rank ", rank, " of ", size, ": creating the ", backend,
                             " process group failed: ", first_line(e.what())));
  }
  return std::shared_ptr<Communicator>(new Communicator(o, backend, std::move(impl)));
}

PendingWork Communicator::allreduce_sum_async(torch::Tensor& t) {
  FOXHUNT_INTERNAL_ASSERT(t.is_contiguous(), "all-reduce of a non-contiguous tensor");
  c10::intrusive_ptr<c10d::Work> work;
  guarded("all-reduce", [&] {
    std::vector<at::Tensor> v{t};
    work = impl_->group->allreduce(v);
  });
  ++collectives_;
  allreduced_bytes_ += static_cast<int64_t>(t.numel() * t.element_size());
  return PendingWork([this, work] {
    const auto t0 = std::chrono::steady_clock::now();
    guarded("all-reduce", [&] { work->wait(); });
    wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
}

void Communicator::allreduce_sum_(torch::Tensor& t) {
  allreduce_sum_async(t).wait();
}

void Communicator::broadcast_(std::vector<torch::Tensor>& tensors, int64_t root) {
  if (tensors.empty()) return;
  guarded("broadcast", [&] {
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    // Gloo broadcasts one tensor per call.
    for (auto& t : tensors) {
      std::vector<at::Tensor> v{t};
      impl_->group->broadcast(v, bo)->wait();
      ++collectives_;
    }
  });
}

void Communicator::barrier() {
  guarded("barrier", [&] { impl_->group->barrier()->wait(); });
  ++collectives_;
}

std::vector<int64_t> Communicator::allgather(int64_t value) {
  auto t = torch::zeros({o_.world_size()},
                        torch::TensorOptions().dtype(torch::kLong).device(impl_->device));
  t[o_.rank()] = value;
  allreduce_sum_(t);
  auto c = t.to(torch::kCPU);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::vector<std::vector<double>> Communicator::allgather(const std::vector<double>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  auto t = torch::zeros({o_.world_size(), n}, torch::TensorOptions().dtype(torch::kDouble));
  std::memcpy(t[o_.rank()].data_ptr<double>(), values.data(), values.size() * sizeof(double));
  t = t.to(impl_->device);
  allreduce_sum_(t);
  auto c = t.to(torch::kCPU).contiguous();
  std::vector<std::vector<double>> out(static_cast<size_t>(o_.world_size()));
  for (int64_t r = 0; r < o_.world_size(); ++r)
    out[static_cast<size_t>(r)].assign(c.data_ptr<double>() + r * n,
                                       c.data_ptr<double>() + (r + 1) * n);
  return out;
}

// ---- weights ----------------------------------------------------------------------------------

uint64_t weight_checksum(const std::vector<torch::Tensor>& tensors) {
  uint64_t h = kFnv1aOffset;
  for (const auto& t : tensors) {
    if (!t.defined()) continue;
    const auto c = t.detach().to(torch::kCPU).contiguous();
    h = fnv1a_64(static_cast<const unsigned char*>(c.data_ptr()),
                 static_cast<size_t>(c.numel()) * c.element_size(), h);
  }
  return h;
}

std::string checksum_hex(uint64_t v) {
  return fmt::format("0x{:016x}", v);
}

nlohmann::json ChecksumComparison::to_json() const {
  nlohmann::json r = nlohmann::json::array();
  for (auto v : ranks) r.push_back(checksum_hex(static_cast<uint64_t>(v)));
  return {{"step", step},
          {"weight_checksum", checksum_hex(checksum)},
          {"identical", identical},
          {"ranks", r}};
}

ChecksumComparison compare_weights(Communicator& comm, const std::vector<torch::Tensor>& tensors,
                                   int64_t step) {
  ChecksumComparison c;
  c.step = step;
  c.checksum = weight_checksum(tensors);
  c.ranks = comm.allgather(static_cast<int64_t>(c.checksum));
  c.identical = true;
  std::string differ;
  for (size_t r = 1; r < c.ranks.size(); ++r)
    if (c.ranks[r] != c.ranks[0]) {
      c.identical = false;
      differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    }
  FOXHUNT_ENSURE(c.identical, kCommunicatorComponent, "rank ", comm.rank(), ": after step ", step,
                 " the weights of rank(s) ", differ, " differ from rank 0's (checksum ",
                 checksum_hex(static_cast<uint64_t>(c.ranks[0])),
                 "); data-parallel ranks must "
                 "run the same build, options and world size");
  return c;
}

void broadcast_from_rank0(Communicator& comm, std::vector<torch::Tensor> tensors) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> defined;
  for (auto& t : tensors)
    if (t.defined() && t.numel() > 0) {
      FOXHUNT_INTERNAL_ASSERT(t.is_contiguous(), "broadcast of a non-contiguous parameter");
      defined.push_back(t);
    }
  comm.broadcast_(defined, 0);
  // The collective wrote the parameters' memory directly: bump their versions as an in-place op
  // would, so values derived from them (models::DerivedCache) are recomputed.
  for (auto& t : defined)
    if (!t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

}  // namespace foxhunt::dist
