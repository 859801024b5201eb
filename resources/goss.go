package resources

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"

	"github.com/goss-org/goss"
	"github.com/goss-org/goss/outputs"
	"github.com/goss-org/goss/resource"
	gossutil "github.com/goss-org/goss/util"
	"github.com/hashicorp/logutils"
	"github.com/onsi/gomega/format"

	"github.com/manifold-run/manifold/resources/template"
)

// MaxGossConcurrency bounds how many rules of one goss health check are
// validated at once.
const MaxGossConcurrency = 4

// gossMu serialises the goss library's reading of a rules file: it keeps
// the file's format and template filter in package variables.
var gossMu sync.Mutex

// gossSetupOnce sets gomega's formatting as the goss command does, so
// failure messages read the same, and keeps the goss library's debug
// logging (the standard logger, which manifold does not otherwise use)
// off stderr: only its [ERROR] lines pass.
var gossSetupOnce sync.Once

func gossSetup() {
	format.UseStringerRepresentation = true
	log.SetOutput(&logutils.LevelFilter{
		Levels:   []logutils.LogLevel{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"},
		MinLevel: "ERROR",
		Writer:   os.Stderr,
	})
}

// checkGossRules decodes rules as the goss library does, so that an
// unknown resource type or attribute is an error before anything runs.
func checkGossRules(rules map[string]any) error {
	raw, err := json.Marshal(rules)
	if err != nil {
		return fmt.Errorf("goss_rules: %w", err)
	}
	cfg := goss.NewGossConfig()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		msg, _ := strings.CutPrefix(err.Error(), "json: ")
		return fmt.Errorf("goss_rules: %s", msg)
	}
	if len(cfg.Resources()) == 0 {
		return fmt.Errorf("goss_rules: no rules; want at least one goss resource (file, service, port, http, command, ...)")
	}
	return nil
}

// runGoss validates rules with the goss library: OK when every rule
// passes, CRITICAL when one fails, UNKNOWN when the rules cannot be read.
// The output lists each failed rule (goss's compact summary line) and ends
// with "goss: N rules, F failed, S skipped". A goss validation does not
// stop when ctx ends (the library has no cancellation): runGoss returns
// then, and the validation finishes in the background.
func runGoss(ctx context.Context, rules map[string]any) (HealthStatus, string) {
	gossSetupOnce.Do(gossSetup)
	raw, err := json.Marshal(rules)
	if err != nil {
		return HealthUnknown, "goss_rules: " + err.Error()
	}
	f, err := os.CreateTemp("", "manifold-goss-*.json")
	if err != nil {
		return HealthUnknown, "goss: " + err.Error()
	}
	defer os.Remove(f.Name())
	_, err = f.Write(raw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return HealthUnknown, "goss: " + err.Error()
	}
	cfg, err := gossutil.NewConfig(gossutil.WithSpecFile(f.Name()), gossutil.WithMaxConcurrency(MaxGossConcurrency))
	if err != nil {
		return HealthUnknown, "goss: " + err.Error()
	}
	gossMu.Lock()
	results, err := goss.ValidateResults(cfg)
	gossMu.Unlock()
	if err != nil {
		return HealthUnknown, "goss: " + err.Error()
	}

	type report struct {
		out outputs.StructuredOutput
		err error
	}
	done := make(chan report, 1)
	go func() {
		var buf bytes.Buffer
		outputs.Structured{}.Output(&buf, results, gossutil.OutputConfig{})
		var r report
		r.err = json.Unmarshal(buf.Bytes(), &r.out)
		done <- r
	}()
	var r report
	select {
	case <-ctx.Done():
		return HealthCritical, "goss: " + context.Cause(ctx).Error()
	case r = <-done:
	}
	if r.err != nil {
		return HealthUnknown, "goss: reading its results: " + r.err.Error()
	}
	var b strings.Builder
	skipped := 0
	for _, res := range r.out.Results {
		switch res.Result {
		case resource.SKIP:
			skipped++
		case resource.FAIL:
			b.WriteString(strings.TrimSpace(res.SummaryLineCompact))
			b.WriteByte('\n')
		}
	}
	s := r.out.Summary
	fmt.Fprintf(&b, "goss: %d rules, %d failed, %d skipped", s.TestCount, s.Failed, skipped)
	if s.Failed > 0 {
		return HealthCritical, b.String()
	}
	return HealthOK, b.String()
}

// renderKeys renders the templates in m's keys, at every depth (values are
// rendered already). prop names m in errors.
func renderKeys(m map[string]any, scope template.Scope, prop string) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		key := k
		if template.HasTemplate(k) {
			r, err := template.Render(k, scope)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", prop, k, err)
			}
			key = fmt.Sprint(r)
		}
		if sub, ok := v.(map[string]any); ok {
			var err error
			if v, err = renderKeys(sub, scope, prop+"."+key); err != nil {
				return nil, err
			}
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("%s: key %q appears twice once rendered", prop, key)
		}
		out[key] = v
	}
	return out, nil
}
