# cmake -DOUT=libagentbox.a -DIN=libagentbox-internal.a -DHEADERS="a.h;..."
#       -DLD=ld -DOBJCOPY=objcopy -DAR=ar -P public-archive.cmake
# The installed library: every object of IN partially linked (ld -r) into
# one relocatable object, in which only the functions the public headers
# declare (ab_NAME followed by "(") stay global; every other symbol is made
# local (objcopy --keep-global-symbols), so a program that links the
# archive can define its own names freely. The calls between the library's
# files bind, at the program's link, to those local symbols of the one object.
set(names "")
foreach(header ${HEADERS})
  file(READ ${header} text)
  # comments may name a function; a declaration is what the compiler sees
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(REGEX MATCHALL "ab_[A-Za-z0-9_]+[ \t\n]*\\(" found "${text}")
  foreach(f ${found})
    string(REGEX REPLACE "[ \t\n]*\\($" "" f "${f}")
    list(APPEND names ${f})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES names)
list(SORT names)
if(NOT names)
  message(FATAL_ERROR "public-archive: no ab_ function declared in ${HEADERS}")
endif()
list(JOIN names "\n" keep)
file(WRITE ${OUT}.keep "${keep}\n")

get_filename_component(dir ${OUT} DIRECTORY)
set(obj ${dir}/agentbox.o)
file(REMOVE ${obj} ${OUT}.tmp)
execute_process(COMMAND ${LD} -r -o ${obj} --whole-archive ${IN} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${OBJCOPY} --keep-global-symbols=${OUT}.keep ${obj}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${AR} rcsD ${OUT}.tmp ${obj} COMMAND_ERROR_IS_FATAL ANY)
file(REMOVE ${obj})
file(RENAME ${OUT}.tmp ${OUT})
