package bus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// ErrAmbiguousKey is a request whose JSON says one thing twice: a key
// repeated in one object, or a key that differs from a field of the
// request only by case ("NOOP" beside "noop"). encoding/json would take
// the last duplicate and match keys case-insensitively, so what a
// reviewer reads ("noop": true first) need not be what runs.
var ErrAmbiguousKey = errors.New("bus: ambiguous key")

// checkKeys refuses a request whose JSON repeats a key in any object
// (run data included) or whose top-level keys name a field of v's struct
// in another case than its own. Keys are case-sensitive: "NOOP" is not
// "noop". Other unknown keys are left to the decoder.
func checkKeys(data []byte, v any) error {
	fields := jsonFields(v)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := scanValue(dec, "", fields); err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, ErrAmbiguousKey) {
			return err
		}
		return nil // not JSON: the decoder says why
	}
	return nil
}

// jsonFields maps the lower-cased JSON names of the fields of *struct v
// (and "v", the envelope) to their names.
func jsonFields(v any) map[string]string {
	out := map[string]string{"v": "v"}
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[strings.ToLower(name)] = name
	}
	return out
}

// scanValue reads one JSON value, checking the keys of every object in
// it; fields, when not nil, are the names the object's keys must match
// exactly when they match in another case.
func scanValue(dec *json.Decoder, path string, fields map[string]string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			kp := keyPath(path, k)
			if seen[k] {
				return fmt.Errorf("%w: %q appears twice: a key may appear once per object", ErrAmbiguousKey, kp)
			}
			seen[k] = true
			if fields != nil {
				if name, ok := fields[strings.ToLower(k)]; ok && name != k {
					return fmt.Errorf("%w: %q is not the field %q: keys are case-sensitive", ErrAmbiguousKey, kp, name)
				}
			}
			if err := scanValue(dec, kp, nil); err != nil {
				return err
			}
		}
		_, err = dec.Token() // }
		return err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := scanValue(dec, path+"["+strconv.Itoa(i)+"]", nil); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		return err
	}
	return nil
}

// keyPath is path.key, the key quoted when it holds a dot.
func keyPath(path, k string) string {
	if strings.ContainsAny(k, ".[]") {
		k = strconv.Quote(k)
	}
	if path == "" {
		return k
	}
	return path + "." + k
}
