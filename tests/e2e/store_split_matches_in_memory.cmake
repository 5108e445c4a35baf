# A dataset without a published split (the LINQS Cora file) trains the same from a store written
# by tessera-partition as in memory: both take the default 60/20/20 split of --seed, so every
# epoch's losses and accuracies agree. Prints "SKIPPED: ..." (the test's skip expression) without
# the data.
if(DEFINED ENV{TESSERA_DATA_DIR} AND NOT "$ENV{TESSERA_DATA_DIR}" STREQUAL "")
  set(DATA_DIR "$ENV{TESSERA_DATA_DIR}")
endif()
if(NOT EXISTS "${DATA_DIR}/cora_linqs/cora.content.gz")
  message(STATUS "SKIPPED: cora_linqs/cora.content.gz not found under ${DATA_DIR}")
  return()
endif()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(data --dataset cora-linqs --data-dir ${DATA_DIR} --seed 3)

execute_process(COMMAND ${PARTITION} ${data} --parts 1 --out ${WORK_DIR}/store
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "tessera-partition failed (${status}):\n${out}\n${err}")
endif()
foreach(run memory store)
  if(run STREQUAL "memory")
    set(source ${data})
  else()
    set(source --partition-dir ${WORK_DIR}/store --seed 3)
  endif()
  execute_process(COMMAND ${TRAIN} ${source} --epochs 5 --threads 1
                          --report ${WORK_DIR}/${run}.json
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "training from ${run} failed (${status}):\n${out}\n${err}")
  endif()
endforeach()

execute_process(COMMAND ${COMPARE} ${WORK_DIR}/memory.json ${WORK_DIR}/store.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "in memory and from the store differ: ${out}${err}")
endif()
message(STATUS "${out}")
