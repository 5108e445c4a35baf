# Runs tessera-train with --report DEVICE (a character device such as /dev/null or /dev/full, run as
# root as on clusters and in containers); fails unless DEVICE is still a character device
# afterwards and the run ends as EXPECT says: "success", or "failure" with an error naming DEVICE.
execute_process(COMMAND ${TRAIN} --dataset ${DATASET} --epochs 2 --threads 1 --report ${DEVICE}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
execute_process(COMMAND test -c ${DEVICE} RESULT_VARIABLE not_a_device)
if(NOT not_a_device EQUAL 0)
  message(FATAL_ERROR "${DEVICE} is no longer a character device after --report ${DEVICE}")
endif()
if(EXPECT STREQUAL "success" AND NOT status EQUAL 0)
  message(FATAL_ERROR "tessera-train --report ${DEVICE} exited ${status}\n${out}\n${err}")
endif()
if(EXPECT STREQUAL "failure")
  if(status EQUAL 0)
    message(FATAL_ERROR "tessera-train --report ${DEVICE} exited 0; the device takes no bytes")
  endif()
  string(FIND "${out}${err}" "error: cannot write '${DEVICE}'" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "no error naming ${DEVICE} in:\n${out}\n${err}")
  endif()
endif()
