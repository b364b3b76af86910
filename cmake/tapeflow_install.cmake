# The installed, exported package: `cmake --install build --prefix P`, then in any CMake project
# (C++ only is enough) `find_package(tapeflow REQUIRED)` with P on CMAKE_PREFIX_PATH and
# `target_link_libraries(app PRIVATE tapeflow::tapeflow)`; sources write #include <tapeflow/tapeflow.h>.
#
# What is installed (no list to edit when a library or header is added):
#   lib/libtapeflow_tape.a, ... every tapeflow_library() target (global property TAPEFLOW_LIBRARIES),
#                            plus tapeflow_options (usage requirements: cxx_std_20, include dir)
#                            and the umbrella tapeflow
#   include/tapeflow/...     tapeflow.h, json.h (the opt-in nlohmann-json bridge: tapeflow::json) and
#                            the public headers of every tapeflow_library() folder, staged at build
#                            time by cmake/stage_headers.cmake (internal/ headers only when a public
#                            header includes them; project includes rewritten to "tapeflow/...")
#   lib/cmake/tapeflow/      tapeflowConfig.cmake, tapeflowConfigVersion.cmake, tapeflowTargets.cmake,
#                            tapeflow_<component>Targets.cmake per tapeflow_component() (distribute, json)
#   lib/pkgconfig/tapeflow.pc, share/doc/tapeflow/LICENSE, bin/<app> (apps/CMakeLists.txt)
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
set(_tapeflow_headers ${PROJECT_SOURCE_DIR}/tapeflow.h ${PROJECT_SOURCE_DIR}/json.h)
foreach(_dir IN LISTS _tapeflow_header_folders)
  file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${_dir}/*.h)
  list(APPEND _tapeflow_headers ${_found})
endforeach()
set(TAPEFLOW_STAGED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/include)
add_custom_command(
  OUTPUT ${PROJECT_BINARY_DIR}/tapeflow_headers.stamp
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT_DIR=${TAPEFLOW_STAGED_INCLUDE_DIR}
          "-DFOLDERS=${_tapeflow_header_folders}" "-DTOP_HEADERS=tapeflow.h;json.h" -DBRIDGE_HEADERS=json.h
          -DSTAMP=${PROJECT_BINARY_DIR}/tapeflow_headers.stamp -P ${PROJECT_SOURCE_DIR}/cmake/stage_headers.cmake
  DEPENDS ${_tapeflow_headers} ${PROJECT_SOURCE_DIR}/cmake/stage_headers.cmake
  COMMENT "Staging tapeflow's public headers for install"
  VERBATIM)
add_custom_target(tapeflow_headers ALL DEPENDS ${PROJECT_BINARY_DIR}/tapeflow_headers.stamp)

target_include_directories(tapeflow_options INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
# Components (tapeflow_component(), e.g. distribute) are exported on their own, so that
# find_package(tapeflow) needs only the core's dependencies.
get_property(_tapeflow_components GLOBAL PROPERTY TAPEFLOW_COMPONENTS)
set(_tapeflow_core_libraries ${_tapeflow_libraries})
if(_tapeflow_components)
  list(REMOVE_ITEM _tapeflow_core_libraries ${_tapeflow_components})
endif()
install(TARGETS tapeflow_options ${_tapeflow_core_libraries} tapeflow EXPORT tapeflowTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${TAPEFLOW_STAGED_INCLUDE_DIR}/tapeflow DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tapeflowTargets NAMESPACE tapeflow:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapeflow)
set(TAPEFLOW_COMPONENT_BLOCKS "")
foreach(_comp IN LISTS _tapeflow_components)
  install(TARGETS ${_comp} EXPORT tapeflow_${_comp}Targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT tapeflow_${_comp}Targets NAMESPACE tapeflow:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tapeflow)
  get_property(_dep GLOBAL PROPERTY TAPEFLOW_COMPONENT_DEPENDENCY_${_comp})
  string(APPEND TAPEFLOW_COMPONENT_BLOCKS
         "if(\"${_comp}\" IN_LIST tapeflow_FIND_COMPONENTS)\n"
         "  find_dependency(${_dep})\n"
         "  include(\"\${CMAKE_CURRENT_LIST_DIR}/tapeflow_${_comp}Targets.cmake\")\n"
         "  set(tapeflow_${_comp}_FOUND TRUE)\n"
         "endif()\n")
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})

# pkg-config: `pkg-config --cflags --libs tapeflow` (static libraries: their dependencies' .pc
# files are listed in Requires so plain --libs links them; add -std=c++20 yourself).
set(TAPEFLOW_PC_LIBS "")
foreach(_lib models data optimizers layers tape)  # dependents first, for static linking
  string(APPEND TAPEFLOW_PC_LIBS " -ltapeflow_${_lib}")
endforeach()
file(RELATIVE_PATH TAPEFLOW_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${PROJECT_SOURCE_DIR}/cmake/tapeflow.pc.in ${PROJECT_BINARY_DIR}/tapeflow.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tapeflow.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

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

# A Debian package of the install: `cpack -G DEB` in the build directory (CTest debian_package
# builds one and the README's project against it). Installs under /usr; depends on the
# development packages the installed targets link.
set(CPACK_PACKAGE_NAME tapeflow)
set(CPACK_PACKAGE_VENDOR tapeflow)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 neural networks the TensorFlow 2 / Keras way (GradientTape, layers, models)")
set(CPACK_PACKAGE_CONTACT "tapeflow developers <tapeflow@localhost>")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# What tapeflowConfig.cmake's find_dependency calls and the static libraries' private links need;
# nlohmann-json only for COMPONENTS json (<tapeflow/json.h>), so it is a suggestion.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libtbb-dev, libspdlog-dev, zlib1g-dev, libhdf5-dev, libprotobuf-dev, libonnx-dev, libzip-dev")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libopenmpi-dev, nlohmann-json3-dev, dataset-fashion-mnist")
include(CPack)
