// Package scaffold implements the scaffold resource type (CCM's): a
// directory of templates, the source, rendered into a target directory,
// the resource's name.
//
// Every regular file under the source is a template rendered to the same
// relative path under the target, except files under a directory named
// _partials, which templates include with render(path, .) and which are
// never written. Templates use the jet engine (the default, [[ ]]
// delimiters) or the go engine (text/template, {{ }}); left_delimiter and
// right_delimiter change them. Templates see Data (the run's data, or the
// data property when set), Facts and Environ, in both spellings (data,
// facts, environ), and the functions lookup, file, readFile and template,
// plus render(path, data) and write(path, content), which adds a file.
//
// The check renders everything in memory and compares it with the target:
// a file is changed when it is missing or its content differs. Apply writes
// only changed files, each through a temporary file renamed into place
// (updated files keep their permissions, new ones get 0644), then runs the
// post commands whose glob matches the file's base name, and, with purge,
// removes the files under the target the templates did not produce.
// skip_empty leaves out files that render to whitespace only. Symbolic
// links in the target are never followed: a link where a file goes is
// replaced, a link where a directory goes is an error. ensure absent
// removes the files the templates produce, then empty directories, then
// the target when it is empty.
//
// Post commands run only after their file was written, so a command that
// rewrites the file's content (a formatter) makes it differ from the
// template at the next check: format the template instead. CCM runs them
// on every check in a scratch copy; running them only on change is what a
// command such as chmod or a reload needs.
package scaffold
