# Compile options every Tessera target gets: strict warnings and, optionally, the native ISA.
function(tessera_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic)
  if(TESSERA_NATIVE_ARCH)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()
