# FindPTScotch: PT-Scotch, the distributed graph partitioner, with 64-bit indices (Debian's
# libptscotch-dev).
#
# Debian ships PT-Scotch in three index widths whose shared libraries share one soname
# (libptscotch-7.0.so); Zoltan links the default (32-bit) one. Two libraries of one soname cannot
# live in one process, so the 64-bit build is linked from its static archives, whose symbols the
# linker keeps out of the dynamic table (--exclude-libs): Zoltan keeps its own Scotch, and
# SCOTCH_dgraphMap here takes 64-bit ids.
#
# Result: PTScotch_FOUND, PTScotch_INCLUDE_DIR (holding scotch-int64/ptscotch.h) and the imported
# target PTScotch::ptscotch64. Hint: PTScotch_ROOT (the folder of the scotch-int64 archives).
set(_ptscotch_libdir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/scotch-int64)
find_path(PTScotch_INCLUDE_DIR scotch-int64/ptscotch.h)
foreach(_lib ptscotch scotch ptscotcherr)
  find_library(PTScotch_${_lib}_LIBRARY NAMES lib${_lib}.a
    HINTS ${PTScotch_ROOT} PATHS ${_ptscotch_libdir} NO_DEFAULT_PATH)
  list(APPEND _ptscotch_vars PTScotch_${_lib}_LIBRARY)
endforeach()
find_library(PTScotch_BZIP2_LIBRARY bz2)
find_library(PTScotch_LZMA_LIBRARY lzma)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(PTScotch
  REQUIRED_VARS PTScotch_INCLUDE_DIR ${_ptscotch_vars} PTScotch_BZIP2_LIBRARY PTScotch_LZMA_LIBRARY)

if(PTScotch_FOUND AND NOT TARGET PTScotch::ptscotch64)
  find_package(MPI REQUIRED COMPONENTS CXX)
  find_package(ZLIB REQUIRED)
  add_library(PTScotch::ptscotch64 INTERFACE IMPORTED)
  set_target_properties(PTScotch::ptscotch64 PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${PTScotch_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES
      "${PTScotch_ptscotch_LIBRARY};${PTScotch_scotch_LIBRARY};${PTScotch_ptscotcherr_LIBRARY};ZLIB::ZLIB;${PTScotch_BZIP2_LIBRARY};${PTScotch_LZMA_LIBRARY};MPI::MPI_CXX;m"
    INTERFACE_LINK_OPTIONS "LINKER:--exclude-libs,libptscotch.a:libscotch.a:libptscotcherr.a")
endif()
mark_as_advanced(PTScotch_INCLUDE_DIR ${_ptscotch_vars} PTScotch_BZIP2_LIBRARY PTScotch_LZMA_LIBRARY)
