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
