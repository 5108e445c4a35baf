# Runs tessera-train on 3 ranks with rank 1 throwing after epoch 3 of many; fails unless the job
# exits non-zero, prints "[rank 1]" with the message, and ends within seconds (no rank left
# waiting in a collective).
string(TIMESTAMP start "%s")
execute_process(COMMAND ${MPIEXEC} -np 3 --oversubscribe --bind-to none ${TRAIN}
                        --dataset ${DATASET} --epochs 100000 --threads 1 --inject-failure 1:3
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
if(status EQUAL 0)
  message(FATAL_ERROR "the job exited 0 although rank 1 failed:\n${out}\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "\\[rank 1\\] error: injected failure after epoch 3")
  message(FATAL_ERROR "no '[rank 1] error' line in:\n${out}\n${err}")
endif()
if(seconds GREATER 30)
  message(FATAL_ERROR "the job took ${seconds} s to end after the failure")
endif()
message(STATUS "job ended with status ${status} after ${seconds} s")
