#!/usr/bin/env bash
# isa_localize.sh rename NM OBJCOPY TAG IN OUT: copies object IN to OUT with every defined weak
# symbol (W, V, u: inline functions, template instantiations, their static locals, vtables), and
# every COMDAT group signature, whose name does not contain TAG renamed to NAME.TAG.
# isa_localize.sh list NM TAG IN: prints those names (none after renaming: the CTest check).
# Used on the objects compiled for one instruction-set level (cmake/tapeflow_isa.cmake): their
# copies of std, Eigen, oneTBB and project inline code are compiled for that level, and left as
# they are the linker could keep them for every caller in the program (one definition per name),
# so a baseline caller could run AVX2 code. Renamed, they serve this object alone; what the object
# exports is in namespaces named TAG (isa_avx2).
set -euo pipefail

# shared_names NM TAG IN
shared_names() {
  local nm="$1" tag="$2" in="$3" readelf
  readelf="${nm%nm}readelf"
  command -v "$readelf" > /dev/null || readelf=readelf
  {
    "$nm" -P --defined-only "$in" | awk '$2 == "W" || $2 == "V" || $2 == "u" { print $1 }'
    # COMDAT group signatures: a constructor's or destructor's group is named by its C5 / D5
    # name, a local symbol of its own; renamed too, so the linker never merges the group with
    # another object's (which would drop one of the two copies and leave renamed names undefined).
    "$readelf" -gW "$in" | sed -n "s/^COMDAT group section \[ *[0-9]*\] \`.group' \[\(.*\)\] contains.*/\1/p"
  } | awk -v tag="$tag" 'index($1, tag) == 0' | sort -u
}

case "$1" in
  rename)
    nm="$2" objcopy="$3" tag="$4" in="$5" out="$6"
    shared_names "$nm" "$tag" "$in" | awk -v tag="$tag" '{ print $1, $1 "." tag }' > "$out.syms"
    "$objcopy" --redefine-syms="$out.syms" "$in" "$out"
    ;;
  list) shared_names "$2" "$3" "$4" ;;
  *) echo "isa_localize.sh: rename NM OBJCOPY TAG IN OUT | list NM TAG IN" >&2; exit 2 ;;
esac
