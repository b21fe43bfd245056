# ctest script: confirms a hipcc object embeds device code for every requested architecture.
# Usage: cmake -DOBJECT=file.o "-DARCHS=gfx90a;gfx940" -P CheckHipObject.cmake
if(NOT EXISTS "${OBJECT}")
  message(FATAL_ERROR "hip check: ${OBJECT} was not built")
endif()
file(STRINGS "${OBJECT}" bundles REGEX "hipv4-amdgcn-amd-amdhsa--gfx")
foreach(arch IN LISTS ARCHS)
  list(FIND bundles "hipv4-amdgcn-amd-amdhsa--${arch}" found)
  if(found LESS 0)
    message(FATAL_ERROR "hip check: ${OBJECT} has no code object for ${arch} (bundles: ${bundles})")
  endif()
endforeach()
message(STATUS "hip check: ${OBJECT} holds code for ${ARCHS}")
