# Copies the source tree to WORK_DIR, puts back the wrong-way includes the tree had before it was
# layered (each an arrow cmake/layers.txt does not allow), runs the checker CHECK on the copy,
# and fails unless the checker fails and names every one: file, line and arrow.
file(REMOVE_RECURSE ${WORK_DIR})
foreach(item cmake src kernels datasets partition apps bench tests)
  file(COPY ${SOURCE_DIR}/${item} DESTINATION ${WORK_DIR})
endforeach()

# plant(FILE LINE EXPECTED): inserts LINE as the first line of FILE; EXPECTED must be reported.
set(expected "")
function(plant file line message)
  file(READ ${WORK_DIR}/${file} text)
  file(WRITE ${WORK_DIR}/${file} "${line}\n${text}")
  set(expected ${expected} "${file}:1: ${line}: ${message}" PARENT_SCOPE)
endfunction()
plant(kernels/include/tessera/kernels/dense_kernels.hpp [[#include "tessera/ops/ops.hpp"]]
      "kernels -> ops is not an arrow")
plant(src/core/device.cpp [[#include "tessera/kernels/backend_kernels.hpp"]]
      "core -> kernels is not an arrow")
plant(src/comm/halo_plan.cpp [[#include "tessera/engine/module.hpp"]]
      "comm -> engine is not an arrow")
plant(partition/store.cpp [[#include "../datasets/assembly.hpp"]]
      "a private file of datasets")
plant(src/gnn/aggregation.cpp [[#include "../engine/layers.cpp"]]
      "a private file of engine")
plant(src/gnn/trainer.cpp [[#include <CLI/CLI.hpp>]] "gnn does not use CLI11")

execute_process(COMMAND ${CHECK} ${WORK_DIR} RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(NOT status EQUAL 1)
  message(FATAL_ERROR "the checker exited ${status} on a tree with wrong-way includes:\n${out}${err}")
endif()
foreach(line ${expected})
  string(FIND "${out}" "${line}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the checker did not report\n  ${line}\nin:\n${out}")
  endif()
endforeach()
list(LENGTH expected count)
message(STATUS "the checker refused all ${count} planted includes:\n${out}")
