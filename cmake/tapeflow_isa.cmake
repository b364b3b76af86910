# Kernel sources compiled once per instruction-set level (tape/core/cpu_isa.h).
#
# tapeflow_per_isa_sources(<library> LEVELS <level>... SOURCES <file>... DEPS <targets>...)
# compiles each file once per level into an object library with -DTAPEFLOW_KERNEL_ISA=isa_<level>
# (the file puts what it exports in namespace isa_<level>) and the level's flags
# (TAPEFLOW_ISA_FLAGS_<level>), and adds the objects to <library>. Objects above the baseline go
# through cmake/isa_localize.sh, which renames their copies of every shared inline function and
# template instantiation (the ODR hazard: the linker keeps one copy of each name for the whole
# program, and could keep the AVX2 one for baseline callers). Only x86-64 has levels above baseline.
set(TAPEFLOW_ISA_FLAGS_baseline "")
# F16C (the half conversions of ukernels/convert_loops.cc) comes with every AVX2 CPU; cpu_isa()
# checks it for kAvx2.
set(TAPEFLOW_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c)
# Only the register tiles (tape/kernels/ukernels/) are compiled for avx512: files of intrinsics over
# ukernels/internal/vec.h, no braced-list constants (GCC 12's AVX-512 miscompiles, issue 31), and
# tuning stays generic.
set(TAPEFLOW_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND "-mno-avx512f" IN_LIST TAPEFLOW_ARCH_FLAGS)
  # The opt-in native build with GCC < 13 switches AVX-512 off everywhere (CMakeLists.txt): no
  # avx512 level, and the drivers do not call its tiles (internal/simd512.h).
  set(TAPEFLOW_ISA_LEVELS baseline avx2)
  target_compile_definitions(tapeflow_options INTERFACE $<BUILD_INTERFACE:TAPEFLOW_NO_AVX512_TILES>)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(TAPEFLOW_ISA_LEVELS baseline avx2 avx512)
else()
  set(TAPEFLOW_ISA_LEVELS baseline)
endif()

function(tapeflow_per_isa_sources library)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "LEVELS;SOURCES;DEPS")
  foreach(src ${ARG_SOURCES})
    # Objects are named <folder>_<file> (conv_direct, ukernels_igemm): file names repeat
    # across kernel folders, and the archive members' names say where the code came from.
    get_filename_component(_base ${src} NAME_WE)
    get_filename_component(_dir ${src} DIRECTORY)
    get_filename_component(_dir ${_dir} NAME)
    set(_name ${_dir}_${_base})
    foreach(level ${ARG_LEVELS})
      if(NOT level IN_LIST TAPEFLOW_ISA_LEVELS)
        continue()
      endif()
      set(_obj ${library}_${_name}_${level})
      add_library(${_obj} OBJECT ${src})
      target_link_libraries(${_obj} PRIVATE tapeflow_options ${ARG_DEPS})
      target_compile_definitions(${_obj} PRIVATE TAPEFLOW_KERNEL_ISA=isa_${level} TAPEFLOW_KERNEL_LEVEL_${level}=1)
      target_compile_options(${_obj} PRIVATE ${TAPEFLOW_ISA_FLAGS_${level}})
      set_property(GLOBAL APPEND PROPERTY TAPEFLOW_ISA_OBJECT_TARGETS_${level} ${_obj})
      if(level STREQUAL "baseline")
        target_sources(${library} PRIVATE $<TARGET_OBJECTS:${_obj}>)
      else()
        set(_out ${CMAKE_CURRENT_BINARY_DIR}/isa/${_name}.${level}.o)
        add_custom_command(OUTPUT ${_out}
          COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/isa_localize.sh rename ${CMAKE_NM} ${CMAKE_OBJCOPY} isa_${level}
                  $<TARGET_OBJECTS:${_obj}> ${_out}
          DEPENDS ${_obj} $<TARGET_OBJECTS:${_obj}> ${PROJECT_SOURCE_DIR}/cmake/isa_localize.sh
          COMMENT "Renaming the shared inline code of ${_name} (${level})" VERBATIM)
        set_source_files_properties(${_out} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
        target_sources(${library} PRIVATE ${_out})
        set_property(GLOBAL APPEND PROPERTY TAPEFLOW_ISA_OBJECTS_${level} ${_out})
      endif()
    endforeach()
  endforeach()
endfunction()
