# Finds Tessera's dependencies (all from Debian's packages) and defines imported targets.
find_package(OpenMP REQUIRED)
# MPI (Open MPI from Debian): ranks and halo exchanges; PUBLIC, as mpirun launches our apps.
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)

# OpenBLAS: prefer the OpenMP build (libopenblas-openmp-dev) so BLAS threads and our OpenMP
# threads share one pool instead of oversubscribing the cores.
find_package(OpenBLAS CONFIG REQUIRED
  HINTS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp/cmake/openblas
        /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-pthread/cmake/openblas)
if(NOT TARGET OpenBLAS::OpenBLAS)
  add_library(OpenBLAS::OpenBLAS INTERFACE IMPORTED)
  set_target_properties(OpenBLAS::OpenBLAS PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${OpenBLAS_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${OpenBLAS_LIBRARIES}")
endif()
message(STATUS "OpenBLAS: ${OpenBLAS_LIBRARIES}")

# METIS (partitioning): Debian ships no CMake config, hence cmake/FindMETIS.cmake.
find_package(METIS REQUIRED)
# PT-Scotch, 64-bit (distributed partitioning): no CMake config either.
find_package(PTScotch REQUIRED)
# Zoltan (Trilinos) PHG: hypergraph partitioning. Debian's config names the library
# "trilinos_zoltan" without an imported target.
find_package(Zoltan CONFIG REQUIRED)
if(NOT TARGET Zoltan::zoltan)
  add_library(Zoltan::zoltan INTERFACE IMPORTED)
  set_target_properties(Zoltan::zoltan PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${Zoltan_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${Zoltan_LIBRARIES};MPI::MPI_CXX")
endif()
# Boost.Graph (header-only parts): connected components and Cuthill-McKee reordering.
find_package(Boost 1.74 REQUIRED)
if(NOT TARGET Boost::graph)
  add_library(Boost::graph INTERFACE IMPORTED)
  target_link_libraries(Boost::graph INTERFACE Boost::headers)
endif()

# CLI11 (header-only): the flags of runtime::train_main, inside the library.
find_package(CLI11 REQUIRED)
if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TESSERA_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()
