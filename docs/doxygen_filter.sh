#!/bin/sh
# Doxygen INPUT_FILTER (docs/Doxyfile.in). tapeflow's public headers document each declaration with
# a plain // comment block just above it (DESIGN.md, Abseil style: a title line, then labelled facts);
# Doxygen reads only ///. This turns every comment line that starts a line into ///, so each block
# documents the declaration below it (a trailing comment after a member or enumerator, `int n;  // ...`,
# documents that member as ///<), makes the banner
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
  # A comment line under a trailing comment, at its column, continues it.
  /^[[:space:]]*\/\/([^\/]|$)/ && trail && index($0, "//") == trail {
    at = index($0, "//"); d = doc("//" substr($0, at + 2)); print substr($0, 1, at - 1) "///<" substr(d, 4); next
  }
  { trail = 0 }
  /^[[:space:]]*\/\/([^\/]|$)/ { print doc($0); next }
  # A member or enumerator with a trailing comment (int units = 0;  // ...): the comment is its doc.
  /[;,][[:space:]]*\/\/[^\/]/ {
    at = index($0, "//"); code = substr($0, 1, at - 1)
    if (code !~ /"/ && code ~ /[;,][[:space:]]*$/) { d = doc("//" substr($0, at + 2)); print code "///<" substr(d, 4); trail = at; next }
  }
  { print }
' "$1"
