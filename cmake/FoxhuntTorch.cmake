# Finds LibTorch. Default: the pinned PyPI torch wheel of the system python3; any other LibTorch 2.x
# can be given with -DCMAKE_PREFIX_PATH=/path/to/libtorch.
if(NOT Torch_DIR)
  execute_process(
    COMMAND python3 -c "import torch, sys; sys.stdout.write(torch.utils.cmake_prefix_path)"
    OUTPUT_VARIABLE _foxhunt_torch_prefix RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0 AND _foxhunt_torch_prefix)
    list(APPEND CMAKE_PREFIX_PATH "${_foxhunt_torch_prefix}")
  endif()
endif()
# The CUDA build of LibTorch looks for the CUDA toolkit at configure time.
if(EXISTS /usr/local/cuda/bin/nvcc AND NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
if(NOT TORCH_CUDA_ARCH_LIST)
  set(TORCH_CUDA_ARCH_LIST "7.5;8.0;9.0")
endif()
find_package(Torch 2.0 REQUIRED)
message(STATUS "LibTorch ${Torch_VERSION} at ${Torch_DIR}")

# CUDA memory stats need c10_cuda (present in CUDA builds of LibTorch only).
set(FOXHUNT_HAVE_CUDA_STATS OFF)
set(FOXHUNT_CUDA_STATS_LIBS "")
if(TARGET c10_cuda)
  set(FOXHUNT_HAVE_CUDA_STATS ON)
  set(FOXHUNT_CUDA_STATS_LIBS c10_cuda)
else()
  find_library(_foxhunt_c10_cuda c10_cuda HINTS ${TORCH_INSTALL_PREFIX}/lib)
  if(_foxhunt_c10_cuda)
    set(FOXHUNT_HAVE_CUDA_STATS ON)
    set(FOXHUNT_CUDA_STATS_LIBS ${_foxhunt_c10_cuda})
  endif()
endif()
message(STATUS "foxhunt: CUDA memory stats ${FOXHUNT_HAVE_CUDA_STATS}")

# What foxhunt's areas link: LibTorch's CPU library and c10 only. TORCH_LIBRARIES (the `torch`
# target) forces libtorch_cuda in with --no-as-needed; foxhunt's CUDA code lives in a plugin
# (core/cuda_plugin.h) that brings it when a CUDA device is asked for. The compile settings
# (include directories, flags) are still the `torch` target's.
if(TARGET torch_cpu_library AND TARGET c10 AND TARGET torch)
  set(FOXHUNT_TORCH_CPU_LIBS torch_cpu_library c10)
  set(FOXHUNT_TORCH_INCLUDES "$<TARGET_PROPERTY:torch,INTERFACE_INCLUDE_DIRECTORIES>")
  set(FOXHUNT_TORCH_COMPILE_OPTIONS "$<TARGET_PROPERTY:torch,INTERFACE_COMPILE_OPTIONS>")
else()  # a LibTorch without these targets (static builds): everything, as before
  set(FOXHUNT_TORCH_CPU_LIBS ${TORCH_LIBRARIES})
  set(FOXHUNT_TORCH_INCLUDES "")
  set(FOXHUNT_TORCH_COMPILE_OPTIONS "")
endif()

# The PyPI wheel's libtorch_cuda.so finds NCCL, cuDNN, ... through $ORIGIN rpaths into
# site-packages/nvidia/*/lib. GNU ld does not follow those when it checks a shared library's own
# dependencies at link time, and a system NCCL (e.g. /usr/local/cuda/lib) would be picked instead,
# so point the linker at the wheel's copies explicitly.
file(GLOB _foxhunt_nvidia_libdirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
set(FOXHUNT_TORCH_LINK_OPTIONS "")
foreach(_d ${_foxhunt_nvidia_libdirs})
  if(IS_DIRECTORY "${_d}")
    list(APPEND FOXHUNT_TORCH_LINK_OPTIONS "LINKER:-rpath-link,${_d}")
  endif()
endforeach()
