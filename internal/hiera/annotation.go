package hiera

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"gopkg.in/yaml.v3"
)

// Annotation is what the comments above (or beside) one data key ask of its
// resolved value:
//
//	data:
//	  # @require
//	  # @validate isIPv4(value) || isIPv6(value)
//	  listen_address: 10.0.0.1
type Annotation struct {
	// Key is the dotted path under data ("web.listen_port").
	Key string
	// Line is the key's line in the source.
	Line int
	// Required is set by @require (or @required): the value must not be
	// missing, null or the empty string (false and 0 are values).
	Required bool
	// Validate holds the expressions of @validate lines; every one must be
	// true. CCM keeps only the last; all of them are checked here.
	Validate []string
	// Unknown lists other "@word" directives (typos such as @requird), for
	// the caller to warn about; CCM warns too.
	Unknown []string
}

// Annotations reads the annotations of the top-level `data:` section of a
// YAML manifest. Directives are comment lines starting with "@", in the
// comment block above a key or at the end of its line; keys of nested maps
// get dotted paths; items of lists are not annotated. Comments elsewhere
// (overrides included) are ignored. A YAML syntax error is returned as is.
func Annotations(yamlSrc []byte) ([]Annotation, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(yamlSrc, &doc); err != nil {
		return nil, fmt.Errorf("hiera: annotations: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil
	}
	top := doc.Content[0]
	var out []Annotation
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "data" && top.Content[i+1].Kind == yaml.MappingNode {
			out = walk(top.Content[i+1], "", out)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out, nil
}

func walk(m *yaml.Node, prefix string, out []Annotation) []Annotation {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		a := Annotation{Key: prefix + k.Value, Line: k.Line}
		for _, c := range []string{k.HeadComment, k.LineComment, v.LineComment} {
			parseDirectives(c, &a)
		}
		if a.Required || len(a.Validate) > 0 || len(a.Unknown) > 0 {
			out = append(out, a)
		}
		if v.Kind == yaml.MappingNode {
			out = walk(v, a.Key+".", out)
		}
	}
	return out
}

func parseDirectives(comment string, a *Annotation) {
	for _, line := range strings.Split(comment, "\n") {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if !strings.HasPrefix(line, "@") {
			continue
		}
		directive, arg, _ := strings.Cut(line, " ")
		switch directive {
		case "@require", "@required":
			a.Required = true
		case "@validate":
			if arg = strings.TrimSpace(arg); arg != "" {
				a.Validate = append(a.Validate, arg)
			} else {
				a.Unknown = append(a.Unknown, line)
			}
		default:
			a.Unknown = append(a.Unknown, line)
		}
	}
}

// Check checks resolved data against annotations and returns every
// violation at once (errors.Join of *AnnotationError, each naming the key
// and its line). @require comes first; a missing or null value skips
// @validate. @validate is skipped for maps and lists (annotate their keys
// instead); other values are checked as their string form, bound to
// `value`, with these functions (CCM's validator, both spellings):
// isIP/is_ip, isIPv4/is_ipv4, isIPv6/is_ipv6, isInt/is_int,
// isFloat/is_float, isDuration/is_duration, isRegex(value, re)/is_regex,
// isShellSafe/is_shellsafe, isHostname/is_hostname, isFQDN/is_fqdn. An
// expression that fails to compile or does not return a bool is a
// violation too.
func Check(data map[string]any, annotations []Annotation) error {
	var errs []error
	for _, a := range annotations {
		v, found := get(data, a.Key)
		if a.Required && (!found || v == nil || v == "") {
			msg := "a value is required"
			if found {
				msg = fmt.Sprintf("a value is required, got %#v", v)
			}
			errs = append(errs, &AnnotationError{Key: a.Key, Line: a.Line, Rule: "@require", Message: msg})
			continue
		}
		if !found || v == nil {
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
			continue
		}
		s, ok := v.(string)
		if !ok {
			s = fmt.Sprint(v)
		}
		for _, e := range a.Validate {
			if msg := validate(e, s); msg != "" {
				errs = append(errs, &AnnotationError{Key: a.Key, Line: a.Line, Rule: "@validate " + e, Message: msg})
			}
		}
	}
	return errors.Join(errs...)
}

// validate returns why value fails expression e, or "".
func validate(e, value string) string {
	env := validators(value)
	out, err := expr.Eval(e, env)
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		return "invalid expression: " + first
	}
	ok, isBool := out.(bool)
	switch {
	case !isBool:
		return fmt.Sprintf("expression returned %T, not a bool", out)
	case !ok:
		return fmt.Sprintf("%q is not valid", value)
	}
	return ""
}

func validators(value string) map[string]any {
	env := map[string]any{"value": value}
	add := func(camel, snake string, f any) {
		env[camel], env[snake] = f, f
	}
	str := func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		return fmt.Sprint(v)
	}
	ip := func(v any) net.IP { return net.ParseIP(str(v)) }
	add("isIP", "is_ip", func(v any) bool { return ip(v) != nil })
	add("isIPv4", "is_ipv4", func(v any) bool { return ip(v) != nil && !strings.Contains(str(v), ":") })
	add("isIPv6", "is_ipv6", func(v any) bool { return ip(v) != nil && strings.Contains(str(v), ":") })
	add("isInt", "is_int", func(v any) bool { _, err := strconv.ParseInt(str(v), 10, 64); return err == nil })
	add("isFloat", "is_float", func(v any) bool { _, err := strconv.ParseFloat(str(v), 64); return err == nil })
	add("isDuration", "is_duration", func(v any) bool { return isDuration(str(v)) })
	add("isRegex", "is_regex", func(v any, re string) (bool, error) {
		r, err := regexp.Compile(re)
		if err != nil {
			return false, err
		}
		return r.MatchString(str(v)), nil
	})
	add("isShellSafe", "is_shellsafe", func(v any) bool { return !strings.ContainsAny(str(v), "`$;|&><\n\r") })
	add("isHostname", "is_hostname", func(v any) bool { return isHostname(str(v), false) })
	add("isFQDN", "is_fqdn", func(v any) bool { return isHostname(str(v), true) })
	return env
}

var durationTerm = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(d|w|M|y)$`) })

// isDuration accepts Go durations ("1h30m") and one-unit days, weeks,
// months and years ("2d", "1w", "6M", "1y") as fisk does.
func isDuration(s string) bool {
	if _, err := time.ParseDuration(s); err == nil {
		return true
	}
	return durationTerm().MatchString(s)
}

var hostLabel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`) })

// isHostname checks RFC 1123; fqdn requires at least two labels.
func isHostname(s string, fqdn bool) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if fqdn && len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if !hostLabel().MatchString(l) {
			return false
		}
	}
	return true
}

// get walks a dotted key through nested maps.
func get(data map[string]any, key string) (any, bool) {
	var cur any = data
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
