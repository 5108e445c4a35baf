# Sanitizer and fuzzing builds: TESSERA_SANITIZE and TESSERA_FUZZ, applied to every target of
# the project (library layers, apps, tests, benchmarks, fuzz harnesses) from this one place.
#
#   -DTESSERA_SANITIZE=address,undefined   any -fsanitize list (gcc or clang). Errors are fatal:
#                                          -fno-sanitize-recover=all makes UBSan stop the program
#                                          at its first report, so ctest sees a failure.
#   -DTESSERA_FUZZ=ON                      clang only: the library is built with libFuzzer's
#                                          coverage instrumentation and tests/fuzz/ builds one
#                                          libFuzzer harness per loader (tessera_add_fuzzer).
#
# The flags are directory-wide compile and link options rather than a target's usage
# requirements, so third-party code compiled in this tree (none today) and every executable get
# them alike, and the exported package does not carry them: a consumer of a sanitized install
# links with the same -fsanitize list itself.

set(TESSERA_SANITIZE "" CACHE STRING
    "Sanitizers for every target, as a -fsanitize list (e.g. address,undefined); empty: none")
option(TESSERA_FUZZ "Build the libFuzzer harnesses of tests/fuzz (clang only)" OFF)

if(TESSERA_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TESSERA_FUZZ=ON needs clang's libFuzzer, but the C++ compiler is "
                      "${CMAKE_CXX_COMPILER_ID} (${CMAKE_CXX_COMPILER}): configure a new build "
                      "folder with -DCMAKE_CXX_COMPILER=clang++-16 (clang 15 or newer, for "
                      "std::source_location; scripts/fuzz.sh does this)")
endif()

if(TESSERA_SANITIZE)
  string(REPLACE ";" "," tessera_sanitize_list "${TESSERA_SANITIZE}")
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=${tessera_sanitize_list}")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=${tessera_sanitize_list}")
  # One cached result per list, so changing TESSERA_SANITIZE checks the new list.
  string(MAKE_C_IDENTIFIER "TESSERA_SANITIZE_WORKS_${tessera_sanitize_list}" works)
  check_cxx_source_compiles("int main() { return 0; }" ${works})
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT ${works})
    message(FATAL_ERROR "TESSERA_SANITIZE=${TESSERA_SANITIZE}: ${CMAKE_CXX_COMPILER} cannot "
                        "build and link with -fsanitize=${tessera_sanitize_list} (is the "
                        "sanitizer runtime installed? Debian: libclang-rt-16-dev for clang-16, "
                        "libasan8/libubsan1 for gcc). Details: CMakeFiles/CMakeError.log")
  endif()
  # Frame pointers give whole stacks in reports at any optimization level.
  add_compile_options(-fsanitize=${tessera_sanitize_list} -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${tessera_sanitize_list})
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # The instrumentation keeps clang from vectorizing the `omp simd` loops of the CPU kernels,
    # and it says so for each one; that is the sanitizer's cost, not a defect of the loop.
    add_compile_options(-Wno-pass-failed)
  endif()
  message(STATUS "Sanitizers: ${tessera_sanitize_list} (non-recoverable)")
endif()

if(TESSERA_FUZZ)
  # Coverage feedback for libFuzzer in every object; only the harnesses link libFuzzer's main.
  add_compile_options(-fsanitize=fuzzer-no-link)
  message(STATUS "libFuzzer harnesses: tests/fuzz")
endif()
