# weft_link_linked_stacks(<target>): build <target> for linked stacks
# (docs/stacks.md). Its own code gets -fsplit-stack (every function a
# checkpoint), and the external functions known to be deep (exceptions,
# malloc, stdio) are wrapped so that they run on a chunk with room
# (src/arch/x86_64/morestack_sysv_elf.S). Link the target with
# weft::weft_static: the __morestack its prologues call must be weft's. Threads get linked stacks with
# WEFT_STACKS=linked or weft_thread_attr.stacks = WEFT_STACKS_LINKED; fixed-
# stack threads of the same program pay one never-taken compare per call.
function(weft_link_linked_stacks target)
  target_compile_options(${target} PRIVATE -fsplit-stack)
  # -u: the wrappers reach the real functions through weak __real_ symbols,
  # which alone would not pull them out of a static libstdc++/libgcc_eh.
  # libstdc++ and libgcc statically, and -z now: a lazily bound PLT entry
  # runs the dynamic linker's resolver, which saves the vector registers
  # on the stack (3 KiB here) at the first call of every function.
  set(opts -static-libstdc++ -static-libgcc -Wl,-z,now)
  foreach(sym IN LISTS WEFT_LINKED_STACK_WRAPS)
    list(APPEND opts -Wl,--wrap=${sym} -Wl,-u,${sym})
  endforeach()
  target_link_options(${target} PRIVATE ${opts})
endfunction()

# The external functions with a wrapper that asks for their trusted bound
# (the WEFT_WRAP lines of src/arch/x86_64/morestack_sysv_elf.S).
set(WEFT_LINKED_STACK_WRAPS
  __cxa_throw __cxa_rethrow _Unwind_Resume __cxa_allocate_exception
  malloc calloc realloc free
  printf fprintf vprintf vfprintf sprintf snprintf vsprintf vsnprintf puts fputs fwrite
  getaddrinfo)

# weft_checkpoints_from_analysis(<target> MAXPATH <bytes>): mechanism B of
# docs/stacks.md for a target already set up with weft_link_linked_stacks —
# split-stack prologues only in the functions stackcheck's checkpoints need.
# Its sources are compiled twice: once for their call graph
# (-fcallgraph-info=su, an object library nobody links), which stackcheck
# turns into the list of checkpoint functions, and once for real with the
# weft_checkpoints gcc plugin reading that list. The program also defines
# weft_stack_maxpath, so that every check leaves MaxPath for the unchecked
# functions below it. In weft's own build tree only (the plugin target and
# tools/stackcheck); skipped, with a message, without the plugin.
#
# External functions the analysis finds no trusted bound for (neither in
# stackcheck's libc.bounds nor in weft.bounds) get wrappers generated from
# it (tools/stackcheck/gen_wraps.py): each call runs one on a chunk of
# EXTERNAL_CHUNK bytes (default 16384), as the paper runs external code on
# a large chunk. NO_WRAPS leaves them on MaxPath's slack (a test's control).
#
# The plugin also puts the analysis' figures for each thread entry into the
# program (stackcheck --entry-stacks): a thread started there gets a first
# chunk that holds the path to its first checkpoint, or exactly its static
# bound when that is at most MinChunk (it then never links). NO_ENTRY_STACKS
# leaves first chunks at the default size (a test's control).
function(weft_checkpoints_from_analysis target)
  cmake_parse_arguments(arg "NO_WRAPS;NO_ENTRY_STACKS" "MAXPATH;EXTERNAL_CHUNK" "" ${ARGN})
  if(NOT arg_MAXPATH)
    set(arg_MAXPATH 2048)
  endif()
  if(NOT arg_EXTERNAL_CHUNK)
    set(arg_EXTERNAL_CHUNK 16384)
  endif()
  if(NOT TARGET weft_checkpoints)
    message(STATUS "${target}: no weft_checkpoints plugin, every function checks (mechanism A)")
    return()
  endif()
  get_target_property(srcs ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  # The analysis compiles copies: the real sources depend on its result.
  set(analysis ${target}_callgraph)
  set(copies)
  foreach(src IN LISTS srcs)
    if(NOT IS_ABSOLUTE ${src})
      set(src ${dir}/${src})
    endif()
    get_filename_component(name ${src} NAME)
    configure_file(${src} ${CMAKE_CURRENT_BINARY_DIR}/${analysis}/${name} COPYONLY)
    list(APPEND copies ${CMAKE_CURRENT_BINARY_DIR}/${analysis}/${name})
  endforeach()
  add_library(${analysis} OBJECT EXCLUDE_FROM_ALL ${copies})
  # ... with the target's include directories, definitions and libraries
  # (for their usage requirements): call this after those are set.
  target_include_directories(${analysis} PRIVATE ${dir})
  foreach(prop LINK_LIBRARIES COMPILE_DEFINITIONS INCLUDE_DIRECTORIES)
    get_target_property(v ${target} ${prop})
    if(v)
      if(prop STREQUAL "LINK_LIBRARIES")
        target_link_libraries(${analysis} PRIVATE ${v})
      elseif(prop STREQUAL "COMPILE_DEFINITIONS")
        target_compile_definitions(${analysis} PRIVATE ${v})
      else()
        target_include_directories(${analysis} PRIVATE ${v})
      endif()
    endif()
  endforeach()
  target_compile_options(${analysis} PRIVATE -fsplit-stack -fcallgraph-info=su)
  set(list ${CMAKE_CURRENT_BINARY_DIR}/${target}.checkpoints)
  set(wraps ${CMAKE_CURRENT_BINARY_DIR}/${target}_wraps)
  set(tools ${PROJECT_SOURCE_DIR}/tools/stackcheck)
  set(entries ${CMAKE_CURRENT_BINARY_DIR}/${target}.entries)
  add_custom_command(OUTPUT ${list} ${wraps}.list ${entries}
    COMMAND ${Python3_EXECUTABLE} ${tools}/stackcheck.py
            ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${analysis}.dir
            --max-path ${arg_MAXPATH} --red-zone 128
            --bounds ${tools}/weft.bounds
            --checkpoint-functions ${list}
            --wrap-externals ${wraps}.list --external-chunk ${arg_EXTERNAL_CHUNK}
            --entry-stacks ${entries} > ${list}.report
    DEPENDS ${analysis} $<TARGET_OBJECTS:${analysis}> ${tools}/stackcheck.py ${tools}/weft.bounds
    COMMENT "stackcheck: checkpoint functions of ${target} (MaxPath ${arg_MAXPATH})"
    VERBATIM)
  add_custom_target(${target}_checkpoints DEPENDS ${list})
  if(NOT arg_NO_WRAPS)
    add_custom_command(OUTPUT ${wraps}.S ${wraps}.ld
      COMMAND ${Python3_EXECUTABLE} ${tools}/gen_wraps.py ${wraps}.list ${wraps}
              --include ${PROJECT_SOURCE_DIR}/src/arch/x86_64/morestack_wrap.inc
              --exclude "${WEFT_LINKED_STACK_WRAPS}"
      DEPENDS ${wraps}.list ${tools}/gen_wraps.py ${PROJECT_SOURCE_DIR}/src/arch/x86_64/morestack_wrap.inc
      COMMENT "gen_wraps: wrappers of ${target}'s unbounded external functions"
      VERBATIM)
    target_sources(${target} PRIVATE ${wraps}.S)
    target_link_options(${target} PRIVATE @${wraps}.ld)
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${wraps}.ld)
  endif()
  add_dependencies(${target} ${target}_checkpoints weft_checkpoints)
  set(plugin_args -fplugin=$<TARGET_FILE:weft_checkpoints> -fplugin-arg-weft_checkpoints-list=${list})
  if(NOT arg_NO_ENTRY_STACKS)
    list(APPEND plugin_args -fplugin-arg-weft_checkpoints-entries=${entries})
  endif()
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${plugin_args}>")
  foreach(src IN LISTS srcs)
    if(NOT IS_ABSOLUTE ${src})
      set(src ${dir}/${src})
    endif()
    set_property(SOURCE ${src} APPEND PROPERTY OBJECT_DEPENDS ${list} ${entries})
  endforeach()
  set(gen ${CMAKE_CURRENT_BINARY_DIR}/${target}_maxpath.c)
  file(WRITE ${gen} "/* generated by weft_checkpoints_from_analysis */\n"
                    "const unsigned long weft_stack_maxpath = ${arg_MAXPATH};\n")
  target_sources(${target} PRIVATE ${gen})
endfunction()
