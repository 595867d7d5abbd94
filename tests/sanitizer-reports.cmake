# The first and the last test of a sanitizer build (tests/CMakeLists.txt):
# with CLEAR, make DIR empty; without, fail showing them if any process the
# suite started wrote a sanitizer report to DIR.
if(CLEAR)
  file(REMOVE_RECURSE "${DIR}")
  file(MAKE_DIRECTORY "${DIR}")
  return()
endif()
file(GLOB reports "${DIR}/*")
if(reports)
  list(LENGTH reports n)
  foreach(r ${reports})
    file(READ ${r} text)
    message("== ${r}\n${text}")
  endforeach()
  message(FATAL_ERROR "${n} sanitizer report(s) in ${DIR}")
endif()
message("no sanitizer reports in ${DIR}")
