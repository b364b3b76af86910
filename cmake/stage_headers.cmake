# Stages tapeflow's public headers as they are installed: <OUTPUT_DIR>/tapeflow/<folder>/...
# Run in script mode (cmake -P) by the tapeflow_headers target; see cmake/tapeflow_install.cmake.
#
# Inputs (-D):  SOURCE_DIR   the source tree
#               OUTPUT_DIR   where include/ is staged (its tapeflow/ subfolder is rewritten)
#               FOLDERS      ;-separated top-level library folders (tape;layers;...)
#               TOP_HEADERS  ;-separated headers at the top of the source tree (tapeflow.h;json.h)
#               BRIDGE_HEADERS  ;-separated top headers that may include <nlohmann/json.hpp> (json.h)
#               STAMP        file touched on success
# Rules:  every *.h under FOLDERS outside internal/ is public; an internal/ header is staged only
#         when a staged header includes it (transitively). Project includes are rewritten from
#         "tape/core/tensor.h" to "tapeflow/tape/core/tensor.h", so only <prefix>/include is on the
#         user's include path. A staged header that includes a third-party header that must stay
#         private (HDF5, Eigen, oneTBB, spdlog/fmt) fails the build, naming the header and the line;
#         so does any other non-standard include. The one exception: a BRIDGE_HEADERS header (json.h,
#         the opt-in bridge of tapeflow::json, which no other header includes) may include
#         <nlohmann/json.hpp>; configs are tapeflow::Config everywhere else, so find_package(tapeflow)
#         needs no nlohmann-json.
cmake_minimum_required(VERSION 3.25)
foreach(_var SOURCE_DIR OUTPUT_DIR FOLDERS STAMP)
  if(NOT DEFINED ${_var})
    message(FATAL_ERROR "stage_headers.cmake: -D${_var}=... is required")
  endif()
endforeach()

list(JOIN FOLDERS "|" _folder_alt)
set(_include_re "#[ \t]*include[ \t]*\"((${_folder_alt})/[^\"]+)\"")
set(_forbidden_re "<(hdf5[^>]*|H5[^>]*|Eigen/[^>]*|unsupported/Eigen/[^>]*|tbb/[^>]*|oneapi/[^>]*|spdlog/[^>]*|fmt/[^>]*)>")

# The public set, then the internal headers it reaches.
set(_todo ${TOP_HEADERS})
foreach(_folder IN LISTS FOLDERS)
  file(GLOB_RECURSE _found RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${_folder}/*.h)
  foreach(_h IN LISTS _found)
    if(NOT _h MATCHES "(^|/)internal/")
      list(APPEND _todo ${_h})
    endif()
  endforeach()
endforeach()
set(_staged "")
while(_todo)
  list(POP_FRONT _todo _h)
  if(_h IN_LIST _staged)
    continue()
  endif()
  if(NOT EXISTS ${SOURCE_DIR}/${_h})
    message(FATAL_ERROR "stage_headers: ${_h} is included by a public header but does not exist")
  endif()
  list(APPEND _staged ${_h})
  file(READ ${SOURCE_DIR}/${_h} _text)
  string(REGEX MATCHALL "#[ \t]*include[ \t]*<[^>]*>" _system "${_text}")
  foreach(_inc IN LISTS _system)
    if(_inc MATCHES "${_forbidden_re}")
      message(FATAL_ERROR "stage_headers: the public header ${_h} has '${_inc}'; installed headers may include "
                          "only the standard library and tapeflow headers (keep third-party includes in .cc "
                          "files and internal/ headers that no public header includes)")
    endif()
    if(_h IN_LIST BRIDGE_HEADERS AND _inc MATCHES "<nlohmann/json\\.hpp>$")
      continue()
    endif()
    if(NOT _inc MATCHES "<[a-z0-9_]+>$")
      message(FATAL_ERROR "stage_headers: the public header ${_h} has '${_inc}'; installed headers may include "
                          "only the standard library and tapeflow headers (nlohmann-json only in the opt-in "
                          "bridge json.h); a public dependency must be added here, to tapeflowConfig.cmake, "
                          "the DEB's Depends and the README's list")
    endif()
  endforeach()
  string(REGEX MATCHALL "${_include_re}" _project "${_text}")
  foreach(_inc IN LISTS _project)
    string(REGEX REPLACE "${_include_re}" "\\1" _dep "${_inc}")
    list(APPEND _todo ${_dep})
  endforeach()
  string(REGEX REPLACE "(#[ \t]*include[ \t]*\")((${_folder_alt})/)" "\\1tapeflow/\\2" _text "${_text}")
  set(_out ${OUTPUT_DIR}/tapeflow/${_h})
  set(_old "")
  if(EXISTS ${_out})
    file(READ ${_out} _old)
  endif()
  if(NOT _old STREQUAL _text)  # unchanged headers keep their timestamps
    file(WRITE ${_out} "${_text}")
  endif()
endwhile()

# Drop headers that are no longer public (deleted or moved).
file(GLOB_RECURSE _present RELATIVE ${OUTPUT_DIR}/tapeflow ${OUTPUT_DIR}/tapeflow/*)
foreach(_h IN LISTS _present)
  if(NOT _h IN_LIST _staged)
    file(REMOVE ${OUTPUT_DIR}/tapeflow/${_h})
  endif()
endforeach()
file(TOUCH ${STAMP})
