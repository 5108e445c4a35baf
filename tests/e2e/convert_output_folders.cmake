# tessera-convert's outputs: a bad --out is refused before anything is loaded and leaves nothing
# behind ("--out /" is left to the unit tests: a regression here would write into /); an existing
# dataset, folder or .npz file, is replaced only with --force; file and folder names that are not
# valid UTF-8 (the bytes 'caf\351') work as input and as output, never aborting the process.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Runs tessera-convert with ARGN (through sh, so that printf can make non-UTF-8 names); sets
# status and text in the caller.
function(convert)
  string(REPLACE ";" " " args "${ARGN}")
  execute_process(COMMAND sh -c "'${CONVERT}' ${args}"
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(status ${code} PARENT_SCOPE)
  set(text "${out}${err}" PARENT_SCOPE)
endfunction()
function(expect_refused what pattern)
  if(status EQUAL 0 OR NOT text MATCHES "error: .*${pattern}")
    message(FATAL_ERROR "${what}: expected a refusal matching '${pattern}', got status ${status}:\n"
                        "${text}")
  endif()
  if(text MATCHES "nodes,")
    message(FATAL_ERROR "${what}: the dataset was loaded before the output was checked:\n${text}")
  endif()
endfunction()
function(expect_success what)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${what}: exited ${status}:\n${text}")
  endif()
endfunction()

set(bad "\"${WORK_DIR}/caf$(printf '\\351')\"")

file(MAKE_DIRECTORY ${WORK_DIR}/foreign)
file(WRITE ${WORK_DIR}/foreign/notes.txt "mine\n")
convert(--dataset "'${DATASET}'" --out ${WORK_DIR}/foreign)
expect_refused("a folder with other files" "not a Tessera output")
file(GLOB left RELATIVE ${WORK_DIR}/foreign ${WORK_DIR}/foreign/*)
if(NOT left STREQUAL "notes.txt")
  message(FATAL_ERROR "the refused folder changed: it holds ${left}")
endif()

convert(--dataset "'${DATASET}'" --out ${WORK_DIR}/no/such/graph.npz)
expect_refused("an .npz in a missing folder" "no/such/graph.npz")

# An existing .npz file is replaced only with --force (issue 37), and kept as it was without.
file(WRITE ${WORK_DIR}/kept.npz "not replaced")
convert(--dataset "'${DATASET}'" --out ${WORK_DIR}/kept.npz)
expect_refused("an existing .npz without --force" "kept.npz' already exists.*pass --force to replace it")
file(READ ${WORK_DIR}/kept.npz kept)
if(NOT kept STREQUAL "not replaced")
  message(FATAL_ERROR "the refused .npz changed: it holds '${kept}'")
endif()
convert(--dataset "'${DATASET}'" --out ${WORK_DIR}/kept.npz --force)
expect_success("an existing .npz with --force")

# A non-UTF-8 folder name as output, then as input, then a dataset named after a non-UTF-8 file.
convert(--dataset "'${DATASET}'" --out ${bad})
expect_success("--out to a non-UTF-8 folder")
convert(--dataset "'${DATASET}'" --out ${bad})
expect_refused("the same --out again without --force" "--force")
convert(--dataset "'${DATASET}'" --out ${bad} --force)
expect_success("the same --out again with --force")
convert(--dataset ${bad} --out "${WORK_DIR}/caf$(printf '\\351').npz")
expect_success("a non-UTF-8 native folder as input, to a non-UTF-8 .npz")
convert(--dataset "npz:${WORK_DIR}/caf$(printf '\\351').npz" --out ${WORK_DIR}/named)
expect_success("a dataset named after a non-UTF-8 file, to a native folder")
if(NOT EXISTS ${WORK_DIR}/named/dataset.json)
  message(FATAL_ERROR "the native folder has no dataset.json:\n${text}")
endif()
