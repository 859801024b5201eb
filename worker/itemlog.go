package worker

import (
	"context"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/manifold-run/manifold/bus"
)

// newItemHandler is the log handler of item, delivered for the deliv-th
// time, over base.
func newItemHandler(base slog.Handler, item *bus.Task, deliv int) *itemHandler {
	return &itemHandler{base: base, runID: item.RunID, typ: item.Resource.Type, name: item.Resource.Name,
		manifest: item.Manifest, attempt: item.Attempt, deliv: deliv}
}

// itemHandler is the log handler of one resource of a task: the base
// handler with the resource's attributes (run, resource, manifest,
// attempt, delivery and, once its span started, trace and span IDs),
// added only when the first record is handled. Most resources of a
// converged run log nothing at the worker's level, and adding attributes
// to a handler formats them (slog's Logger.With), twice per resource.
type itemHandler struct {
	base slog.Handler
	// What the attributes are made of: the fields of the resource's
	// task they name, not the whole task (hundreds of bytes a resource).
	runID, typ, name, manifest string
	attempt, deliv             int

	mu      sync.Mutex
	span    trace.SpanContext // set by setSpan
	hasSpan bool
	h       slog.Handler // base with the attributes; nil until needed
}

// withSpan returns log with the trace and span IDs of sc: an item's
// logger (itemLog) takes them without formatting anything yet.
func withSpan(log *slog.Logger, sc trace.SpanContext) *slog.Logger {
	if h, ok := log.Handler().(*itemHandler); ok {
		h.setSpan(sc)
		return log
	}
	return slog.New(log.Handler().WithAttrs(spanAttrs(sc)))
}

// setSpan adds the span's trace and span IDs to the logger's attributes
// (to those of records handled from now on, when some were handled
// before).
func (h *itemHandler) setSpan(sc trace.SpanContext) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h != nil {
		h.h = h.h.WithAttrs(spanAttrs(sc))
		return
	}
	h.span, h.hasSpan = sc, true
}

func spanAttrs(sc trace.SpanContext) []slog.Attr {
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())}
}

// handler returns the base handler with the attributes, made on first use.
func (h *itemHandler) handler() slog.Handler {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h == nil {
		attrs := []slog.Attr{slog.String("run_id", h.runID), slog.String("resource", h.typ+"#"+h.name),
			slog.String("manifest", h.manifest), slog.Int("attempt", h.attempt), slog.Int("delivery", h.deliv)}
		if h.hasSpan {
			attrs = append(attrs, spanAttrs(h.span)...)
		}
		h.h = h.base.WithAttrs(attrs)
	}
	return h.h
}

// Enabled implements slog.Handler.
func (h *itemHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.base.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *itemHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h *itemHandler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.handler().WithAttrs(attrs) }

// WithGroup implements slog.Handler.
func (h *itemHandler) WithGroup(name string) slog.Handler { return h.handler().WithGroup(name) }

var _ slog.Handler = (*itemHandler)(nil)
