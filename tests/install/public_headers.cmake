# Fails when a public header includes anything but the C++ standard library and other public
# Tessera headers (no CUDA, NCCL, METIS, MPI, BLAS, Boost, fmt, JSON or private header), so an
# installed Tessera needs none of them on the consumer's include path.
file(GLOB_RECURSE headers ${HEADER_DIR}/tessera/*.hpp)
set(problems "")
foreach(header ${headers})
  file(STRINGS ${header} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "#[ \t]*include[ \t]*[<\"]tessera/[a-z_/]+\\.hpp[>\"]")
      continue()  # another public header
    elseif(line MATCHES "#[ \t]*include[ \t]*<[a-z_]+>")
      continue()  # the C++ standard library (no extension)
    endif()
    file(RELATIVE_PATH name ${HEADER_DIR} ${header})
    string(APPEND problems "  ${name}: ${line}\n")
  endforeach()
endforeach()
list(LENGTH headers count)
if(problems)
  message(FATAL_ERROR "public headers include what a consumer may not have:\n${problems}")
endif()
message(STATUS "${count} public headers include only the standard library and each other")
