#!/bin/sh
# Doxygen INPUT_FILTER (docs/Doxyfile.in). tapeflow's public headers document each declaration with
# a plain // comment block just above it (DESIGN.md, Abseil style: a title line, then labelled facts);
# Doxygen reads only ///. This turns every comment line that starts a line into ///, so each block
# documents the declaration below it (trailing comments after code stay plain), makes the banner
# before the first preprocessor line the file's own documentation (@file), and escapes the characters
# Doxygen would read as commands or HTML (\ < > & @ #): the comments are plain text.
exec awk '
  function doc(line) {
    sub(/\/\/+/, "///", line)
    head = substr(line, 1, index(line, "///") + 2); body = substr(line, index(line, "///") + 3)
    gsub(/\\/, "\\\\\\\\", body); gsub(/</, "\\<", body); gsub(/>/, "\\>", body)
    gsub(/&/, "\\&", body); gsub(/@/, "\\@", body); gsub(/#/, "\\#", body)
    return head body
  }
  BEGIN { banner = 1 }
  banner && /^#/ { banner = 0 }
  banner && /^[[:space:]]*\/\// && FILENAME ~ /tapeflow\.h$/ && FILENAME !~ /\/(tape|layers|optimizers|data|models|distribute)\// { next }
  banner && /^[[:space:]]*\/\// { if (!filed) { print "/// @file"; filed = 1 } print doc($0); next }
  /^[[:space:]]*\/\/([^\/]|$)/ { print doc($0); next }
  { print }
' "$1"
