#include "foxhunt/quant/int8_gemm.h"

#include <atomic>

namespace foxhunt::quant::detail {
namespace {

// Cleared for the process when cuBLASLt refuses a shape it is documented to take, so the
// refusal (an exception and a log line inside LibTorch) is paid once.
std::atomic<bool> g_cuda_int8_gemm{true};

}  // namespace

torch::Tensor float_products(const torch::Tensor& a, const torch::Tensor& b) {
  const auto t = a.size(1) <= kMaxExactFloatInner ? torch::kFloat : torch::kDouble;
  return torch::mm(a.to(t), b.to(t)).round_().to(torch::kInt);
}

torch::Tensor int8_products(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.device().is_cpu()) return at::_int_mm(a, b);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m > 16 && k % 8 == 0 && n % 8 == 0 && g_cuda_int8_gemm.load(std::memory_order_relaxed)) {
    try {
      return at::_int_mm(a.contiguous(), b.t().contiguous().t());  // b column-major: "TN"
    } catch (const c10::Error&) {
      // A refused shape is a synchronous status, not a sticky device error: carry on exactly.
      g_cuda_int8_gemm.store(false, std::memory_order_relaxed);
    }
  }
  return float_products(a, b);
}

}  // namespace foxhunt::quant::detail
