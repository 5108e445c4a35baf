# Decides whether this build has the CUDA backend (TESSERA_CUDA) from TESSERA_WITH_CUDA:
# AUTO builds it when nvcc is found (on PATH, $CUDACXX, or /usr/local/cuda), ON requires it, OFF
# skips it. Defaults CMAKE_CUDA_ARCHITECTURES to 80;90: "native" fails on machines without a
# GPU, and the CI machine has none.
set(TESSERA_CUDA OFF)
set(TESSERA_NCCL OFF)
if(NOT TESSERA_WITH_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TESSERA_WITH_CUDA must be AUTO, ON or OFF, got '${TESSERA_WITH_CUDA}'")
endif()
if(TESSERA_WITH_CUDA STREQUAL "OFF")
  return()
endif()

if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(TESSERA_NVCC nvcc HINTS ENV CUDA_PATH /usr/local/cuda PATH_SUFFIXES bin)
  if(TESSERA_NVCC)
    set(CMAKE_CUDA_COMPILER "${TESSERA_NVCC}")
  endif()
endif()
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  if(TESSERA_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TESSERA_WITH_CUDA=ON but nvcc was not found (set CUDACXX or put nvcc on "
                        "PATH), or configure with TESSERA_WITH_CUDA=AUTO or OFF")
  endif()
  message(STATUS "CUDA backend: off (no nvcc found)")
  return()
endif()

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
enable_language(CUDA)
# CMake 3.25 does not know how nvcc spells C++20; tell it, so CUDA_STANDARD 20 works.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
find_package(CUDAToolkit REQUIRED)
set(TESSERA_CUDA ON)
# NCCL (halo exchanges and gradient sums between GPU ranks) when it is found; without it GPU
# ranks exchange through MPI and host memory.
find_package(NCCL QUIET)
set(TESSERA_NCCL ${NCCL_FOUND})
message(STATUS "CUDA backend: on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}); NCCL: ${NCCL_FOUND} ${NCCL_VERSION}")
