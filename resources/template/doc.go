// Package template renders CCM-style templates in manifest values.
//
// A string may hold expressions in `{{ expr }}` or `${ expr }`, written in
// expr-lang (https://expr-lang.org). Expressions see the variables Data,
// Facts and Environ (also spelled data, facts, environ), expr-lang's
// builtins (upper, lower, trim, split, join, ...) and CCM's functions
// (the table in functions.go; adding one is one entry there):
//
//	lookup('data.port')                          // error when missing
//	lookup('facts.host.info.platformFamily', '') // default when missing
//	lookup('data.servers.0')                     // list index
//	lookup('env.HOME')                           // environ, also 'environ.HOME'
//	file('files/motd.txt'), readFile(...)        // a file's text, under Scope.Dir
//	template('conf/app.templ')                   // a {{ }} template file (.jet: Jet)
//	jet('[[ Data.port ]]'), jet('conf/app.jet')  // Jet, [[ ]] or given delimiters
//
// File paths are relative to Scope.Dir and never leave it: absolute paths,
// ".." and symlinks leading out are ErrOutsideDir; files are bounded by
// MaxFileSize and nesting by MaxDepth.
//
// A string that is exactly one expression renders to the expression's
// native value (an int stays an int, a map a map); any other text around or
// between expressions makes the result a string, values formatted with %v
// and maps and lists as JSON, nil as the empty string.
//
// A backslash before an opener keeps it literal: `\${HOME}` renders as
// `${HOME}` and `\{{` as `{{`. An opener without its closer is an error
// (*SyntaxError) rather than literal text, so a typo such as
// `{{ lookup('data.port') }` never reaches a config file unrendered.
package template
