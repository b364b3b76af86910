# The installed, exported package: `cmake --install build --prefix P`, then in any CMake project
# (C++ only is enough) `find_package(tapeflow REQUIRED)` with P on CMAKE_PREFIX_PATH and
# `target_link_libraries(app PRIVATE tapeflow::tapeflow)`; sources write #include <tapeflow/tapeflow.h>.
#
# What is installed (no list to edit when a library or header is added):
#   lib/libtape.a, ...       every tapeflow_library() target (global property TAPEFLOW_LIBRARIES),
#                            plus tapeflow_options (usage requirements: cxx_std_20, include dir)
#                            and the umbrella tapeflow
#   include/tapeflow/...     the public headers of every tapeflow_library() folder, staged at build
#                            time by cmake/stage_headers.cmake (internal/ headers only when a public
#                            header includes them; project includes rewritten to "tapeflow/...")
#   lib/cmake/tapeflow/      tapeflowConfig.cmake, tapeflowConfigVersion.cmake, tapeflowTargets.cmake
# A library whose installed targets need a package in the consumer calls
#   tapeflow_package_dependency("MPI COMPONENTS CXX")   (before this file is included)
# so the config runs find_dependency(MPI COMPONENTS CXX).
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(_tapeflow_libraries GLOBAL PROPERTY TAPEFLOW_LIBRARIES)
get_property(_tapeflow_header_folders GLOBAL PROPERTY TAPEFLOW_HEADER_FOLDERS)
list(REMOVE_DUPLICATES _tapeflow_header_folders)

# Public headers, staged as installed (build/include/tapeflow/...), rebuilt when a header changes;
# a new or deleted header re-runs the glob (CONFIGURE_DEPENDS).
set(_tapeflow_headers ${PROJECT_SOURCE_DIR}/tapeflow.h)
foreach(_dir IN LISTS _tapeflow_header_folders)
  file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${_dir}/*.h)
  list(APPEND _tapeflow_headers ${_found})
endforeach()
set(TAPEFLOW_STAGED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
add_custom_command(
  OUTPUT ${PROJECT_BINARY_DIR}/tapeflow_headers.stamp
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT_DIR=${TAPEFLOW_STAGED_INCLUDE_DIR}
          "-DFOLDERS=${_tapeflow_header_folders}" -DTOP_HEADERS=tapeflow.h
          -DSTAMP=${PROJECT_BINARY_DIR}/tapeflow_headers.stamp -P ${PROJECT_SOURCE_DIR}/cmake/stage_headers.cmake
  DEPENDS ${_tapeflow_headers} ${PROJECT_SOURCE_DIR}/cmake/stage_headers.cmake
  COMMENT "Staging tapeflow's public headers for install"
  VERBATIM)
add_custom_target(tapeflow_headers ALL DEPENDS ${PROJECT_BINARY_DIR}/tapeflow_headers.stamp)

target_include_directories(tapeflow_options INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS tapeflow_options ${_tapeflow_libraries} tapeflow EXPORT tapeflowTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${TAPEFLOW_STAGED_INCLUDE_DIR}/tapeflow DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tapeflowTargets NAMESPACE tapeflow:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapeflow)

# HDF5 is linked privately by models/ (no installed header includes it). The consumer gets it as
# tapeflow::hdf5, made by the config from the libraries this build linked, instead of CMake's
# FindHDF5, whose try_compile needs the C language that a C++-only project has not enabled.
set(TAPEFLOW_HDF5_LIBRARIES "${HDF5_C_LIBRARIES}")
get_property(_deps GLOBAL PROPERTY TAPEFLOW_PACKAGE_DEPENDENCIES)
set(TAPEFLOW_EXTRA_DEPENDENCIES "")
foreach(_dep IN LISTS _deps)
  string(APPEND TAPEFLOW_EXTRA_DEPENDENCIES "find_dependency(${_dep})\n")
endforeach()
configure_package_config_file(cmake/tapeflowConfig.cmake.in ${PROJECT_BINARY_DIR}/tapeflowConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapeflow)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tapeflowConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tapeflowConfig.cmake ${PROJECT_BINARY_DIR}/tapeflowConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapeflow)
