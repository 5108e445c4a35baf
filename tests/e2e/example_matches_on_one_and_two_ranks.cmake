# Trains an example (EXAMPLE) on Cora for a few epochs in one process and on two ranks under
# MPIEXEC, and fails unless every epoch's training loss agrees to 1e-5 (relative) and the
# accuracies to rounding. Prints "SKIPPED: ..." (the test's skip expression) without Cora.
if(DEFINED ENV{TESSERA_DATA_DIR} AND NOT "$ENV{TESSERA_DATA_DIR}" STREQUAL "")
  set(DATA_DIR "$ENV{TESSERA_DATA_DIR}")
endif()
if(NOT EXISTS "${DATA_DIR}/cora_planetoid/cora_planetoid.npz")
  message(STATUS "SKIPPED: cora_planetoid/cora_planetoid.npz not found under ${DATA_DIR}")
  return()
endif()
file(MAKE_DIRECTORY ${WORK_DIR})
set(args --dataset cora --data-dir ${DATA_DIR} --epochs 30 --threads 1)
foreach(ranks 1 2)
  set(report ${WORK_DIR}/report-${ranks}.json)
  file(REMOVE ${report})
  if(ranks EQUAL 1)
    set(command ${EXAMPLE})
  else()
    set(command ${MPIEXEC} -np 2 --oversubscribe --bind-to none ${EXAMPLE})
  endif()
  execute_process(COMMAND ${command} ${args} --report ${report}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${ranks}-rank run failed (${status}):\n${out}\n${err}")
  endif()
endforeach()

execute_process(COMMAND ${COMPARE} ${WORK_DIR}/report-1.json ${WORK_DIR}/report-2.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "one process and two ranks differ: ${out}${err}")
endif()
message(STATUS "${out}")
