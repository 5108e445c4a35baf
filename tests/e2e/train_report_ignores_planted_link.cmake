# Plants WORK_DIR/report.json.tmp as a symbolic link to a victim file, then runs tessera-train with
# --report WORK_DIR/report.json; fails unless the run succeeds, the victim is unchanged, the link
# is left as it was and the report is whole.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/victim "precious\n")
file(CREATE_LINK ${WORK_DIR}/victim ${WORK_DIR}/report.json.tmp SYMBOLIC)
execute_process(COMMAND ${TRAIN} --dataset ${DATASET} --epochs 2 --threads 1
                        --report ${WORK_DIR}/report.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "tessera-train exited ${status}\n${out}\n${err}")
endif()
file(READ ${WORK_DIR}/victim victim)
if(NOT victim STREQUAL "precious\n")
  message(FATAL_ERROR "the planted link report.json.tmp was followed: the victim now holds\n"
                      "${victim}")
endif()
if(NOT IS_SYMLINK ${WORK_DIR}/report.json.tmp)
  message(FATAL_ERROR "the planted link report.json.tmp was replaced or removed")
endif()
file(READ ${WORK_DIR}/report.json json)
string(JSON accuracy ERROR_VARIABLE bad GET "${json}" metrics test_accuracy)
if(bad)
  message(FATAL_ERROR "report.json is not a whole report (${bad}):\n${json}")
endif()
