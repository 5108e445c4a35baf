# Installing Tessera: the headers of the public layers and the package under include/tessera
# (with the generated config.hpp; internal layers' headers stay behind), the library,
# TesseraConfig.cmake + version file + targets + the Find modules the config needs, and a
# pkg-config file.
include(CMakePackageConfigHelpers)

set(TESSERA_HAS_CUDA 0)
set(TESSERA_HAS_NCCL 0)
if(TESSERA_CUDA)
  set(TESSERA_HAS_CUDA 1)
endif()
if(TESSERA_NCCL)
  set(TESSERA_HAS_NCCL 1)
endif()
if(NOT BUILD_SHARED_LIBS)
  set(BUILD_SHARED_LIBS OFF)
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/config.hpp.in
               ${PROJECT_BINARY_DIR}/include/tessera/config.hpp @ONLY)

set(tessera_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
install(TARGETS tessera EXPORT TesseraTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(layer ${TESSERA_LAYERS})
  if(TESSERA_LAYER_${layer}_KIND MATCHES "^(public|package)$")
    install(DIRECTORY ${PROJECT_SOURCE_DIR}/${TESSERA_LAYER_${layer}_FOLDER}/include/tessera
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.hpp")
  endif()
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/tessera/config.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${tessera_cmake_dir})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/TesseraConfig.cmake INSTALL_DESTINATION ${tessera_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindMETIS.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindPTScotch.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
  DESTINATION ${tessera_cmake_dir})

string(JOIN " " _tessera_ptscotch_archives ${PTScotch_ptscotch_LIBRARY} ${PTScotch_scotch_LIBRARY}
  ${PTScotch_ptscotcherr_LIBRARY})
set(TESSERA_PC_PRIVATE_LIBS "-lopenblas -lmetis -ltrilinos_zoltan ${_tessera_ptscotch_archives} \
-Wl,--exclude-libs,ALL -lbz2 -llzma -lfmt -lz")
if(TESSERA_CUDA)
  string(APPEND TESSERA_PC_PRIVATE_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart -ldl")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
