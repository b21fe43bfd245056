# The op table (core/ops.def) read once for the build: each row's first line holds its name, its
# section, its kernels family and its properties family (core/ops.def says so). Sets
#   MLACHECK_OPS                 the ops, in the table's order
#   MLACHECK_PROPERTY_FAMILIES   the distinct properties families (properties/<family>_gen.cpp and
#                                _properties.cpp, library mlacheck_<family>_properties)
# and MLACHECK_KERNEL_LIBRARY_<family>, the library a properties family drives: mlacheck_<family>,
# but for decode_step, the indexer decode step's (it has no kernel of its own).
set(_table ${PROJECT_SOURCE_DIR}/core/ops.def)
set(_row "^MLACHECK_OP\\(([a-z_0-9]+), \"[^\"]*\", ([a-z_0-9]+), ([a-z_0-9]+),")
file(STRINGS ${_table} _rows REGEX "${_row}")
file(STRINGS ${_table} _openings REGEX "^MLACHECK_OP\\(")
list(LENGTH _rows _read)
list(LENGTH _openings _opened)
# Every row must have been read: a row split before its properties family would otherwise lose its
# harness and its library without a word.
if(_read EQUAL 0 OR NOT _read EQUAL _opened)
  message(FATAL_ERROR "cmake/OpTable.cmake read ${_read} of the ${_opened} rows of core/ops.def: write each row as "
                      "MLACHECK_OP(name, \"section\", kernels, properties, ... with those four on its first line")
endif()
set(MLACHECK_OPS "")
set(MLACHECK_PROPERTY_FAMILIES "")
foreach(_line ${_rows})
  string(REGEX REPLACE "${_row}.*" "\\1" _op "${_line}")
  string(REGEX REPLACE "${_row}.*" "\\3" _family "${_line}")
  list(APPEND MLACHECK_OPS ${_op})
  list(APPEND MLACHECK_PROPERTY_FAMILIES ${_family})
endforeach()
list(REMOVE_DUPLICATES MLACHECK_PROPERTY_FAMILIES)
foreach(_family ${MLACHECK_PROPERTY_FAMILIES})
  set(MLACHECK_KERNEL_LIBRARY_${_family} mlacheck_${_family})
endforeach()
set(MLACHECK_KERNEL_LIBRARY_decode_step mlacheck_indexer_decode_step)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_table})
