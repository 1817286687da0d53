# Writes OUT (sparq_commit.h) with the source tree's commit, a '+' after it
# when sparq's sources differ from it; "unknown" outside a git checkout (an
# sdist). Run at every build, since a commit needs no reconfigure; the file
# is rewritten only when the line changes, so nothing recompiles otherwise.
execute_process(COMMAND git -C "${SRC}" rev-parse --short HEAD OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
if(NOT rc EQUAL 0)
  set(commit "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" diff --quiet HEAD -- sparq tools python examples CMakeLists.txt
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND commit "+")
  endif()
endif()
set(text "#define SPARQ_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
