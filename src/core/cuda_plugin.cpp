#include "foxhunt/core/cuda_plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <mutex>

#include "foxhunt/core/error.h"

// Set by CMake on this file: whether the plugin is built, the build tree's directory, the
// install's lib directory (both absolute) and the lib directory relative to the install prefix.
#ifndef FOXHUNT_CUDA_PLUGIN_BUILT
#define FOXHUNT_CUDA_PLUGIN_BUILT 0
#endif
#ifndef FOXHUNT_CUDA_PLUGIN_BUILD_DIR
#define FOXHUNT_CUDA_PLUGIN_BUILD_DIR ""
#endif
#ifndef FOXHUNT_CUDA_PLUGIN_LIBDIR
#define FOXHUNT_CUDA_PLUGIN_LIBDIR "lib"
#endif
#ifndef FOXHUNT_CUDA_PLUGIN_INSTALL_DIR
#define FOXHUNT_CUDA_PLUGIN_INSTALL_DIR ""
#endif

namespace foxhunt {

namespace {

constexpr const char* kPluginFile = "libfoxhunt_cuda.so";

struct Plugin {
  std::mutex mutex;
  bool tried = false;
  void* handle = nullptr;
  const CudaMemoryFunctions* memory = nullptr;
  std::string status = "not loaded yet";
};

Plugin& plugin() {
  static auto* p = new Plugin;  // never destroyed: the plugin stays loaded until exit
  return *p;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

void load(Plugin& p) {
  if (!FOXHUNT_CUDA_PLUGIN_BUILT && std::getenv("FOXHUNT_CUDA_PLUGIN") == nullptr) {
    p.status = "not built: LibTorch had no CUDA at configure time (built without CUDA)";
    return;
  }
  std::string tried;  // each candidate and why it was not taken
  const auto skip = [&tried](const std::string& path, const std::string& why) {
    tried += detail::cat(tried.empty() ? "" : "; ", path, ": ", why);
  };
  for (const auto& path : detail::cuda_plugin_candidates()) {
    const bool bare = path.find('/') == std::string::npos;  // the loader's own search path
    if (!bare && !is_file(path)) {
      skip(path, "no such file");
      continue;
    }
    ::dlerror();
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) {
      const char* err = ::dlerror();
      skip(path, err ? err : "dlopen failed");
      continue;
    }
    using MemoryEntry = const CudaMemoryFunctions* (*)();
    auto entry = reinterpret_cast<MemoryEntry>(::dlsym(h, "foxhunt_cuda_memory"));
    const CudaMemoryFunctions* table = entry ? entry() : nullptr;
    if (table == nullptr || table->abi != kCudaPluginAbi) {
      skip(path, detail::cat("expected plugin ABI ", kCudaPluginAbi, ", got ",
                             table ? std::to_string(table->abi) : "no foxhunt_cuda_memory",
                             " (a plugin from another build)"));
      // Not dlclose'd: its static initializers registered LibTorch kernels that must stay.
      continue;
    }
    p.handle = h;
    p.memory = table;
    p.status = detail::cat("loaded from ", path);
    return;
  }
  p.status = detail::cat(kPluginFile, " could not be loaded (", tried, ")");
}

}  // namespace

namespace detail {

std::vector<std::string> cuda_plugin_candidates() {
  std::vector<std::string> out;
  // A file named by the user is the only one tried: no silent fallback to another build's.
  if (const char* env = std::getenv("FOXHUNT_CUDA_PLUGIN"); env != nullptr && *env != '\0')
    return {env};
  // Beside the file that holds this code: the executable, libfoxhunt_c.so or the Python module
  // (made absolute: a relative argv[0] would break after a chdir).
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cuda_plugin_candidates), &info) != 0 &&
      info.dli_fname != nullptr && *info.dli_fname != '\0') {
    std::unique_ptr<char, decltype(&std::free)> real(::realpath(info.dli_fname, nullptr),
                                                     &std::free);
    const std::string dir = directory_of(real ? real.get() : info.dli_fname);
    out.push_back(detail::cat(dir, "/", kPluginFile));
    // An install moved to another prefix: PREFIX/bin/foxhunt finds PREFIX/lib/libfoxhunt_cuda.so.
    out.push_back(detail::cat(dir, "/../", FOXHUNT_CUDA_PLUGIN_LIBDIR, "/", kPluginFile));
  }
  for (const char* dir : {FOXHUNT_CUDA_PLUGIN_BUILD_DIR, FOXHUNT_CUDA_PLUGIN_INSTALL_DIR})
    if (*dir != '\0') out.push_back(detail::cat(dir, "/", kPluginFile));
  out.emplace_back(kPluginFile);
  return out;
}

}  // namespace detail

bool cuda_plugin_built() {
  return FOXHUNT_CUDA_PLUGIN_BUILT != 0;
}

const CudaMemoryFunctions* cuda_memory_functions() {
  auto& p = plugin();
  std::lock_guard<std::mutex> lock(p.mutex);
  if (!p.tried) {
    p.tried = true;
    load(p);
  }
  return p.memory;
}

bool cuda_plugin_loaded() {
  auto& p = plugin();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.memory != nullptr;
}

bool load_cuda_plugin() {
  return cuda_memory_functions() != nullptr;
}

std::string cuda_plugin_status() {
  auto& p = plugin();
  std::lock_guard<std::mutex> lock(p.mutex);
  return p.status;
}

void* cuda_plugin_symbol(const char* symbol) {
  if (!load_cuda_plugin()) return nullptr;
  return ::dlsym(plugin().handle, symbol);
}

}  // namespace foxhunt
