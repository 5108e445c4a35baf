# An output that names an input of the same job is refused before anything is read or written,
# and the input is left as it was (issue 37): --report over the dataset's file, tessera-convert
# --out over its own input (even with --force), tessera-partition --out inside the data folder.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(data ${WORK_DIR}/data.npz)
execute_process(COMMAND ${CONVERT} --dataset ${DATASET} --out ${data} RESULT_VARIABLE status
                OUTPUT_QUIET)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "could not write the input ${data}")
endif()
file(SHA256 ${data} before)

function(expect_refused flag)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(status EQUAL 0 OR NOT "${out}${err}" MATCHES "error: ${flag} '[^']*' (is|lies inside|holds) '[^']*', an input of this job")
    message(FATAL_ERROR "expected ${flag} to be refused as an input, got ${status}:\n${out}${err}")
  endif()
  if("${out}${err}" MATCHES "nodes")
    message(FATAL_ERROR "the data was read before the refusal:\n${out}${err}")
  endif()
endfunction()

expect_refused(--report ${TRAIN} --dataset npz:${data} --epochs 1 --report ${data})
expect_refused(--out ${CONVERT} --dataset npz:${data} --out ${data} --force)
execute_process(COMMAND ${CONVERT} --dataset npz:${data} --out ${WORK_DIR}/native OUTPUT_QUIET)
expect_refused(--out ${PARTITION} --dataset ${WORK_DIR}/native --parts 2
               --out ${WORK_DIR}/native/store)
file(SHA256 ${data} after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "${data} changed")
endif()
message(STATUS "every output over an input refused, the input unchanged")
