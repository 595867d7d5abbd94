# cmake -DOUT=FILE.c -DROOT=POLICY_DIR -DFILES="seccomp/default.json;..." -P embed-policy.cmake
# Writes the shipped policy files as C data, the table of
# src/seccomp/policy_builtin.h: a binary copied out of its installation
# still has its profiles (files on disk override them).
file(WRITE ${OUT}.tmp "/* Made by tools/embed-policy.cmake at build time: do not edit. */\n"
                      "#include \"seccomp/policy_builtin.h\"\n\n")
set(table "")
set(i 0)
foreach(rel ${FILES})
  file(READ ${ROOT}/${rel} hex HEX)
  string(LENGTH "${hex}" hexlen)
  math(EXPR size "${hexlen} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  file(APPEND ${OUT}.tmp "static const char p${i}[] = {\n\t${bytes}0};\n")
  string(APPEND table "\t{\"${rel}\", p${i}, ${size}},\n")
  math(EXPR i "${i} + 1")
endforeach()
file(APPEND ${OUT}.tmp "\nconst struct ab_policy_file ab_policy_builtin_files[] = {\n${table}\t{0}};\n")
file(RENAME ${OUT}.tmp ${OUT})
