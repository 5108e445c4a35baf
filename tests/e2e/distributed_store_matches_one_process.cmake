# The baselines cut under mpirun (every rank reads its rows and writes its own part) give the same
# store, byte for byte, as one process cutting the whole graph: block and random at 2 ranks.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
foreach(method block random)
  execute_process(COMMAND ${PARTITION} --dataset ${DATASET} --parts 2 --method ${method}
                          --out ${WORK_DIR}/one-${method}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "tessera-partition --method ${method} failed (${status}):\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${MPIEXEC} -np 2 --oversubscribe --bind-to none ${PARTITION}
                          --dataset ${DATASET} --parts 2 --method ${method}
                          --out ${WORK_DIR}/ranks-${method}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT status EQUAL 0 OR NOT out MATCHES "each by its rank")
    message(FATAL_ERROR "mpirun -np 2 tessera-partition --method ${method} failed (${status}):\n"
                        "${out}\n${err}")
  endif()
  file(GLOB_RECURSE files RELATIVE ${WORK_DIR}/one-${method} ${WORK_DIR}/one-${method}/*)
  list(LENGTH files count)
  if(count LESS 10)
    message(FATAL_ERROR "${method}: one process wrote only ${count} files: ${files}")
  endif()
  foreach(file IN LISTS files)
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK_DIR}/one-${method}/${file}
                            ${WORK_DIR}/ranks-${method}/${file}
                    RESULT_VARIABLE differ)
    if(NOT differ EQUAL 0)
      message(FATAL_ERROR "${method}: ${file} written by 2 ranks differs from one process's")
    endif()
  endforeach()
  message(STATUS "${method}: the 2 ranks' store equals one process's (${count} files)")
endforeach()
