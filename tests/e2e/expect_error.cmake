# Runs COMMAND (its arguments separated by |), with ENV (NAME=VALUE pairs separated by |) when
# given; fails unless the command exits non-zero, prints something matching EXPECT and, when
# FORBID is given, nothing matching it (e.g. a sign that work started before the error).
string(REPLACE "|" ";" command "${COMMAND}")
set(env_prefix)
if(DEFINED ENV_VARS AND NOT ENV_VARS STREQUAL "")
  string(REPLACE "|" ";" env_vars "${ENV_VARS}")
  set(env_prefix ${CMAKE_COMMAND} -E env ${env_vars})
endif()
execute_process(COMMAND ${env_prefix} ${command}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(status EQUAL 0)
  message(FATAL_ERROR "exited 0, expected an error matching '${EXPECT}':\n${out}\n${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "exit status ${status}, but nothing matches '${EXPECT}' in:\n${out}\n${err}")
endif()
if(DEFINED FORBID AND "${out}${err}" MATCHES "${FORBID}")
  message(FATAL_ERROR "output matches '${FORBID}', which it must not:\n${out}\n${err}")
endif()
message(STATUS "exit status ${status}: ${err}")
